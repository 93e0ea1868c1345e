// Package component is the outside shape every VERA component shares, and
// the one supervisor that runs a set of them.
//
// A component is a consumer of the bus (the agent, sandboxd, the logic
// verifier, the DeepVerifier auditor, VerifyFast, the file projector).
// Each lives in its own package and keeps its internals there; outside, each
// looks the same:
//
//	x, err := pkg.New(b, pkg.Config{...}) // b: the component's own connection
//	x.Name()     // its catalogue name: its identity on the bus
//	x.Consumes() // the catalogue types it reacts to
//	x.Produces() // the catalogue types it publishes
//	x.Run(ctx)   // consume until ctx ends, drain, return nil
//
// New calls Config.SetDefaults, the one documented place where a
// component's defaults are filled and its settings checked, so a zero
// Config is a working one wherever that makes sense. Three conventions are
// shared through this package:
//
//   - durable consumer names: Durable(component, purpose);
//   - the model factory: Models, one client per run's model settings;
//   - the logger: Logger, slog.Default() when none is given, tagged with
//     the component's name.
//
// Every delivery goes through Consume, which checks a catalogued event's
// data against its type's JSON Schema (catalog.Validate) before the
// component sees it: data that does not decode or breaks the schema is
// dead-lettered with the reason, never dropped in silence.
//
// Supervisor runs a set of components (and the other long-running parts of
// a process, such as an HTTP server): it stops all when one fails, naming
// it, drains them when its context ends, and reports how each ended.
//
// The conformance suite every component passes is in componenttest.
package component
