// Package sandboxd is VERA's Docker sandbox daemon, an independent bus
// consumer. It reads vera.tool.requested events, runs each command with
// bash in the run's container through the Docker API, and appends
// vera.tool.started and vera.tool.finished (and vera.tool.session); it
// also turns the containers' own logs and Docker events into
// vera.container.log and vera.container.event.
//
// Containers: one per run and requester role, named vera-<run_id> (the
// agent's, /work read-write) and vera-<run_id>-auditor (/work read-only),
// labelled vera.managed=true, vera.run=<run_id>, vera.role=<role>, so that
// a restarted daemon finds and reuses them. /input is always read-only.
// They are removed when the run ends (unless KeepContainers) and orphans of
// finished runs are reaped at start.
//
// Shell semantics: a run's commands run in a persistent session per
// container (sandbox.session persistent, the default; session.go) or in a
// Docker exec each (exec; exec.go). Either way each request carries the
// state it starts from (cwd, env and, in a session, shell_state: functions,
// aliases, unexported variables, options, umask) and its result reports
// the state it left (cwd_after, exports, shell_state_after), on a channel
// of its own, never in the command's output; the requester passes them
// into its next request. So the shell's state persists exactly as far as
// the event log says, which keeps a replay faithful, and a session that is
// replaced loses no shell state (vera.tool.session says what it lost:
// background processes, when the container restarted). In a session a
// command costs no Docker exec.
//
// The state channel: each container has a shell-state directory, a host
// directory of sandboxd's spool (SpoolDir/<run>/<container>.state, mode
// 0711, owned by sandboxd) mounted read-only at StateMount. Only sandboxd
// makes files in it: per command, before the command can start, the fifo
// its state report is written to (named by the command's nonce in exec
// mode, by its token in a session; mode 0622) and, in a session, the
// request file; per session, the session's wake-up, stdout and stderr
// fifos. The container writes only into those fifos, so its writes go
// through a pipe to sandboxd, never to the host's disk, and it can
// neither create, grow nor list anything there. sandboxd reads each
// report as it is written (keeping at most maxStateBytes, so a writer
// never waits on it) and ends it when the command has ended (see
// stateFifo). A container made by an older sandboxd, with no state mount
// or a read-write one, is recreated on its run's next request, on the
// same /work.
//
// The file tool (tool edit; edittool.go) views and edits files in the
// run's container, as the sandbox user, with package edit. Disk limits
// (disk.go): tmpfs scratch mounts, the read-only state mount, a /work
// watchdog per agent container for the container's whole life (it kills
// background processes that keep writing /work past its limit, and a
// command that does, recorded as vera.container.event vera_disk_limit
// and told to the agent as a notice), and a watchdog on the writable
// layer of a root command.
//
// Timeouts: a timed-out command's processes are all killed by a root
// killer in the container (killScript), which finds them by parentage
// and start time, and treats a process whose leader is a zombie but
// whose other threads run as live (killing it through a live thread).
//
// Exactly once: a request whose vera.tool.finished is on the stream is never
// run again; one whose vera.tool.started is there without a finish was cut
// off by a crash and is reported as interrupted, with the output spooled to
// disk before the crash, instead of being run again.
//
// Concurrency: the request consumer is sharded by run and container (one
// ordering key per agent container, one per auditor request). The agent's requests of a run run one at a time in stream
// order; each auditor request runs as soon as it arrives, in parallel with
// the run's other auditor requests and with the agent's (the auditor's
// checks are independent, and it sends a check's next command only after
// the previous one finished). Creating, restarting and recovering a
// container is serialised per run; the execs themselves are not. At most
// Config.Concurrency commands run at once in all.
package sandboxd
