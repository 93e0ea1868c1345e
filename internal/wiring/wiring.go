// Package wiring is the one place that knows VERA's whole set of
// components: which identity each connects as, how its model clients are
// made, and how it is built (each package's New) and run under a
// component.Supervisor. `vera up`, `vera run`, the single-component
// commands (`vera agent`, `vera sandboxd`, `vera verifierd`, `vera
// projector`) and `vera replay` all start components through Set.Start;
// none of them wires a component by hand.
package wiring

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/projector/traces"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/verifierd/deepverify"
	"github.com/vera-run/vera/verifierd/logic"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// Set is a set of components and their configurations; a nil
// configuration leaves that component out.
type Set struct {
	// Connect opens a connection as identity (a catalogue component
	// name). Each component gets its own, as separate processes would.
	Connect func(ctx context.Context, identity string) (*bus.Bus, error)
	// Logger is every component's logger unless its Config names one.
	Logger *slog.Logger

	Agent      *agents.Config
	Sandbox    *Sandbox
	Logic      *logic.Config
	VerifyFast *verifyfast.Config
	DeepVerify *deepverify.Config
	Projector  *projector.FilesConfig
	// Traces, when set, runs the trace projector (OTLP export) as the
	// projector's identity.
	Traces *Traces

	// Models, when set, makes the model factory of a component that calls
	// a model and whose Config has none (a replay's recorded or
	// overriding models). Nil: clients recording their calls on the
	// component's own connection (llmbus), one per model settings, that
	// read only the API key variables KeyEnvs allows.
	Models func(identity string, b *bus.Bus) component.Models
	// KeyEnvs is the allow-list of the environment variables the
	// components' model clients may read as API keys (the operator's
	// --allow-api-key-env and the command's own api-key-env flags). A
	// run whose model settings name another is refused before a request
	// is made: the agent finishes it FAILED, the auditor and VerifyFast
	// say why in their events. Nil: llm.DefaultKeyEnvs (OPENAI_API_KEY
	// and the variable VERA_API_KEY_ENV names), never "any".
	KeyEnvs *llm.KeyEnvs
	// Judge, when set, makes the logic verifier's hybrid judge on its
	// connection (vera verifierd --hybrid).
	Judge func(b *bus.Bus) (*logic.Hybrid, func(), error)

	// NoLive leaves out the live pieces of the agent's streamed replies
	// (internal/live). By default an agent whose Config has no Deltas
	// publishes them on its connection, for `vera run` and the dashboard.
	NoLive bool
}

// Traces configures the live trace projector: where spans go and what
// they hold.
type Traces struct {
	Exporter traces.ExporterConfig
	Live     traces.LiveConfig // Sink is made from Exporter
}

// Sandbox is sandboxd's configuration and its Docker engine.
type Sandbox struct {
	Config sandboxd.Config
	// Docker is the engine's client; nil: one from the environment
	// (DOCKER_HOST…), closed when sandboxd stops.
	Docker *client.Client
	// Image, when set and Config.Image is empty, picks the image with the
	// client (the locally built sandbox image).
	Image func(ctx context.Context, docker *client.Client) string
}

