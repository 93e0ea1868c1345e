package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// The canary: a variable of this process's environment (so of the
// components `vera up` runs in it) that no operator allowed.
const (
	canaryVar   = "VERA_CANARY_SECRET"
	canaryValue = "canary-value"
	canaryAllow = "--allow-api-key-env " + canaryVar
)

// canaryModel answers the agent (a submitted answer at step 1) and the
// eval's judge scorer (correct).
func canaryModel(t *testing.T) *scriptedmodel.Server {
	return scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		if strings.Contains(req.Transcript(), "You grade answers") {
			return scriptedmodel.Text(`{"explanation":"it says 42","correct":true,"score":1}`), true
		}
		return scriptedmodel.Text("THOUGHT: known\nACTION: {\"tool\":\"submit\",\"args\":{\"answer\":\"42\"}}\nEVIDENCE_USED: none\nSTATUS_UPDATE: RESOLVED\n"), true
	})))
}

// storedHolds reports whether any message of the VERA stream or the dead
// letters of the bus at url (data dir data) holds s, read raw as admin.
func storedHolds(t *testing.T, url, data, s string) bool {
	t.Helper()
	b := bustest.ConnectAs(t, url, auth.Store{Dir: auth.DirOf(data)}, auth.Admin, bus.Options{ReadOnly: true})
	ctx := context.Background()
	for _, name := range []string{bus.StreamName, bus.DeadLetterStream} {
		st, err := b.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
			if m, err := st.GetMsg(ctx, seq); err == nil && (bytes.Contains(m.Data, []byte(s)) || strings.Contains(fmt.Sprint(m.Header), s)) {
				return true
			}
		}
	}
	return false
}

