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
// vera.run.R.<area>.<event> in the stream VERA. The envelope names its run
// in the runid extension; a plain CloudEvent without runid belongs to the
// run its subject names (ParseStored), and either way its run and type
// must be the subject's.
//
// CloudEvents NATS binding: every event the bus publishes is in structured
// mode and marked with the header Content-Type: application/cloudevents+json.
// A CloudEvent an outside tool stored in binary mode (the attributes in
// ce- headers, the body its data alone: the CloudEvents SDKs' default) is
// read by every reader (Consume, Read, Export) as the structured event
// with the same attributes (ParseStoredMsg); its bytes stay as stored, and
// Event.Binary, Record.Envelope and Message.Envelope give its structured
// form where an envelope is written out. VERA's own events carry the
// dataschema of their catalogued type and the traceparent of their run
// (the CloudEvents Distributed Tracing extension).
//
// Ids and deduplication: an event's id (a ULID for VERA's own) is unique
// in its run, not across runs: CloudEvents ids are only unique per source,
// and an outside tool may reuse them in every run. So the run and the id
// together are sent as Nats-Msg-Id, "R/<id>" (MsgID), and the server drops
// a second copy of the event in the same run inside the dedup window (a
// retried or fenced publish, a batch sent again, an import), while another
// run's event with the same id is stored. Ids derived from a cause
// (DeriveID) include the run too.
//
// Export and import: Export writes every message stored for a run, one per
// line. Valid events are written as stored (binary-mode ones as their
// structured envelope); a message whose bytes cannot
// stand alone (malformed, or an event without runid) is written verbatim,
// base64, inside a line of type vera.bus.raw (RawType) that names its
// subject and, when it is malformed, why. Import stores such messages back
// verbatim on their subjects, skipping what the run already holds, so
// export → import → export gives the same file.
package bus
