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
// handler alone for mounting elsewhere; then the first live stream starts
// the shared stream reader, which stops when idle or at Close.
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
// Every session the API describes carries the run's trace id (trace_id:
// bus.TraceID in hex) and, when Options.TraceURL names a tracing UI, its
// trace page there (trace_url), which the page links to from the run's
// header.
//
// # HTTP API
//
//	GET  /                          the page (index.html, app.js, style.css)
//	GET  /api/config                template summary, whether metrics are on
//	GET  /api/sessions              SessionList, newest first
//	POST /api/sessions              new session → Session (201)
//	POST /api/runs/{id}/start       StartRequest → StartResponse (201), 409 once started
//	POST /api/runs/{id}/cancel      CancelRequest → vera.run.cancelled (202)
//	POST /api/runs/{id}/fork        ForkRequest → ForkResponse (201): a fork of the run
//	GET  /api/runs/{id}/events      SSE: the run's events (live=1: and its replies as they stream)
//	GET  /api/evals                 EvalList: the evals (vera eval), newest first
//	GET  /api/evals/{id}            EvalDetail: an eval's eval.Report and progress
//	GET  /api/events                SSE: every run's events
//	GET  /api/metrics               projector.Metrics as JSON (404 without Metrics)
//	GET  /api/blobs/{digest}        a big payload by digest, as text/plain
//	GET  /metrics                   Prometheus text of Metrics (only with Metrics)
//
// Every request but the page needs a token (X-Vera-Token, or
// Authorization: Bearer; the live feeds also take ?token=): a POST the
// token, a read — /metrics included — the token or the read token.
// Options.MetricsPublic serves /metrics without one. RequireToken guards a
// /metrics served elsewhere (vera projector) the same way, with the tokens
// of a data dir's token files (FileTokens, EnsureReadToken).
//
// The SSE streams take types= (comma-separated or repeated type patterns,
// e.g. vera.model.*) and send each stored message as one SSE event whose
// id is its JetStream stream sequence and whose data is the CloudEvents
// envelope exactly as stored (a message that is not an envelope is sent as
// event "malformed"); heartbeats are SSE comments. A client that reconnects
// with Last-Event-ID (EventSource does it by itself; after= works too)
// resumes after that sequence with no gap and no duplicate: each stream
// first subscribes to the hub, then reads what is stored after the client's
// sequence, then forwards live records above the last one sent.
//
// A run's stream with live=1 also forwards the pieces of the model's
// replies as they are generated (internal/live: core NATS messages on
// vera.live.<run_id>.model, which no stream stores) as SSE events named
// "live" whose data is one piece ({call_id, step, seq, content,
// reasoning, tool_name, tool_args, done}) and which carry no id, so that
// a reconnect resumes after the last stored record. They are lossy by
// design: each stream holds one core NATS subscription (no JetStream
// consumer), a client that is behind loses pieces beyond 256 queued, and
// a late viewer sees the reply when vera.model.responded arrives. The
// page shows the reply growing at the top of Model I/O and in its call,
// and replaces it with the recorded reply (its reasoning collapsed, its
// tool calls) when the responded event comes.
//
// The start request may carry model: {tool_protocol, temperature,
// top_p, max_tokens, seed, stream} (ModelSettings), which override the
// template's agent model settings for that run and are checked as the
// catalogue checks them (400 otherwise); GET /api/config shows the
// template's in model_settings.
//
// # Forks
//
// POST /api/runs/{id}/fork starts a fork of a recorded run (what `vera
// fork` does; both build it with internal/forkspec): a new run that
// reproduces the run's first at_step steps from the recording (its
// commands executed again in a fresh sandbox, each step compared) and
// then goes on live with the request's model, tool_protocol, auditor,
// audit_rounds (absent: the original's effective settings, from its
// vera.run.started) and note. The server checks the fork point as the
// CLI does (0 to the run's step count, before its first audited answer:
// 400 otherwise; 404 for an unknown run, 409 for one not started yet),
// picks a new ULID and its work dir DataDir/runs/<new id>/work, and
// publishes vera.task.submitted with fork {from, at_step, note}, the
// labels forked_from and fork_at_step, submitted_by dashboard. The page
// has a "Fork here" control on each agent step's row (disabled from the
// first audited answer on) that opens a form at that step and, once the
// fork is made, opens it. A run that is a fork shows "forked from
// <original> at step N" and its vera.fork.prefix (reproduced, or where it
// diverged); the session list carries forked_from, fork_at_step and, on
// the original, forks (the runs that fork it), which the page links to.
//
// # Evals
//
// An eval (vera eval, package eval) publishes vera.eval.started,
// vera.eval.task_scored and vera.eval.finished under its own id as the
// run-id segment of their subjects; each of its task × profile runs is an
// ordinary run whose task carries the labels eval_id, eval_task,
// eval_profile and eval_attempt. An eval's id is not a run: the session
// list leaves it out (whatever else is published on it) and GET
// /api/evals lists it (name, started, tasks × profiles, scored of
// expected, infra, running, finished or interrupted), from the same fold
// of the stream as the session list (LastSeq is the same). GET
// /api/evals/{id} answers the eval's eval.Report, computed by
// eval.Summarize as `vera eval report` does (the tasks in the order they
// were first scored, since the task set is not on the bus; Tasks and
// Expected from vera.eval.started; the latest attempt of each task ×
// profile), with its state, scored, infra, its last vera.eval.finished
// and last_seq; the server keeps the events of the last 16 evals asked
// for and reads only what is new (direct gets), so polling it is cheap.
// The page lists the evals above the sessions; an eval's page shows its
// progress, the accuracy by round per profile (first, r1..rN, final),
// the auditor's precision and recall and the per-task table (outcome,
// rounds, correct marks, a link to the run's page), and reads the report
// again whenever the eval's own feed (GET /api/runs/{id}/events
// ?types=vera.eval.*&after=last_seq) brings an event. A run of an eval
// links back to it (from its labels); the session list carries eval_id.
//
// # Bounded reading
//
// No number of visitors adds a consumer to the stream or makes another
// component fail:
//
//   - The hub is one ordered reader of the whole stream per server that
//     fans records out to every stream, filtering in process: the
//     dashboard holds this one JetStream consumer whatever the number of
//     streams and filters.
//   - Catch-up reads (a new stream, a resume with Last-Event-ID, a stream
//     dropped for lagging) are direct gets, which create no consumer: one
//     get per matching record (several types are read one subject filter
//     each and merged), at most 8 reads at once, each holding its slot for
//     one batch (256 records or 256 KiB), never while writing to a client.
//   - A stream whose queue holds more than 1024 records or 1 MiB is
//     dropped from the hub and catches up again from where it is: a slow
//     client loses nothing, holds no consumer and delays no one. A client
//     that does not read for 30 seconds is disconnected (it resumes with
//     Last-Event-ID).
//   - The session list reads the history once (one short-lived ordered
//     consumer), then only what is new, by direct gets.
//   - At most Options.MaxStreams (DefaultMaxStreams) streams are served
//     at once; one more is answered 503 with Retry-After. Blob fetches
//     run 4 at a time.
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
//   - Every read of the API and the live feed requires the token or the
//     read-only token (random unless given, in DataDir/dashboard.read-token,
//     mode 0600), which cannot change anything; without either it is 401.
//     The page loads without one. The live feed also takes the token as
//     the token query parameter, since a browser's EventSource cannot set
//     headers; nowhere else is the query a credential. The server logs no
//     request URL and sends Referrer-Policy: no-referrer; a proxy in front
//     of it may log URLs, so give such a setup the read-only token.
//   - Run ids are checked before any use: the bus's run-id syntax (one
//     subject token: letters, digits, '_' and '-') to read, a canonical ULID
//     to start a run and create its directory. No file is ever opened from a
//     request path; static files come from the embedded tree.
//   - The page renders event content with textContent only, never as HTML;
//     a Content-Security-Policy forbids inline scripts; blobs are served as
//     text/plain with a sandbox CSP.
package dashboard