// TestKeyVariablesNeedTheAllowFlag: a task naming an API key variable the
// components were not allowed to read (--allow-api-key-env) never gets it
// read or sent.
//
//   - `vera up` without the flag, `vera run --nats-url … --api-key-env
//     VERA_CANARY_SECRET`: the agent refuses the run (FAILED, exit 4, the
//     reason names the flag), the model server gets no request, and the
//     canary's value is in no output, stored event or dead letter.
//   - `vera replay` of that run (its auditor on) with --reverify stops,
//     exit 2, naming the flag: re-auditing would send the recording's key
//     variable to the recording's server.
//   - `vera eval` without --nats-url, its profiles file naming the canary:
//     exit 2 before any bus is started.
//   - `vera up --allow-api-key-env VERA_CANARY_SECRET`: the same run is
//     RESOLVED and the server sees the key; `vera eval --nats-url` whose
//     judge scorer (here, in this process) would use the profile's key
//     variable needs the flag too, and with it both the agent's and the
//     judge's requests carry the key.
func TestKeyVariablesNeedTheAllowFlag(t *testing.T) {
	t.Setenv("NATS_URL", "")
	t.Setenv("VERA_API_KEY_ENV", "")
	t.Setenv(canaryVar, canaryValue)
	model := canaryModel(t)
	var outputs []string
	noCanaryOut := func() {
		t.Helper()
		for _, o := range outputs {
			if strings.Contains(o, canaryValue) {
				t.Errorf("an output holds the canary's value:\n%s", o)
			}
		}
	}

	// Bad allow-list flags: a pasted key is refused and not repeated.
	const pasted = "sk-proj-PASTEDKEY0123456789abcdefXYZ"
	for _, args := range [][]string{
		{"agent", "--nats-url", "nats://127.0.0.1:9", "--allow-api-key-env", pasted},
		{"verifierd", "--nats-url", "nats://127.0.0.1:9", "--allow-api-key-env", pasted},
		{"run", "--task", "x", "--work-dir", t.TempDir(), "--model-base-url", "http://127.0.0.1:9", "--model", "m", "--allow-api-key-env", pasted},
	} {
		out, errOut, code := runCLI(t, args...)
		if code != exitUsage || strings.Contains(out+errOut, pasted) || !strings.Contains(errOut, "--allow-api-key-env must name environment variables") {
			t.Errorf("vera %s --allow-api-key-env KEY: exit %d\n%s%s", args[0], code, out, errOut)
		}
	}

	// The eval's task set and a profiles file naming the canary.
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(tasks, []byte(`{"id":"t1","task":"What is the answer?","answer":"42","scorer":{"type":"judge","rubric":"the answer is 42"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	profiles := filepath.Join(dir, "profiles.yaml")
	if err := os.WriteFile(profiles, []byte(fmt.Sprintf("profiles:\n  canary:\n    model: {base_url: %q, name: scripted, api_key_env: %s, tool_protocol: text}\n    max_steps: 3\n",
		model.URL(), canaryVar)), 0o644); err != nil {
		t.Fatal(err)
	}

	// Embedded `vera eval`: stopped before a bus exists.
	evalData := t.TempDir()
	out, errOut, code := runCLI(t, "eval", tasks, "--profiles-file", profiles, "--profiles", "canary", "--data-dir", evalData, "--log-level", "warn")
	outputs = append(outputs, out, errOut)
	const wantEval = "profile canary model: api_key_env " + canaryVar + " is not one vera eval may read; start it with " + canaryAllow
	if code != exitUsage || !strings.Contains(errOut, wantEval) {
		t.Errorf("embedded vera eval: exit %d, want %d and %q\n%s\n%s", code, exitUsage, wantEval, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(evalData, "nats")); err == nil {
		t.Error("vera eval started a bus before refusing")
	}

	// `vera up` without the flag: its agent refuses the task.
	data := veraDataDir(t)
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, upErr, stopUp := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "", "--no-sandboxd",
		"--work-root", os.TempDir(), "--log-level", "info")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	out, errOut, code = runCLI(t, "run", "--nats-url", url, "--task", "What is the answer?", "--work-dir", filepath.Join(dir, "w1"),
		"--model-base-url", model.URL(), "--model", "scripted", "--api-key-env", canaryVar, "--tool-protocol", "text", "--max-steps", "3", "--auditor")
	outputs = append(outputs, out, errOut)
	const wantRun = "task refused: model: api_key_env " + canaryVar + " is not one this agent may read; start it with " + canaryAllow
	if code != exitRunFailed || !strings.Contains(out, wantRun) {
		t.Errorf("vera run against vera up without the flag: exit %d, want %d and %q\n%s\n%s", code, exitRunFailed, wantRun, out, errOut)
	}
	if n := model.Count(); n != 0 {
		t.Errorf("the model server received %d requests", n)
	}
	m := regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in\n%s", out)
	}
	refused := m[1]

	// The refused run, exported and re-verified elsewhere: its auditor
	// would call the recording's model with the recording's variable.
	export := filepath.Join(dir, "refused.jsonl")
	if _, errOut, code := runCLI(t, "events", "export", "--nats-url", url, "--run", refused, "-o", export); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, errOut)
	}
	if stored := storedHolds(t, url, data, canaryValue); stored {
		t.Error("the bus stores the canary's value")
	}
	stopUp()
	outputs = append(outputs, upOut.String(), upErr.String())
	t.Setenv("VERA_DATA_DIR", t.TempDir())
	out, errOut, code = runCLI(t, "replay", export, "--reverify", "--no-sandbox", "--log-level", "warn")
	outputs = append(outputs, out, errOut)
	wantReplay := "recorded run " + refused + ": model (the auditor's: the run has no auditor model): api_key_env " + canaryVar +
		" is not one vera replay may read; start it with " + canaryAllow
	if code != exitUsage || !strings.Contains(errOut, wantReplay) {
		t.Errorf("vera replay --reverify: exit %d, want %d and %q\n%s\n%s", code, exitUsage, wantReplay, out, errOut)
	}
	if b, err := os.ReadFile(export); err != nil || bytes.Contains(b, []byte(canaryValue)) {
		t.Errorf("the export holds the canary's value (%v)", err)
	}
	if n := model.Count(); n != 0 {
		t.Errorf("the model server received %d requests", n)
	}
	noCanaryOut()

	// `vera up --allow-api-key-env VERA_CANARY_SECRET`: the same task runs.
	data = veraDataDir(t)
	addr = bustest.FreeAddr(t)
	url = "nats://" + addr
	upOut, upErr, stopUp = start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "", "--no-sandboxd",
		"--work-root", os.TempDir(), "--log-level", "info", "--allow-api-key-env", canaryVar)
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	out, errOut, code = runCLI(t, "run", "--nats-url", url, "--task", "What is the answer?", "--work-dir", filepath.Join(dir, "w2"),
		"--model-base-url", model.URL(), "--model", "scripted", "--api-key-env", canaryVar, "--tool-protocol", "text", "--max-steps", "3")
	outputs = append(outputs, out, errOut)
	if code != 0 || !strings.Contains(out, "RESOLVED") {
		t.Errorf("vera run against vera up with the flag: exit %d\n%s\n%s", code, out, errOut)
	}
	agentCalls := model.Count()
	if agentCalls == 0 {
		t.Fatal("the allowed run made no model request")
	}
	m = regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in\n%s", out)
	}
	allowed := m[1]

	// `vera eval --nats-url`: the judge scorer runs in this process.
	evalArgs := []string{"eval", tasks, "--nats-url", url, "--data-dir", data, "--profiles-file", profiles, "--profiles", "canary", "--log-level", "warn", "--quiet"}
	out, errOut, code = runCLIFor(t, 2*time.Minute, evalArgs...)
	outputs = append(outputs, out, errOut)
	const wantJudge = "the judge scorer's model: api_key_env " + canaryVar + " is not one vera eval may read; start it with " + canaryAllow
	if code != exitUsage || !strings.Contains(errOut, wantJudge) {
		t.Errorf("vera eval --nats-url, its judge not allowed: exit %d, want %d and %q\n%s\n%s", code, exitUsage, wantJudge, out, errOut)
	}
	if n := model.Count(); n != agentCalls {
		t.Errorf("the refused eval made %d model requests", n-agentCalls)
	}
	out, errOut, code = runCLIFor(t, 2*time.Minute, append(evalArgs, "--allow-api-key-env", canaryVar)...)
	outputs = append(outputs, out, errOut)
	if code != 0 || !strings.Contains(out, "100.0% (1/1)") {
		t.Errorf("vera eval --nats-url with the flag: exit %d\n%s\n%s", code, out, errOut)
	}
	judged := false
	for _, r := range model.Requests() {
		if r.APIKey() != canaryValue {
			t.Errorf("request %d sent key %q", r.Index, r.APIKey())
		}
		judged = judged || strings.Contains(r.Transcript(), "You grade answers")
	}
	if !judged {
		t.Error("the judge scorer made no request")
	}
	if storedHolds(t, url, data, canaryValue) {
		t.Error("the bus stores the canary's value")
	}
	stopUp()
	outputs = append(outputs, upOut.String(), upErr.String())

	// `vera fork` of the allowed run, in a process without the flag
	// (embedded, on the same data dir): the fork keeps the original's key
	// variable, and stops before it is submitted.
	before := model.Count()
	out, errOut, code = runCLI(t, "fork", allowed, "--at-step", "0", "--data-dir", data, "--log-level", "warn")
	outputs = append(outputs, out, errOut)
	const wantFork = "the fork's model: api_key_env " + canaryVar + " is not one vera fork may read; start it with " + canaryAllow
	if code != exitUsage || !strings.Contains(errOut, wantFork) {
		t.Errorf("vera fork: exit %d, want %d and %q\n%s\n%s", code, exitUsage, wantFork, out, errOut)
	}
	if strings.Contains(out, "submitted") || model.Count() != before {
		t.Errorf("the refused fork was submitted or called the model:\n%s", out)
	}
	noCanaryOut()
}
