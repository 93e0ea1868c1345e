package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults for Options.
const (
	DefaultURL            = "nats://127.0.0.1:4222"
	DefaultDedupWindow    = 2 * time.Minute
	DefaultMaxMsgSize     = 1 << 20 // 1 MiB: events stay small, big payloads go to blobs
	DefaultPublishTimeout = 5 * time.Second
	// DefaultPublishBudget is how long a publish keeps retrying a
	// timeout, a missing responder or an unavailable cluster. It is set
	// well beyond a JetStream leader election (nats-server's followers
	// call one 4–9 s after the last heartbeat; a lost meta, stream and
	// consumer leader may be elected one after the other), so that
	// losing a node of a cluster delays a publish but never fails it.
	DefaultPublishBudget = 60 * time.Second
)

// Options configure a connection to the bus. The zero value connects to a
// local server with the defaults above.
type Options struct {
	URL       string // NATS URL(s), comma-separated; default DefaultURL
	CredsFile string // NATS credentials: a .creds file (JWT + seed) or an nkey seed file (NAME.nk); optional
	Name      string // connection name shown by the server; default Source
	Source    string // component name stamped on events this bus builds

	Replicas    int           // stream replicas when the streams are created; default 1
	DedupWindow time.Duration // window in which a repeated event id is dropped
	MaxMsgSize  int32         // largest stored event in bytes
	// Limits bound the streams' sizes (StoreLimits, SplitStore); zero
	// fields leave a stream unbounded. Only admin's EnsureStreams applies
	// them; a component keeps a stream's limits as they are.
	Limits StoreLimits
	// ExtEventsPerRun bounds the outside events of one identity on one
	// run (VERA_EXT's messages per subject); default ExtEventsPerRun.
	ExtEventsPerRun int64
	// Identity is the NATS identity this connection is (the seed file's
	// name: DATA_DIR/creds/NAME.nk); default the name of CredsFile without
	// its extension, else Source.
	Identity string
	// ExtInbound publishes outside events (vera.ext.* types) the way an
	// ext identity must: on vera.extin.<run_id>.<Identity>, through
	// VERA_EXT, which bounds them per run and identity and from which VERA
	// stores them a moment later (the PubAck is VERA_EXT's). Without it
	// they go straight into VERA (admin, imports, a server without auth).
	ExtInbound bool

	PublishTimeout time.Duration // per publish attempt
	// PublishBudget is how long a publish keeps retrying (same
	// Nats-Msg-Id, backoff up to 2 s) after a timeout, a missing
	// responder or an unavailable cluster before it returns an error;
	// default DefaultPublishBudget. A shutdown (the context) ends it
	// sooner. A denial, an invalid event or a fencing conflict is never
	// retried.
	PublishBudget time.Duration

	// ReadOnly connects without creating or updating streams (for tools
	// that only read, and for credentials that may not manage streams).
	ReadOnly bool

	// ConnectWait keeps retrying the first connection for this long; zero
	// fails at once when no server answers.
	ConnectWait time.Duration

	Clock  Clock
	IDs    IDSource
	Logger *slog.Logger

	// NATSOptions are appended to VERA's own connection options.
	NATSOptions []nats.Option
}

