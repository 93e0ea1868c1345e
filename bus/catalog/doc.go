// Package catalog is VERA's event catalogue: the Go type of the data member
// of every CloudEvents event VERA carries on NATS JetStream, a registry of
// those types, the JSON Schema of each (generated from the Go types) and the
// generator of docs/events.md.
//
// Types are named vera.<area>.<event> (area and event matching
// ^[a-z][a-z0-9_]*$) and are published on the subject
// vera.run.<run_id>.<area>.<event>. Types under vera.ext.* belong to
// outside tools and are never catalogued; components ignore unknown types.
//
// Every data type implements Payload with a value receiver. Lookup and
// Entries describe the types; Decode turns the data of a received event
// into its Go value; Encode marshals one; Schema and AllSchemas return the
// JSON Schemas; EventsMarkdown renders docs/events.md.
//
// The envelope (specversion, id, source, type, subject, time,
// datacontenttype, runid, causationid) lives in package bus, which this
// package imports for the shared Payload and BlobRef types (bus does not
// import catalog). It imports no component, so any program can use it.
//
// Compatibility: later versions add optional fields to these types; they do
// not change the shape or meaning of existing ones. Decode ignores unknown
// members, and the schemas allow additional properties.
package catalog