// Start runs every configured component under sup, each on its own
// connection. It returns at once; sup reports failures (named by
// component) and stops the others.
func (s Set) Start(ctx context.Context, sup *component.Supervisor) {
	if s.Sandbox != nil {
		sb := *s.Sandbox
		s.run(ctx, sup, catalog.ComponentSandboxd, func(ctx context.Context, b *bus.Bus) (component.Component, func(), error) {
			docker, closeDocker := sb.Docker, func() {}
			if docker == nil {
				d, err := sandboxd.NewDockerClient()
				if err != nil {
					return nil, nil, err
				}
				docker, closeDocker = d, func() { d.Close() }
			}
			cfg := sb.Config
			if cfg.Image == "" && sb.Image != nil {
				cfg.Image = sb.Image(ctx, docker)
			}
			if cfg.Logger == nil {
				cfg.Logger = s.Logger
			}
			d, err := sandboxd.New(b, docker, cfg)
			if err != nil {
				closeDocker()
				return nil, nil, err
			}
			return d, closeDocker, nil
		})
	}
	if s.Agent != nil {
		cfg := *s.Agent
		s.run(ctx, sup, catalog.ComponentAgent, func(ctx context.Context, b *bus.Bus) (component.Component, func(), error) {
			done := func() {}
			if cfg.Models == nil {
				cfg.Models, done = s.models(catalog.ComponentAgent, b)
			}
			if cfg.Logger == nil {
				cfg.Logger = s.Logger
			}
			if cfg.Deltas == nil && !s.NoLive {
				pub := LivePublisher(b, cfg.Logger)
				cfg.Deltas = pub.Deltas
				closeModels := done
				done = func() { pub.Close(); closeModels() }
			}
			a, err := newAgent(b, cfg)
			return a, done, err
		})
	}
	if s.Logic != nil {
		cfg := *s.Logic
		s.run(ctx, sup, catalog.ComponentLogic, func(ctx context.Context, b *bus.Bus) (component.Component, func(), error) {
			done := func() {}
			if s.Judge != nil && cfg.Hybrid == nil {
				h, closeJudge, err := s.Judge(b)
				if err != nil {
					return nil, nil, err
				}
				cfg.Hybrid, done = h, closeJudge
			}
			if cfg.Logger == nil {
				cfg.Logger = s.Logger
			}
			l, err := logic.New(b, cfg)
			return l, done, err
		})
	}
	if s.VerifyFast != nil {
		cfg := *s.VerifyFast
		s.run(ctx, sup, catalog.ComponentVerifyFast, func(ctx context.Context, b *bus.Bus) (component.Component, func(), error) {
			done := func() {}
			if cfg.Models == nil {
				cfg.Models, done = s.models(catalog.ComponentVerifyFast, b)
			}
			if cfg.Logger == nil {
				cfg.Logger = s.Logger
			}
			v, err := verifyfast.New(b, cfg)
			return v, done, err
		})
	}
	if s.DeepVerify != nil {
		cfg := *s.DeepVerify
		s.run(ctx, sup, catalog.ComponentDeepVerify, func(ctx context.Context, b *bus.Bus) (component.Component, func(), error) {
			done := func() {}
			if cfg.Models == nil {
				cfg.Models, done = s.models(catalog.ComponentDeepVerify, b)
			}
			if cfg.Logger == nil {
				cfg.Logger = s.Logger
			}
			a, err := deepverify.New(b, cfg)
			return a, done, err
		})
	}
	if s.Projector != nil {
		cfg := *s.Projector
		s.run(ctx, sup, catalog.ComponentProjector, func(ctx context.Context, b *bus.Bus) (component.Component, func(), error) {
			if cfg.Logger == nil {
				cfg.Logger = s.Logger
			}
			f, err := projector.NewFiles(b, cfg)
			return f, nil, err
		})
	}
	if s.Traces != nil {
		tc := *s.Traces
		s.runAs(ctx, sup, "projector.otel", catalog.ComponentProjector, func(ctx context.Context, b *bus.Bus) (component.Component, func(), error) {
			exp, err := traces.NewExporter(ctx, tc.Exporter)
			if err != nil {
				return nil, nil, err
			}
			traces.LogErrors(component.Logger(s.Logger, catalog.ComponentProjector))
			sink, err := traces.NewSink(exp, traces.SinkOptions{})
			if err != nil {
				return nil, nil, err
			}
			shutdown := func() {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				_ = sink.Shutdown(sctx)
			}
			cfg := tc.Live
			cfg.Sink = sink
			if cfg.Options.Content && cfg.Options.Blob == nil {
				cfg.Options.Blob = func(digest string) ([]byte, error) { return b.GetBlob(ctx, digest) }
			}
			if cfg.Logger == nil {
				cfg.Logger = s.Logger
			}
			l, err := traces.NewLive(b, cfg)
			return l, shutdown, err
		})
	}
}