func (o *Options) setDefaults() {
	if o.URL == "" {
		o.URL = DefaultURL
	}
	if o.Name == "" {
		o.Name = "vera-" + o.Source
	}
	if o.Identity == "" {
		o.Identity = identityOf(o.CredsFile, o.Source)
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.DedupWindow <= 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	if o.MaxMsgSize <= 0 {
		o.MaxMsgSize = DefaultMaxMsgSize
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = DefaultPublishTimeout
	}
	if o.PublishBudget <= 0 {
		o.PublishBudget = DefaultPublishBudget
	}
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.IDs == nil {
		o.IDs = NewULIDSource(nil)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Bus is a connection to VERA's streams. It is safe for concurrent use.
type Bus struct {
	opts     Options
	nc       *nats.Conn
	js       jetstream.JetStream
	ownsConn bool
	log      *slog.Logger

	denied *denials // the server's refusals of this identity's publishes

	fullLogged atomic.Int64 // when a full store was last reported (unix ns)

	streamMu sync.Mutex
	stream   jetstream.Stream // handle of stream VERA for direct reads, once looked up

	// Events builds envelopes stamped with this bus's source, clock and ids.
	Events *Factory
}

// ErrNoServer is returned by Connect when no NATS server answers.
var ErrNoServer = errors.New("no NATS server")

// Connect dials NATS and makes sure VERA's streams exist.
func Connect(ctx context.Context, opts Options) (*Bus, error) {
	opts.setDefaults()
	nopts := []nats.Option{
		nats.Name(opts.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				opts.Logger.Warn("nats disconnected", "err", err)
			}
		}),
		// Replaced by New's handler (which logs); nats.go's default
		// prints to stderr.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			opts.Logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
	}
	if opts.CredsFile != "" {
		copt, err := credentialsOption(opts.CredsFile)
		if err != nil {
			return nil, err
		}
		nopts = append(nopts, copt)
	}
	nopts = append(nopts, opts.NATSOptions...)

	deadline := time.Now().Add(opts.ConnectWait)
	var nc *nats.Conn
	var err error
	for {
		nc, err = nats.Connect(opts.URL, nopts...)
		if err == nil || time.Now().After(deadline) || authHint(opts, err) != nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to NATS at %s: %w", opts.URL, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err != nil {
		if errors.Is(err, nats.ErrNoServers) {
			return nil, fmt.Errorf("connect to NATS at %s: %w (start one with `vera up`, or pass --nats-url / NATS_URL)", opts.URL, ErrNoServer)
		}
		if aerr := authHint(opts, err); aerr != nil {
			return nil, aerr
		}
		return nil, fmt.Errorf("connect to NATS at %s: %w", opts.URL, err)
	}
	b, err := New(ctx, nc, opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	b.ownsConn = true
	return b, nil
}

// New wraps an existing connection and makes sure VERA's streams exist. The
// caller keeps ownership of nc.
func New(ctx context.Context, nc *nats.Conn, opts Options) (*Bus, error) {
	opts.setDefaults()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(opts.PublishTimeout))
	if err != nil {
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	b := &Bus{
		opts:   opts,
		nc:     nc,
		js:     js,
		log:    opts.Logger,
		denied: &denials{},
		Events: &Factory{Source: opts.Source, Clock: opts.Clock, IDs: opts.IDs},
	}
	prev := nc.Opts.AsyncErrorCB
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		if b.denied.observe(err) {
			// The operation that was refused returns the error itself.
			b.log.Debug("nats", "err", err)
		} else {
			b.log.Warn("nats", "err", err)
		}
		if prev != nil {
			prev(c, sub, err)
		}
	})
	if opts.ReadOnly {
		if _, err := js.Stream(ctx, StreamName); err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil, fmt.Errorf("stream %s not found on this server: it holds no VERA runs yet (start the bus with `vera up`)", StreamName)
			}
			return nil, fmt.Errorf("open stream %s: %w", StreamName, err)
		}
		return b, nil
	}
	if err := b.EnsureStreams(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Conn returns the underlying NATS connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// JetStream returns the underlying JetStream context.
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Options returns the options the bus runs with, defaults filled in.
func (b *Bus) Options() Options { return b.opts }

// Close drains the connection if the bus opened it.
func (b *Bus) Close() error {
	if !b.ownsConn {
		return nil
	}
	if err := b.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		b.nc.Close()
		return fmt.Errorf("drain NATS connection: %w", err)
	}
	for i := 0; i < 100 && !b.nc.IsClosed(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	b.nc.Close()
	return nil
}

// StreamConfig is the configuration of the event stream for these options.
func (o Options) StreamConfig() jetstream.StreamConfig {
	o.setDefaults()
	return jetstream.StreamConfig{
		Name:        StreamName,
		Description: "VERA run events: vera.run.<run_id>.<area>.<event>, CloudEvents JSON",
		Subjects:    []string{SubjectRoot + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		Replicas:    o.Replicas,
		Duplicates:  o.DedupWindow,
		MaxMsgSize:  o.MaxMsgSize,
		MaxBytes:    o.Limits.Events,
		DenyDelete:  true,
		DenyPurge:   true,
		Sources:     []*jetstream.StreamSource{extSource()},
	}
}

// DeadLetterStreamConfig is the configuration of the dead-letter stream.
func (o Options) DeadLetterStreamConfig() jetstream.StreamConfig {
	o.setDefaults()
	return jetstream.StreamConfig{
		Name:        DeadLetterStream,
		Description: "VERA dead letters: messages a consumer rejected, with the reason",
		Subjects:    []string{DeadLetterSubject + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		Duplicates:  o.DedupWindow,
		// Dead letters are diagnostics (the messages stay in their
		// streams): when full, the oldest go.
		Discard:    jetstream.DiscardOld,
		MaxBytes:   o.Limits.DeadLetters,
		DenyDelete: true,
	}
}

// EnsureStreams creates VERA's streams, object store and placement bucket
// (PlacementBucket), or updates them to the current configuration. While a
// cluster is forming or electing a leader an API request can go
// unanswered: each attempt has its own timeout and is retried until ctx
// ends.
func (b *Bus) EnsureStreams(ctx context.Context) error {
	// VERA_EXT first: VERA sources it.
	for _, cfg := range []jetstream.StreamConfig{b.opts.ExtStreamConfig(), b.opts.StreamConfig(), b.opts.DeadLetterStreamConfig()} {
		exists := false
		err := b.retryAPI(ctx, "create stream "+cfg.Name, func(actx context.Context) error {
			// An update of a stream that already has this configuration
			// changes nothing but races, inside nats-server, with consumers
			// being created at the same moment: skip it.
			s, err := b.js.Stream(actx, cfg.Name)
			if err == nil {
				exists = true
				have := s.CachedInfo().Config
				if cfg.MaxBytes == 0 {
					// No limit given here: the stream keeps the one the
					// deployment set (vera up --max-store).
					cfg.MaxBytes = have.MaxBytes
				} else if stored := int64(s.CachedInfo().State.Bytes); cfg.MaxBytes < stored {
					// A limit below what is stored would have the server
					// drop stored messages: never.
					b.log.Warn("stream "+cfg.Name+" holds more than the limit given for it; its limit is what it holds (it is full: make room or give a larger --max-store)",
						"stored", stored, "limit", cfg.MaxBytes)
					cfg.MaxBytes = stored
				}
				if sameStreamConfig(have, cfg) {
					return nil
				}
			}
			_, err = b.js.CreateOrUpdateStream(actx, cfg)
			return err
		})
		if errors.Is(err, ErrPermissionDenied) {
			if exists {
				// Only admin manages streams; a component runs on the
				// stream as it is.
				b.log.Warn("stream "+cfg.Name+" differs from this version's configuration; this identity may not update it (connect once as admin to do so)", "identity", b.opts.Name)
				continue
			}
			return fmt.Errorf("stream %s does not exist and this identity may not create it: %w (start the bus with `vera up`, or connect once with the admin identity, e.g. `vera up --nats-url URL --nats-creds DATA_DIR/creds/admin.nk`)", cfg.Name, err)
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
				return fmt.Errorf("create stream %s: %w (enable JetStream on the server, see nats.conf)", cfg.Name, err)
			}
			return fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
	}
	if err := b.retryAPI(ctx, "open object store "+BlobBucket, func(actx context.Context) error {
		_, err := b.blobStore(actx)
		return err
	}); err != nil {
		return err
	}
	if err := b.limitBlobs(ctx); err != nil {
		return err
	}
	return b.ensurePlacementKV(ctx)
}

// sameStreamConfig reports whether the stored configuration has every
// setting VERA gives its streams.
func sameStreamConfig(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description && slices.Equal(have.Subjects, want.Subjects) &&
		have.Storage == want.Storage && have.Retention == want.Retention && have.Discard == want.Discard &&
		have.Replicas == want.Replicas && have.Duplicates == want.Duplicates && sameLimit(have.MaxMsgSize, want.MaxMsgSize) &&
		have.DenyDelete == want.DenyDelete && have.DenyPurge == want.DenyPurge &&
		sameLimit64(have.MaxBytes, want.MaxBytes) && sameLimit64(have.MaxMsgsPerSubject, want.MaxMsgsPerSubject) &&
		have.DiscardNewPerSubject == want.DiscardNewPerSubject && sameSources(have.Sources, want.Sources)
}

func sameLimit64(have, want int64) bool {
	return have == want || (want == 0 && have == -1)
}

// sameSources compares stream sources by name and subject transforms.
func sameSources(have, want []*jetstream.StreamSource) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		if have[i].Name != want[i].Name || !slices.Equal(have[i].SubjectTransforms, want[i].SubjectTransforms) {
			return false
		}
	}
	return true
}

// sameLimit compares a stored limit with a configured one; the server
// stores an unset (0) limit as -1.
func sameLimit(have, want int32) bool {
	return have == want || (want == 0 && have == -1)
}

// retryAPI calls op with a per-attempt timeout, retrying timeouts and
// missing responders with backoff until ctx ends.
func (b *Bus) retryAPI(ctx context.Context, what string, op func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		wctx, stop := b.denied.watch(ctx, "$JS.API.")
		actx, cancel := context.WithTimeout(wctx, 10*time.Second)
		err := op(actx)
		cancel()
		denied := deniedCause(wctx)
		stop()
		if denied != nil {
			return Permanent(denied)
		}
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		b.log.Warn(what+": retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff(attempt)):
		}
	}
}
