package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// TestEndToEndWithSandbox runs the agent against the real sandbox daemon
// and a real container: the commands run, cd and export persist from one
// step to the next, and the output comes back as evidence. It is skipped
// without Docker (see dockertest.Client), unless VERA_REQUIRE_DOCKER=1.
// The model answers in the text format (the run's tool_protocol is auto,
// the default, which the first reply decides as text).
func TestEndToEndWithSandbox(t *testing.T) {
	e2eWithSandbox(t, "e2e-agent-sandbox", "", func(step int, action string) scriptedmodel.Reply {
		return scriptedmodel.Text("THOUGHT: go\n" + action + "\nEVIDENCE_USED: none\nSTATUS_UPDATE: continuing\n")
	})
}

// TestEndToEndWithSandboxNative is TestEndToEndWithSandbox with native
// tool calls: tool_protocol native, and auto deciding native.
func TestEndToEndWithSandboxNative(t *testing.T) {
	asCall := func(step int, action string) scriptedmodel.Reply {
		var a struct {
			Tool string         `json:"tool"`
			Args map[string]any `json:"args"`
		}
		if err := json.Unmarshal([]byte(action), &a); err != nil {
			t.Fatal(err)
		}
		a.Args["thought"], a.Args["evidence_used"], a.Args["status_update"] = "go", []string{}, "continuing"
		args, _ := json.Marshal(a.Args)
		return scriptedmodel.Reply{NullContent: true, ToolCalls: []scriptedmodel.ToolCall{{Name: a.Tool, Arguments: string(args)}}}
	}
	t.Run("native", func(t *testing.T) { e2eWithSandbox(t, "e2e-native-sandbox", catalog.ToolProtocolNative, asCall) })
	t.Run("auto", func(t *testing.T) { e2eWithSandbox(t, "e2e-auto-sandbox", catalog.ToolProtocolAuto, asCall) })
}

// e2eWithSandbox runs a three-step research run through real sandboxd,
// the model's replies made by answer from each step's action.
func e2eWithSandbox(t *testing.T, run string, proto catalog.ToolProtocol, answer func(step int, action string) scriptedmodel.Reply) {
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	srv, b := bustest.New(t)
	log := bustest.Logger(t)
	root := t.TempDir()
	t.Cleanup(func() {
		ctx := context.Background()
		list, _ := docker.ContainerList(ctx, container.ListOptions{All: true})
		for _, c := range list {
			for _, n := range c.Names {
				if strings.HasPrefix(n, "/vera-"+run) {
					_ = docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
				}
			}
		}
	})

	replies := map[int]string{
		1: `{"tool":"shell","args":{"cmd":"mkdir -p sub && cd sub && echo 42 > answer.txt && export ANSWER_FILE=answer.txt && pwd"}}`,
		2: `{"tool":"shell","args":{"cmd":"cat \"$ANSWER_FILE\" && pwd"}}`,
		3: `{"tool":"submit","args":{"answer":"42 (ev_0002)"}}`,
	}
	stepRE := regexp.MustCompile(`\n\[step (\d+)\] ACTION:`)
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		n := 0
		for _, m := range stepRE.FindAllStringSubmatch(req.LastUserMessage(), -1) {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
		action, ok := replies[n+1]
		if !ok {
			return scriptedmodel.Reply{}, false
		}
		return answer(n+1, action), true
	})))

	d, err := sandboxd.New(bustest.Connect(t, srv.ClientURL(), bus.Options{Source: "sandboxd", ReadOnly: true}), docker, sandboxd.Config{
		Image: img, WorkRoot: filepath.Join(root, "runs"), SpoolDir: filepath.Join(root, "spool"),
		Logger: log, Memory: 512 << 20, PidsLimit: 256, WorkRoots: []string{os.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	var clients []*llm.Client
	ab := bustest.Connect(t, srv.ClientURL(), bus.Options{Source: "agents", ReadOnly: true})
	a, err := agents.New(ab, agents.Config{
		ID: "e2e", Logger: log,
		Models: func(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
			cfg := llmbus.Config(mc)
			cfg.Recorder = llmbus.New(ab, llmbus.Options{Logger: log})
			cfg.Logger = log
			c, err := llm.New(cfg)
			if err == nil {
				clients = append(clients, c)
			}
			return c, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, f := range []func(context.Context) error{d.Run, a.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				t.Errorf("component: %v", err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, c := range clients {
			c.Close()
		}
	})

	ev, err := b.Events.New(run, catalog.TaskSubmitted{SubmittedBy: "test", RunConfig: catalog.RunConfig{
		Task: "What number is in answer.txt?", WorkDir: filepath.Join(root, "work"),
		Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted", ToolProtocol: proto},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}

	var evidence []catalog.EvidenceRecorded
	var steps []catalog.AgentStep
	var finished *catalog.RunFinished
	deadline := time.Now().Add(3 * time.Minute)
	for finished == nil && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		evs, err := b.ReadRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		evidence, steps = nil, nil
		for _, e := range evs {
			p, err := catalog.Decode(e.Type, e.Data)
			if err != nil {
				continue
			}
			switch p := p.(type) {
			case *catalog.EvidenceRecorded:
				evidence = append(evidence, *p)
			case *catalog.AgentStep:
				steps = append(steps, *p)
			case *catalog.RunFinished:
				finished = p
			}
		}
	}
	if finished == nil {
		t.Fatalf("run did not finish; evidence so far: %+v", evidence)
	}
	if finished.Outcome != catalog.OutcomeResolved || finished.Answer != "42 (ev_0002)" {
		t.Fatalf("finished = %+v", finished)
	}
	if len(evidence) != 2 {
		t.Fatalf("evidence = %+v", evidence)
	}
	want := catalog.ToolProtocolText
	if proto != "" {
		want = catalog.ToolProtocolNative
	}
	for _, st := range steps {
		if st.Protocol != want || st.FormatError != "" {
			t.Errorf("step %d: protocol %q, format error %q; want %s", st.Step, st.Protocol, st.FormatError, want)
		}
	}
	got := fmt.Sprintf("%s|%d", evidence[1].Excerpt, evidence[1].ExitCode)
	if !strings.Contains(got, "42") || !strings.Contains(got, "/work/sub") || !strings.HasSuffix(got, "|0") {
		t.Errorf("second command's evidence = %q: want 42 read in /work/sub (cd and export persisted)", got)
	}
}
