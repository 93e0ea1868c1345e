// Package bus is VERA's event bus: the CloudEvents envelope every component
// speaks, the NATS subject scheme, the JetStream streams behind them, and the
// operations every component needs on top: publish with deduplication and
// fencing, durable consumption with ack/retry/dead-letter, ordered replay,
// the object store for big payloads, and export/import of recorded runs.
//
// Components (agents, sandboxd, verifierd/*, projector) never call each
// other; they read and append events through this package. The data types
// of the events live in bus/catalog; this package is agnostic of them and
// carries any well-formed type, including the vera.ext.* types reserved for
// outside tools.
//
// Subjects: an event of type vera.<area>.<event> about run R is stored on
// vera.run.R.<area>.<event> in the stream VERA. Its id (a ULID) is sent as
// Nats-Msg-Id, so the server drops a second copy inside the dedup window.
package bus
