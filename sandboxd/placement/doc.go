// Package placement places runs on sandbox daemons when several of them
// (possibly on different machines) consume one VERA stream: each run is
// leased to exactly one daemon, daemons advertise their capacity, and the
// runs of a daemon that died are taken over by the others after a known
// time. All coordination is compare-and-set on a JetStream key-value
// bucket (bus.PlacementBucket, opened with bus.Bus.PlacementKV); nothing
// here is a home-made consensus.
//
// # Keys
//
//   - daemons.<id>: one per daemon id, JSON {id, instance, host, capacity,
//     running, beat, stopped}. instance is fresh (a ULID) per process, so
//     a restarted daemon is told from the one before it. The live
//     instance rewrites the key every LeaseTTL/5 (a heartbeat: an Update
//     on the revision it last wrote, beat incremented).
//   - runs.<run>: the lease, JSON {daemon, instance, since, from}. It is
//     created (kv.Create: fails if it exists) by the daemon that places
//     the run, rewritten (kv.Update on its last revision) by a daemon
//     taking it over or by a restarted instance resuming it, and deleted
//     (kv.Delete on its last revision) by its owner when the run ended.
//
// Every write is a compare-and-set on the key's revision, so of two
// daemons racing for a run exactly one wins; the loser learns the owner.
//
// # Liveness and timings (LeaseTTL, default 20 s)
//
// A daemon is dead, in the eyes of another process, when that process has
// observed no change of its daemons.<id> key for LeaseTTL, measured on its
// own monotonic clock from the moment it observed the last change (wall
// clocks of different machines are never compared), or when the key is
// deleted. A key never seen counts from the moment the observer started
// watching. So, with heartbeats every LeaseTTL/5:
//
//   - a daemon killed (kill -9, lost machine, cut network) loses its
//     leases between 0.8×LeaseTTL and LeaseTTL after its last stored
//     heartbeat, plus the watch delivery delay;
//   - a daemon that cannot store a heartbeat for LeaseTTL/2 is fenced
//     (Fenced): it must start no command and interrupt the ones running,
//     which leaves it LeaseTTL/2 of margin before another daemon may take
//     its runs. The fence clears when a heartbeat is stored again (after
//     its own leases are read back), but runs taken over meanwhile are no
//     longer Mine;
//   - a daemon closed cleanly (Close) writes stopped:true and keeps its
//     leases: a restarted instance of the same id takes the key and
//     resumes them at once; other daemons take them over once LeaseTTL
//     has passed since they observed the stop.
//
// A process trusts "no change observed" only while its watch is current:
// it takes nothing over unless the watch delivered its own latest
// heartbeat within LeaseTTL/2, and it watches again when heartbeats are
// stored but not delivered back for LeaseTTL (after a server restart the
// watch's consumer is otherwise noticed lost only seconds later). So a
// stalled watch delays takeovers; it never causes one.
//
// A new instance whose key holds a live instance (changed within LeaseTTL
// as observed by the new one, not stopped) waits until that instance has
// been silent for LeaseTTL, then takes the key with compare-and-set. It
// then rewrites each lease of its id to its instance (compare-and-set
// again: a lease another daemon took first stays with that daemon), and
// Owned lists them. An instance that finds its key taken by a newer one
// is superseded: it stops, fenced for good (ErrSuperseded).
//
// # Placement and takeover
//
// Place tries Acquire after a stagger that grows with the daemon's load
// (load fraction × LeaseTTL/10, plus up to 5 ms of jitter), so that of
// the daemons racing for a new run the least loaded usually wins; a full
// daemon waits until it has room again or another daemon placed the run.
// Each live, unfenced daemon with room takes over the leases of dead
// daemons the same way: stagger, re-check, compare-and-set the lease to
// itself (from: the dead daemon), and report it on Takeovers. A
// restarted daemon never takes a run leased to another id.
package placement