// run adds component identity to sup: connect, build, run, then release
// what build returned and the connection.
func (s Set) run(ctx context.Context, sup *component.Supervisor, identity string,
	build func(ctx context.Context, b *bus.Bus) (component.Component, func(), error)) {
	s.runAs(ctx, sup, identity, identity, build)
}

// runAs is run under a supervisor name of its own (a second component of
// one identity).
func (s Set) runAs(ctx context.Context, sup *component.Supervisor, name, identity string,
	build func(ctx context.Context, b *bus.Bus) (component.Component, func(), error)) {
	sup.Go(name, func(ctx context.Context) error {
		b, err := s.Connect(ctx, identity)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer b.Close()
		c, done, err := build(ctx, b)
		if done != nil {
			defer done()
		}
		if err != nil {
			return err
		}
		return c.Run(ctx)
	})
}

func (s Set) models(identity string, b *bus.Bus) (component.Models, func()) {
	if s.Models != nil {
		return s.Models(identity, b), func() {}
	}
	keys := s.KeyEnvs
	if keys == nil {
		keys = llm.DefaultKeyEnvs(nil)
	}
	m := NewRecordingModels(b, s.Logger, keys.For(KeyEnvsWho(identity)))
	return m.Get, m.Close
}

// KeyEnvsWho names a component in the refusal of a key variable it may
// not read ("this agent").
func KeyEnvsWho(identity string) string {
	switch identity {
	case catalog.ComponentAgent:
		return "this agent"
	case catalog.ComponentDeepVerify:
		return "this auditor"
	case catalog.ComponentVerifyFast:
		return "this VerifyFast scorer"
	case catalog.ComponentLogic:
		return "this logic verifier"
	}
	return "this process"
}

// newAgent builds the agent (a variable so that a test can see the
// configuration the agent gets).
var newAgent = agents.New

// LivePublisher publishes the live pieces of streamed model replies on
// b's connection (vera.live.<run_id>.model; see internal/live for why
// they are not events), as the agent does for its steps.
func LivePublisher(b *bus.Bus, log *slog.Logger) *live.Publisher {
	return live.NewPublisher(b.Conn(), live.Options{Logger: component.Logger(log, catalog.ComponentAgent)})
}

// RecordingModels hands out one model client per model settings, its
// calls recorded on a bus (llmbus), and closes them all at the end (a
// client per call would leave its idle connections open). Its clients read
// only the API key variables of its allow-list: it is the one factory of
// model clients for settings that came in events (runs, evals).
type RecordingModels struct {
	rec  *llmbus.BusRecorder
	log  *slog.Logger
	keys *llm.KeyEnvs

	mu      sync.Mutex
	clients map[string]*llm.Client
}

// NewRecordingModels records the calls of its clients on b; they read
// only the API key variables keys allows (nil: llm.DefaultKeyEnvs, never
// any variable).
func NewRecordingModels(b *bus.Bus, log *slog.Logger, keys *llm.KeyEnvs) *RecordingModels {
	if keys == nil {
		keys = llm.DefaultKeyEnvs(nil)
	}
	return &RecordingModels{rec: llmbus.New(b, llmbus.Options{Logger: log}), log: log, keys: keys, clients: map[string]*llm.Client{}}
}

// Get is a component.Models: the client of mc, made on first use (the run
// does not matter; each call is recorded with its own run). An api_key_env
// the allow-list does not name is refused (llm.ErrKeyEnvNotAllowed) before
// its variable is read.
func (m *RecordingModels) Get(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[mc.ClientKey()]; ok {
		return c, nil
	}
	cfg := llmbus.Config(mc)
	cfg.Recorder, cfg.Logger, cfg.KeyEnvs = m.rec, m.log, m.keys
	c, err := llm.New(cfg)
	if err != nil {
		return nil, err
	}
	m.clients[mc.ClientKey()] = c
	return c, nil
}

// Close closes every client.
func (m *RecordingModels) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.clients {
		c.Close()
	}
}
