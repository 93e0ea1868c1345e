package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// sandbox2Script is a research run that uses what Sandbox II adds: a shell
// function defined in one step and used in the next (the persistent
// session), the file tool (create, then str_replace), an answer submitted
// as a file, which the auditor reads in its own container and accepts.
func sandbox2Script() (scriptedmodel.Rule, string) {
	answer := "VERA 1.2.0 was released on DATE (" + releasesURL + ", " + newsURL + ").\n"
	create, _ := json.Marshal(map[string]any{"tool": "edit", "args": map[string]any{"op": "create", "path": "/work/output/answer.md", "file_text": answer}})
	agent := map[int]string{
		1: turn(`{"tool":"shell","args":{"cmd":"page() { curl -s \"$1\" | grep -o '[0-9-]*2026[0-9-]*\\|released on [0-9-]*'; }; page `+releasesURL+`"}}`, "none", "CONTINUE"),
		2: turn(`{"tool":"shell","args":{"cmd":"page `+newsURL+`"}}`, "ev_0001", "CONTINUE"),
		3: turn(`{"tool":"notes_append","args":{"text":"both pages give 2026-03-14 (ev_0001, ev_0002)"}}`, "ev_0001, ev_0002", "CONTINUE"),
		4: turn(string(create), "ev_0001, ev_0002", "CONTINUE"),
		5: turn(`{"tool":"edit","args":{"op":"str_replace","path":"/work/output/answer.md","old_str":"on DATE","new_str":"on 2026-03-14"}}`, "ev_0001, ev_0002", "CONTINUE"),
		6: turn(`{"tool":"submit","args":{"answer_file":"/work/output/answer.md"}}`, "ev_0001, ev_0002", "RESOLVED"),
	}
	decompose := `{"summary":[{"step":1,"source":"` + releasesURL + `","finding":"2026-03-14"},{"step":2,"source":"` + newsURL + `","finding":"2026-03-14"}],
"likely_errors":[],
"checks":[{"source":"/work/output/answer.md","question":"Does the answer file give 2026-03-14, as both pages do?","load_bearing":true}]}`
	checks := []string{
		`{"command":"cat /work/output/answer.md; curl -s ` + releasesURL + ` | grep -o 'released on [0-9-]*'"}`,
		`{"verdict":"yes","evidence":"answer.md and the release page: 2026-03-14","citations":["` + releasesURL + `","` + newsURL + `"]}`,
	}
	judge := `{"explanation":"The answer file gives 2026-03-14; two independent sources agree.","score":4,"instructions":[]}`
	return scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		u := req.LastUserMessage()
		switch {
		case decomposeRE.MatchString(u):
			return scriptedmodel.Text(decompose), true
		case checkRE.MatchString(u):
			m := checkRE.FindStringSubmatch(u)
			n := 0
			for _, c := range m[2] {
				n = n*10 + int(c-'0')
			}
			if n < 1 || n > len(checks) {
				return scriptedmodel.Reply{}, false
			}
			return scriptedmodel.Text(checks[n-1]), true
		case judgeRE.MatchString(u):
			return scriptedmodel.Text(judge), true
		}
		n := 0
		for _, m := range regexp.MustCompile(`\n\[step (\d+)\] ACTION:`).FindAllStringSubmatch(u, -1) {
			k := 0
			for _, c := range m[1] {
				k = k*10 + int(c-'0')
			}
			n = max(n, k)
		}
		r, ok := agent[n+1]
		return scriptedmodel.Text(r), ok
	}), answer
}

// TestSystemSandboxIIRun: `vera up` and `vera run` with the auditor, the
// scripted model over HTTP and real containers: a shell function defined
// in step 1 works in step 2, the answer is written with the edit tool and
// submitted as a file, the auditor checks the file in its own container,
// and the run ends RESOLVED with the file's content and digest.
func TestSystemSandboxIIRun(t *testing.T) {
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	netName := dockertest.Network(t, docker)
	dockertest.WebServer(t, docker, img, netName, systemPages)
	script, answer := sandbox2Script()
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(script))
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--work-root", os.TempDir(),
		"--image", img, "--network", netName, "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })

	work := filepath.Join(t.TempDir(), "work")
	out, runID := auditedRun(t, url, model.URL(), work, "When was VERA 1.2.0 released? Cite independent sources; answer in /work/output/answer.md.", 10)
	for _, want := range []string{"$ page " + newsURL, "edit create /work/output/answer.md", "edit str_replace /work/output/answer.md",
		"auditor: round 1 accepted", "RESOLVED after 6 steps", "released on 2026-03-14"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	content, err := os.ReadFile(filepath.Join(work, "work", "output", "answer.md"))
	if err != nil || string(content) != strings.Replace(answer, "DATE", "2026-03-14", 1) {
		t.Fatalf("answer file: %q %v", content, err)
	}
	sum := sha256.Sum256(content)
	tail, _, _ := runCLI(t, "events", "tail", "--nats-url", url, "--run", runID, "--no-follow", "--json")
	var fin catalog.RunFinished
	var fnOut, auditorRead bool
	for _, line := range strings.Split(tail, "\n") {
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch ev.Type {
		case catalog.TypeRunFinished:
			_ = json.Unmarshal(ev.Data, &fin)
		case catalog.TypeToolFinished:
			var tf catalog.ToolFinished
			_ = json.Unmarshal(ev.Data, &tf)
			if tf.RequestID == "req-s0002" && strings.Contains(tf.Stdout.Head, "2026-03-14") && tf.Session == catalog.SessionPersistent {
				fnOut = true
			}
			if tf.Requester == catalog.RequesterAuditor && strings.Contains(tf.Stdout.Head, "VERA 1.2.0 was released on 2026-03-14") {
				auditorRead = true
			}
		}
	}
	if !fnOut {
		t.Error("step 2 did not fetch the page through the function step 1 defined")
	}
	if !auditorRead {
		t.Error("the auditor did not read the answer file in its container")
	}
	if fin.Outcome != catalog.OutcomeResolved || fin.AnswerFile != "/work/output/answer.md" || fin.AnswerSHA256 != hex.EncodeToString(sum[:]) || fin.Answer != string(content) {
		t.Errorf("run.finished = %+v", fin)
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}
