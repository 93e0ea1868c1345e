package sandboxd

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
)

// Defaults for Config.
const (
	DefaultTimeout   = 900 * time.Second
	DefaultMemory    = 2 << 30 // bytes
	DefaultPids      = 512
	DefaultCPUs      = 1.0
	DefaultNetwork   = "bridge"
	DefaultHeadBytes = 8 << 10
	DefaultTailBytes = 8 << 10
	DefaultSpoolMax  = 1 << 30
	// DefaultConcurrency is how many requests are handled at once (the
	// agents of that many runs, or the auditor's parallel checks).
	DefaultConcurrency = 8
	// DefaultCreateConcurrency is how many containers are created and
	// started at once.
	DefaultCreateConcurrency = 4
	// DefaultDaemonID is the id of a daemon started without one.
	DefaultDaemonID = "local"
)

// Container paths.
const (
	WorkMount  = "/work"
	InputMount = "/input"
	NotesPath  = "/work/notes.md"
)

// Config configures the daemon.
type Config struct {
	// Image is the sandbox image used when a run names none.
	Image string
	// WorkRoot holds the work dirs of runs that were not submitted with one
	// (e.g. `vera sandbox exec` on a fresh run id): WorkRoot/<run_id>/work.
	// It is always one of WorkRoots.
	WorkRoot string
	// WorkRoots are the host directories under which a run's work dir may
	// lie, after resolving symlinks; a task naming another is refused and
	// gets no container. The operator's choice, never the task's.
	WorkRoots []string
	// InputRoots are the same for input dirs (mounted read-only); none
	// means runs may not have an input dir.
	InputRoots []string
	// Protected are host paths no mount may contain or lie inside: VERA's
	// identities, the NATS store, the spool (SpoolDir is always one).
	Protected []string
	// AllowedImages are images a run may ask for besides Image.
	AllowedImages []string
	// SpoolDir keeps every running command's output on disk.
	SpoolDir string
	// Network is the Docker network mode for runs with network access:
	// "bridge", "none", or the name of a user-defined network.
	Network string
	// User is the container user "uid:gid"; default the daemon's own, so
	// files in the work dir belong to whoever runs VERA — except when the
	// daemon runs as root: then SandboxUser, never 0.
	User string
	// Lab allows lab mode (the spec's: privileged, root) for runs that ask
	// for it in their task; neither alone is enough.
	Lab bool
	// KeepContainers leaves containers in place when their run ends.
	KeepContainers bool

	DefaultTimeout time.Duration // per command, when the request sets none
	Memory         int64         // bytes, also the swap limit
	PidsLimit      int64
	CPUs           float64

	// WorkLimit bounds a run's /work (bytes, DefaultWorkLimit; a run's
	// sandbox.work_limit_mb overrides it; -1 = none). ScratchLimit bounds
	// /tmp, /var/tmp and the writable layer (DefaultScratchLimit, at most
	// Memory; sandbox.scratch_limit_mb overrides it; -1 = none). See disk.go.
	WorkLimit, ScratchLimit int64

	HeadBytes, TailBytes int   // output kept inline in the event, per stream
	SpoolMax             int64 // most bytes of one stream kept for its blob

	Concurrency int // requests handled at once, across runs and requesters
	// CreateConcurrency bounds the containers being created and started
	// at once (DefaultCreateConcurrency).
	CreateConcurrency int
	// WarmPool is how many ready agent containers to keep per sandbox
	// configuration for runs to claim (pool.go); 0 disables the pool.
	WarmPool int
	// DaemonID names this daemon among the daemons of one stream
	// (placement, its consumers, container labels); "" is DefaultDaemonID.
	DaemonID string
	// Capacity is how many runs this daemon holds at once (placement);
	// 0 = no limit.
	Capacity int
	// LeaseTTL is how long a daemon may go unheard before its runs are
	// taken over by another (placement.DefaultLeaseTTL).
	LeaseTTL time.Duration
	Logger   *slog.Logger
	Clock    bus.Clock
}

// SetDefaults fills in the defaults documented on each field and checks
// the configuration (New calls it on its own copy).
func (c *Config) SetDefaults() error {
	if c.Image == "" {
		return fmt.Errorf("sandboxd: no sandbox image configured (build one with `vera sandbox build`)")
	}
	if c.WorkRoot == "" || c.SpoolDir == "" {
		return fmt.Errorf("sandboxd: WorkRoot and SpoolDir are required")
	}
	if c.Network == "" {
		c.Network = DefaultNetwork
	}
	if c.User == "" {
		c.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
		if os.Geteuid() == 0 {
			c.User = SandboxUser
		}
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.Memory <= 0 {
		c.Memory = DefaultMemory
	}
	if c.PidsLimit <= 0 {
		c.PidsLimit = DefaultPids
	}
	if c.CPUs <= 0 {
		c.CPUs = DefaultCPUs
	}
	switch {
	case c.WorkLimit == 0:
		c.WorkLimit = DefaultWorkLimit
	case c.WorkLimit < 0:
		c.WorkLimit = 0
	}
	switch {
	case c.ScratchLimit == 0:
		c.ScratchLimit = DefaultScratchLimit
	case c.ScratchLimit < 0:
		c.ScratchLimit = 0
	}
	if c.HeadBytes <= 0 {
		c.HeadBytes = DefaultHeadBytes
	}
	if c.TailBytes <= 0 {
		c.TailBytes = DefaultTailBytes
	}
	if c.SpoolMax <= 0 {
		c.SpoolMax = DefaultSpoolMax
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.CreateConcurrency <= 0 {
		c.CreateConcurrency = DefaultCreateConcurrency
	}
	if c.WarmPool < 0 {
		c.WarmPool = 0
	}
	if c.DaemonID == "" {
		c.DaemonID = DefaultDaemonID
	}
	if !daemonIDRE.MatchString(c.DaemonID) {
		return fmt.Errorf("sandboxd: daemon id %q: use 1-64 characters a-z, A-Z, 0-9, _ or -", c.DaemonID)
	}
	if c.DaemonID == "control" || strings.HasPrefix(c.DaemonID, "control-") {
		return fmt.Errorf("sandboxd: daemon id %q: its consumer would be named %s, the name of another daemon's control consumer; choose an id that does not start with \"control\"", c.DaemonID, DaemonDurables(c.DaemonID)[0])
	}
	c.Logger = component.Logger(c.Logger, catalog.ComponentSandboxd)
	if c.Clock == nil {
		c.Clock = bus.SystemClock{}
	}
	for _, d := range []string{c.WorkRoot, c.SpoolDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("sandboxd: %w", err)
		}
	}
	if spool, err := filepath.Abs(c.SpoolDir); err == nil {
		c.SpoolDir = spool
	}
	abs, err := resolvePath(c.WorkRoot)
	if err != nil {
		return fmt.Errorf("sandboxd: work root: %w", err)
	}
	c.WorkRoot = abs
	if c.WorkRoots, err = resolveAll(append([]string{c.WorkRoot}, c.WorkRoots...)); err != nil {
		return fmt.Errorf("sandboxd: work roots: %w", err)
	}
	if c.InputRoots, err = resolveAll(c.InputRoots); err != nil {
		return fmt.Errorf("sandboxd: input roots: %w", err)
	}
	if c.Protected, err = resolveAll(append([]string{c.SpoolDir}, c.Protected...)); err != nil {
		return fmt.Errorf("sandboxd: protected paths: %w", err)
	}
	return nil
}

var daemonIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
