package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/docker/docker/client"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/verifierd/deepverify"
	"github.com/vera-run/vera/verifierd/logic"
)

// Sandbox is what real tool execution needs: a Docker client and the
// sandboxd configuration (image, limits). WorkRoot and SpoolDir default to
// directories under the replay's scratch area.
type Sandbox struct {
	Docker *client.Client
	Config sandboxd.Config
}

// group runs the replay's components under one component.Supervisor
// until Stop; a component that fails is reported by Err (and stops the
// others).
type group struct {
	sup component.Supervisor
}

func newGroup(ctx context.Context, log *slog.Logger) *group {
	g := &group{}
	g.sup.Logger = log
	g.sup.Start(ctx)
	return g
}

// Go runs unit name.
func (g *group) Go(name string, run func(context.Context) error) { g.sup.Go(name, run) }

// Err returns the errors of components that stopped on their own so far.
func (g *group) Err() error { return g.sup.Err() }

// Stop cancels every component and waits for them.
func (g *group) Stop() { _ = g.sup.Stop() }

// start runs set's components on the scratch bus, each connected as its
// identity.
func (e *env) start(ctx context.Context, set wiring.Set) {
	set.Connect = e.connect
	set.Logger = e.log
	set.Start(ctx, &e.group.sup)
}

// env is a scratch bus with VERA's components on it.
type env struct {
	scratch *Scratch
	bus     *bus.Bus // the replay's own connection
	group   *group
	log     *slog.Logger
	clients []*llm.Client
	tmp     string // sandboxd's work root and spool, removed at close
}

func newEnv(ctx context.Context, log *slog.Logger) (*env, error) {
	sc, err := NewScratch(ctx, log)
	if err != nil {
		return nil, err
	}
	b, err := sc.Connect(ctx, SourceReplay)
	if err != nil {
		sc.Close()
		return nil, err
	}
	return &env{scratch: sc, bus: b, group: newGroup(ctx, log), log: log}, nil
}

// close stops the components and the scratch bus.
func (e *env) close() error {
	e.group.Stop()
	for _, c := range e.clients {
		c.Close()
	}
	err := e.scratch.Close()
	if e.tmp != "" {
		os.RemoveAll(e.tmp)
	}
	return err
}

func (e *env) connect(ctx context.Context, source string) (*bus.Bus, error) {
	return e.scratch.Connect(ctx, source)
}

// models returns a model factory whose clients record their calls on b.
// override, when set, replaces every requested model.
func (e *env) models(b *bus.Bus, override *catalog.ModelConfig) func(catalog.ModelConfig) (llm.Completer, error) {
	rec := llmbus.New(b, llmbus.Options{Logger: e.log})
	var mu sync.Mutex
	return func(mc catalog.ModelConfig) (llm.Completer, error) {
		if override != nil {
			mc = *override
		}
		cfg := llmbus.Config(mc)
		cfg.Recorder, cfg.Logger = rec, e.log
		c, err := llm.New(cfg)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		e.clients = append(e.clients, c)
		mu.Unlock()
		return c, nil
	}
}

// startFiles runs the live file projector, writing the files of runs
// whose work dir is workDir (the replay run's, which the operator named
// or the replay made).
func (e *env) startFiles(ctx context.Context, workDir string) error {
	e.start(ctx, wiring.Set{Projector: &projector.FilesConfig{Roots: []string{workDir}}})
	return nil
}

// startLogic runs the logic verifier (window 0: its default).
func (e *env) startLogic(ctx context.Context, window int) error {
	e.start(ctx, wiring.Set{Logic: &logic.Config{Window: window}})
	return nil
}

// startAuditor runs the DeepVerifier auditor with the given models (nil:
// clients recording on the bus, override replacing the run's model).
func (e *env) startAuditor(ctx context.Context, models func(catalog.ModelConfig) (llm.Completer, error), override *catalog.ModelConfig) error {
	set := wiring.Set{DeepVerify: &deepverify.Config{}}
	set.Models = func(_ string, b *bus.Bus) component.Models {
		m := models
		if m == nil {
			m = e.models(b, override)
		}
		return func(_ string, mc catalog.ModelConfig) (llm.Completer, error) { return m(mc) }
	}
	e.start(ctx, set)
	return nil
}

// startSandbox runs sandboxd; the replay run's work dir is one of its
// roots.
func (e *env) startSandbox(ctx context.Context, sb *Sandbox, workDir string) error {
	cfg := sb.Config
	cfg.WorkRoots = append(append([]string(nil), cfg.WorkRoots...), workDir)
	if cfg.WorkRoot == "" || cfg.SpoolDir == "" {
		if e.tmp == "" {
			var err error
			if e.tmp, err = os.MkdirTemp("", "vera-replay-sandbox-"); err != nil {
				return err
			}
		}
		if cfg.WorkRoot == "" {
			cfg.WorkRoot = filepath.Join(e.tmp, "runs")
		}
		if cfg.SpoolDir == "" {
			cfg.SpoolDir = filepath.Join(e.tmp, "spool")
		}
	}
	e.start(ctx, wiring.Set{Sandbox: &wiring.Sandbox{Config: cfg, Docker: sb.Docker}})
	return nil
}

// transfer copies run runID from src to dst (blobs included); events dst
// already holds are skipped.
func transfer(ctx context.Context, src *bus.Bus, runID string, dst *bus.Bus) (int, error) {
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		_, err := src.Export(ctx, pw, bus.ExportOptions{RunID: runID})
		pw.CloseWithError(err)
		errc <- err
	}()
	st, err := dst.Import(ctx, pr, bus.ImportOptions{})
	pr.CloseWithError(errors.New("import ended"))
	if eerr := <-errc; eerr != nil && err == nil {
		err = eerr
	}
	if err != nil {
		return st.Imported, fmt.Errorf("copy run %s: %w", runID, err)
	}
	if len(st.Bad) > 0 {
		return st.Imported, fmt.Errorf("copy run %s: %v", runID, st.Bad[0])
	}
	return st.Imported, nil
}
