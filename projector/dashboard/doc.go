// Package dashboard is VERA's live web dashboard: a read model of the VERA
// stream served over HTTP, with Server-Sent Events for live updates and one
// way to write, vera.task.submitted (and vera.run.cancelled) for a session.
// The page is plain HTML, CSS and JavaScript embedded with go:embed; there is
// no build step.
//
// # Wiring
//
//	d, err := dashboard.New(dashboard.Options{
//		Bus:      b,           // required; publishes as source "dashboard"
//		Metrics:  m,           // optional *projector.Metrics, run by the caller
//		DataDir:  dataDir,     // token file and runs/<run_id>/work
//		Template: runConfig,   // model, budgets, auditor... of runs started here
//		Logger:   log,
//	})
//	fmt.Println("dashboard:", "http://127.0.0.1:8844/#token="+d.Token())
//	err = d.Run(ctx, dashboard.DefaultAddr) // or d.Serve(ctx, listener)
//
// Run and Serve return nil when ctx ends, after a graceful shutdown: every
// SSE stream ends (request contexts derive from ctx), in-flight requests
// get 5 seconds, and no goroutine is left behind. Handler returns the
// handler alone for mounting elsewhere; without Serve running, each SSE
// stream reads the bus on its own instead of through the shared hub.
//
// # Sessions
//
// A session is a run; its id is the run id. The stream is the truth: the
// session list is a fold of vera.task.submitted, vera.run.started,
// vera.run.cancelled and vera.run.finished (read incrementally), plus the
// sessions created on the page that have no task yet (kept in memory). A
// new session gets a ULID from the bus's id source. Starting it creates
// DataDir/runs/<run_id>/work (the server builds the path from the checked
// id, never from a path in the request) and publishes vera.task.submitted
// with the Template, the task and work_dir, fenced on "no task on this run
// yet": once a run has a task, starting it again is 409 (the prompt locks
// after start), even for two racing requests.
//
// # HTTP API
//
//	GET  /                          the page (index.html, app.js, style.css)
//	GET  /api/config                template summary, whether metrics are on
//	GET  /api/sessions              SessionList, newest first
//	POST /api/sessions              new session → Session (201)
//	POST /api/runs/{id}/start       StartRequest → StartResponse (201), 409 once started
//	POST /api/runs/{id}/cancel      CancelRequest → vera.run.cancelled (202)
//	GET  /api/runs/{id}/events      SSE: the run's events
//	GET  /api/events                SSE: every run's events
//	GET  /api/metrics               projector.Metrics as JSON (404 without Metrics)
//	GET  /api/blobs/{digest}        a big payload by digest, as text/plain
//
// The SSE streams take types= (comma-separated or repeated type patterns,
// e.g. vera.model.*) and send each stored message as one SSE event whose
// id is its JetStream stream sequence and whose data is the CloudEvents
// envelope exactly as stored (a message that is not an envelope is sent as
// event "malformed"); heartbeats are SSE comments. A client that reconnects
// with Last-Event-ID (EventSource does it by itself; after= works too)
// resumes after that sequence with no gap and no duplicate: each stream
// first subscribes to the hub, then reads what is stored after the client's
// sequence, then forwards live records above the last one sent. The hub is
// one ordered reader of the whole stream per Serve that fans records out to
// every stream; a stream that lags more than 4096 records behind is dropped
// from the hub and catches up from the bus again, so a slow client costs
// one reader while it lags and loses nothing.
//
// # Security
//
//   - Loopback by default (DefaultAddr). On a loopback listener the Host
//     header must be a loopback name (or one of AllowedHosts), which defeats
//     DNS rebinding.
//   - Every mutating endpoint (POST) refuses cross-origin requests
//     (Sec-Fetch-Site, else Origin, against the served Host; see
//     net/http.CrossOriginProtection) and requires the token in the
//     X-Vera-Token header (or Authorization: Bearer). The token is random
//     unless given, and is written to DataDir/dashboard.token with mode 0600;
//     the page takes it from the URL fragment #token=… (never sent to the
//     server) or from its token field, and keeps it in sessionStorage.
//   - Run ids are checked before any use: the bus's run-id syntax (one
//     subject token: letters, digits, '_' and '-') to read, a canonical ULID
//     to start a run and create its directory. No file is ever opened from a
//     request path; static files come from the embedded tree.
//   - The page renders event content with textContent only, never as HTML;
//     a Content-Security-Policy forbids inline scripts; blobs are served as
//     text/plain with a sandbox CSP.
package dashboard
