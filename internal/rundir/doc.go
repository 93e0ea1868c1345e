// Package rundir is how VERA's host processes touch a run's directory: the
// projector writing notes.md, the ledgers, trace.jsonl and the logs, and
// sandboxd preparing the sandbox's /work and measuring it.
//
// # Layout
//
// A run's directory (the work_dir of its task) belongs to VERA:
//
//	<run dir>/            mode 0700, VERA's files 0600
//	  .vera-run           the marker: VERA made this directory for run <id>
//	  notes.md, evidence.jsonl, move_ledger.jsonl, query_ledger.jsonl,
//	  trace.jsonl, container.log, container_events.log, session.log
//	  work/               the sandbox's /work (read-write in the container)
//
// The model's writable tree, work/, and VERA's files never share a
// directory: nothing the sandbox can create, replace or link lies where a
// host process opens a file by name. The container never sees the run
// dir itself; the agent's model reads its notes in its prompt, built from
// the events.
//
// # Opening a run dir
//
// [Open] accepts a run dir only under one of the operator's [Roots], and
// reaches it from the root one path component at a time, each opened with
// O_NOFOLLOW|O_DIRECTORY relative to its parent's descriptor: a symbolic
// link anywhere below the root is refused, never followed. On the way it
// refuses a directory that is another run's (it holds a marker: the path
// would lead into that run's tree, its /work included), a name VERA
// reserves (starting with ".vera"), a directory another user owns or any
// user may write (without the sticky bit). The run dir itself must be new
// (it is created, mode 0700), empty (it is claimed), or VERA's own for the
// same run (its marker, a regular file owned by this process's user, names
// the run); anything else — a file, a link, a directory VERA did not make
// or made for another run — is refused with a message that says why.
// VERA never changes the owner of, renames or mounts a path it did not
// create.
//
// Every later operation goes through the open directory's descriptor
// ([Dir.OpenFile], [Dir.CreateTemp], [Dir.Rename], [Dir.Remove]) and takes
// one name, never a path: a file is opened with O_NOFOLLOW|O_NONBLOCK and
// accepted only when fstat says it is a regular file owned by this
// process's user, so a link, a FIFO or a device in its place is an error,
// not a write through it or a hang.
//
// [UsedBytes] measures a tree the sandbox writes (its /work) the same way:
// from a descriptor, never following a link, never leaving the
// filesystem, with a bounded depth.
package rundir
