package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/vera-run/vera/bus/catalog"
)

// Labels on every sandbox container.
const (
	LabelManaged = "vera.managed"
	LabelRun     = "vera.run"
	LabelRole    = "vera.role"
)

// role is the requester class a container serves.
type role string

const (
	roleAgent   role = "agent"
	roleAuditor role = "auditor"
)

func roleOf(r catalog.Requester) role {
	if r == catalog.RequesterAuditor {
		return roleAuditor
	}
	return roleAgent
}

// ContainerName is the name of the run's container for a role.
func ContainerName(runID string, r role) string {
	if r == roleAuditor {
		return "vera-" + runID + "-auditor"
	}
	return "vera-" + runID
}

// keptCapabilities are kept, when all others are dropped, only for a
// container whose user is root (an operator's explicit --user 0:0): what a
// package install needs (apt-get changes file owners and modes: CHOWN,
// DAC_OVERRIDE, FOWNER, FSETID; it drops to the _apt user: SETUID,
// SETGID), and KILL (below). Everything else (NET_RAW, SYS_*, MKNOD,
// AUDIT_*, …) is always dropped.
var keptCapabilities = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETGID", "SETUID", "KILL"}

// killerCapabilities are all a container with a non-root user keeps: KILL,
// for sandboxd's own killer, which runs as root inside the container to end
// a timed-out command's processes whatever user they run as. The
// command's user cannot use it: its exec runs as that user, with no
// effective, permitted or ambient capability, and no-new-privileges keeps
// it from gaining any.
var killerCapabilities = []string{"KILL"}

// ConsoleFile is where a command's keeper writes the line that shows it in
// the container's log.
const ConsoleFile = "/tmp/.vera/console"

// box is a running sandbox container.
type box struct {
	name, id string
	role     role
	env      map[string]string // the container's own environment
	bash, sh string            // the image's bash and sh, by absolute path (prepareShell)
	stateDir string            // host directory mounted at StateMount
	sessions *sessionPool      // the container's persistent sessions
	work     *workWatch        // the /work watchdog of an agent container (disk.go), nil if none
	runEnv   map[string]string // variables every command gets (a pool container's VERA_RUN_ID)
}

func numericUser(u string) (uid, gid int, ok bool) {
	a, b, found := strings.Cut(u, ":")
	uid, err1 := strconv.Atoi(a)
	gid, err2 := strconv.Atoi(b)
	return uid, gid, found && err1 == nil && err2 == nil
}

// ensureBox returns the run's running container for the role, creating or
// restarting it as needed. Checking that a known container still runs
// happens in parallel; creating, restarting or recovering one is
// serialised per run: requests arriving at once on a fresh run wait for
// one another here (and only here), one creates the container, the others
// find it.
func (d *Daemon) ensureBox(ctx context.Context, rs *runState, r role) (*box, error) {
	if b := d.runningBox(ctx, rs, r); b != nil {
		return b, nil
	}
	rs.boxMu.Lock()
	defer rs.boxMu.Unlock()
	name := ContainerName(rs.id, r)
	if b := rs.boxes[r]; b != nil && d.running(ctx, b) {
		return b, nil // another request brought it up meanwhile
	}
	var bash, sh string // set when the container comes from the warm pool, its shell prepared
	info, err := d.docker.ContainerInspect(ctx, name)
	switch {
	case err == nil && info.State != nil && info.State.Running:
	case err == nil:
		d.log.Warn("sandbox container not running; starting it", "container", name, "status", info.State.Status, "oom_killed", info.State.OOMKilled)
		if err := d.docker.ContainerStart(ctx, info.ID, container.StartOptions{}); err != nil {
			d.log.Warn("restart failed; recreating", "container", name, "err", err)
			_ = d.docker.ContainerRemove(ctx, info.ID, container.RemoveOptions{Force: true})
			if info, bash, sh, err = d.newBox(ctx, rs, r, name); err != nil {
				return nil, err
			}
		} else if info, err = d.docker.ContainerInspect(ctx, info.ID); err != nil {
			return nil, dockerErr("inspect container", err)
		}
	case errdefs.IsNotFound(err):
		if info, bash, sh, err = d.newBox(ctx, rs, r, name); err != nil {
			return nil, err
		}
	default:
		return nil, dockerErr("inspect container", err)
	}
	if stateSource(info) == "" {
		// Made by an older sandboxd: no shell-state mount (its commands'
		// shell state has nowhere to go), or a read-write one (its
		// commands could fill the host's disk through it). A new
		// container, on the same /work; what the old one wrote into its
		// state directory goes with it.
		old, rw, _ := stateMountOf(info)
		d.log.Warn("sandbox container has no read-only shell-state mount (made by an older sandboxd); recreating it", "container", name, "state_mount_rw", rw)
		if err := d.docker.ContainerRemove(ctx, info.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
			return nil, dockerErr("remove container", err)
		}
		if rw {
			d.removeOldStateDir(old)
		}
		if info, bash, sh, err = d.newBox(ctx, rs, r, name); err != nil {
			return nil, err
		}
	}
	if bash == "" {
		if bash, sh, err = d.prepareShell(ctx, info.ID); err != nil {
			return nil, fmt.Errorf("sandbox image %s: %w", info.Config.Image, err)
		}
	}
	pool := newSessionPool()
	if old := rs.boxes[r]; old != nil && old.sessions != nil {
		pool = old.sessions // the container restarted: its sessions are gone, what came before them is not
	}
	b := &box{name: name, id: info.ID, role: r, env: envMap(info.Config.Env), bash: bash, sh: sh, stateDir: stateSource(info), sessions: pool}
	if info.Config.Labels[LabelPool] != "" {
		// Made for the warm pool, before its run was known: the run id
		// comes with each command instead of the container's environment.
		b.runEnv = map[string]string{"VERA_RUN_ID": rs.id}
		b.env["VERA_RUN_ID"] = rs.id
	}
	if old := rs.boxes[r]; old != nil && old.work != nil {
		old.work.stop() // the container was restarted or replaced: the new box's watchdog takes over
	}
	b.work = d.watchWork(rs, b)
	rs.boxes[r] = b
	d.followLogs(b, rs.id)
	return b, nil
}

// runningBox returns the role's known container if it is running.
func (d *Daemon) runningBox(ctx context.Context, rs *runState, r role) *box {
	rs.boxMu.Lock()
	b := rs.boxes[r]
	rs.boxMu.Unlock()
	if b != nil && b.sessions != nil && b.sessions.live() {
		return b // a live session is an exec in the container: it runs
	}
	if b != nil && d.running(ctx, b) {
		return b
	}
	return nil
}

// running reports whether the box's container is running.
func (d *Daemon) running(ctx context.Context, b *box) bool {
	info, err := d.docker.ContainerInspect(ctx, b.id)
	return err == nil && info.State != nil && info.State.Running
}

// imageAndNetwork are the image and Docker network of the run's
// containers: the run's image (admitted: Image or an allowed one) or the
// daemon's, and no network when the run asks for none.
func (d *Daemon) imageAndNetwork(rs *runState) (image, network string) {
	image, network = d.cfg.Image, d.cfg.Network
	if c := rs.cfg; c != nil {
		if c.Sandbox.Image != "" {
			image = c.Sandbox.Image
		}
		if !c.Sandbox.Network {
			network = "none"
		}
	}
	return image, network
}

// newBox makes the run's container for a role: a warm pool container when
// one fits (its shell prepared already: bash and sh are set), else a new
// one (bash and sh empty: the caller prepares its shell).
func (d *Daemon) newBox(ctx context.Context, rs *runState, r role, name string) (info container.InspectResponse, bash, sh string, err error) {
	if r == roleAgent && d.pool != nil {
		dir, input, err := d.admit(rs)
		if err != nil {
			return container.InspectResponse{}, "", "", err
		}
		if k, ok := d.poolKeyOf(rs, input); ok {
			if info, pb, ok := d.pool.claim(ctx, rs, k, dir, name); ok {
				return info, pb.bash, pb.sh, nil
			}
		}
	}
	info, err = d.createBox(ctx, rs, r, name)
	return info, "", "", err
}

func (d *Daemon) createBox(ctx context.Context, rs *runState, r role, name string) (container.InspectResponse, error) {
	_, input, err := d.admit(rs)
	if err != nil {
		return container.InspectResponse{}, err
	}
	work, err := d.workDir(rs, true)
	if err != nil {
		return container.InspectResponse{}, err
	}
	img, network := d.imageAndNetwork(rs)
	lab := d.labFor(rs)
	if err := d.checkImage(ctx, img); err != nil {
		return container.InspectResponse{}, err
	}
	state, err := d.makeStateDir(rs.id, name)
	if err != nil {
		return container.InspectResponse{}, err
	}
	cfg, host := boxConfig(boxSpec{
		run: rs.id, daemon: d.cfg.DaemonID, role: r, image: img, work: work, input: input, state: state, network: network, lab: lab,
		user: d.cfg.User, memory: d.cfg.Memory, pids: d.cfg.PidsLimit, cpus: d.cfg.CPUs, scratch: d.scratchLimit(rs),
	})
	d.applyLayerLimit(host, d.scratchLimit(rs))
	if lab {
		d.log.Warn("LAB MODE: sandbox container runs PRIVILEGED as root; isolation is off", "run", rs.id, "container", name)
		d.emitLabMode(ctx, rs.id, name)
	}
	id, err := d.createAndStart(ctx, cfg, host, name)
	if errdefs.IsConflict(err) { // created concurrently: use it
		return d.docker.ContainerInspect(ctx, name)
	}
	if err != nil {
		return container.InspectResponse{}, err
	}
	user := d.cfg.User
	if lab {
		user = "0:0"
	}
	d.log.Info("sandbox container started", "run", rs.id, "container", name, "image", img, "network", network, "user", user, "lab", lab)
	if r == roleAgent {
		d.bootstrapVenv(id, user, rs.id)
	}
	return d.docker.ContainerInspect(ctx, id)
}

// createAndStart creates and starts a container, at most
// Config.CreateConcurrency at once across the daemon (the engine does the
// work; many at once only slows each). It returns the container's id; a
// name conflict is returned as is (errdefs.IsConflict).
func (d *Daemon) createAndStart(ctx context.Context, cfg *container.Config, host *container.HostConfig, name string) (string, error) {
	select {
	case d.createSem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-d.createSem }()
	created, err := d.docker.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil && host.StorageOpt != nil && isStorageOptUnsupported(err) {
		d.noteLayerSize(false)
		d.log.Info("the Docker engine takes no size for a container's writable layer; a watchdog limits it instead", "err", err)
		host.StorageOpt = nil
		created, err = d.docker.ContainerCreate(ctx, cfg, host, nil, nil, name)
	} else if err == nil && host.StorageOpt != nil {
		d.noteLayerSize(true)
	}
	if err != nil {
		if errdefs.IsConflict(err) {
			return "", err
		}
		return "", dockerErr("create container", err)
	}
	if err := d.docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		_ = d.docker.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
		return "", dockerErr("start container", err)
	}
	return created.ID, nil
}

// imageCheckTTL is how long an image found on the engine is not looked
// up again.
const imageCheckTTL = time.Minute

// checkImage checks that the engine has the image (remembered for
// imageCheckTTL: a new container need not ask each time).
func (d *Daemon) checkImage(ctx context.Context, img string) error {
	d.mu.Lock()
	seen, ok := d.imagesSeen[img]
	d.mu.Unlock()
	if ok && time.Since(seen) < imageCheckTTL {
		return nil
	}
	if _, err := d.docker.ImageInspect(ctx, img); err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("sandbox image %s is missing: build it with `vera sandbox build --offline`", img)
		}
		return dockerErr("inspect image", err)
	}
	d.mu.Lock()
	d.imagesSeen[img] = time.Now()
	d.mu.Unlock()
	return nil
}

// bootstrapVenv makes /work/.cache and /work/.venv in a new agent
// container, in the background: the container is usable at once, and a
// command waits for it (waitBootstrap) only if it comes first.
func (d *Daemon) bootstrapVenv(containerID, user, runID string) {
	done := make(chan struct{})
	d.mu.Lock()
	d.bootstraps[containerID] = done
	d.mu.Unlock()
	ctx := d.bgCtx
	if ctx == nil {
		ctx = context.Background()
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		defer close(done)
		if _, err := d.execSimple(ctx, containerID, user, venvScript); err != nil {
			d.log.Warn("bootstrap /work/.venv failed", "run", runID, "err", err)
		}
	}()
}

// waitBootstrap waits for the container's /work/.venv bootstrap, if one is
// under way (at most two minutes).
func (d *Daemon) waitBootstrap(ctx context.Context, containerID string) {
	d.mu.Lock()
	done := d.bootstraps[containerID]
	d.mu.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(2 * time.Minute)
	defer t.Stop()
	select {
	case <-done:
		d.mu.Lock()
		delete(d.bootstraps, containerID)
		d.mu.Unlock()
	case <-ctx.Done():
	case <-t.C:
	}
}

// boxSpec is what a sandbox container is made from.
type boxSpec struct {
	run, image, work, input, state, network, user string
	daemon                                        string // the daemon that makes it
	role                                          role
	lab                                           bool
	memory, pids, scratch                         int64
	cpus                                          float64
}

// boxConfig is the container configuration for a spec: safe by default
// (the configured user, all capabilities dropped but keptCapabilities,
// no-new-privileges, pids/memory/CPU limits, docker-init to reap orphans),
// or the spec's lab mode (privileged, root).
func boxConfig(s boxSpec) (*container.Config, *container.HostConfig) {
	mounts := []mount.Mount{{Type: mount.TypeBind, Source: s.work, Target: WorkMount, ReadOnly: s.role == roleAuditor}}
	if s.input != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: s.input, Target: InputMount, ReadOnly: true})
	}
	if s.state != "" {
		// Read-only: the container writes only into the fifos sandboxd
		// makes there (see stateFifo), so it cannot fill the host's disk
		// through it.
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: s.state, Target: StateMount, ReadOnly: true})
	}
	init := true
	pids := s.pids
	cfg := &container.Config{
		Image: s.image,
		// The console: every command's keeper appends its line to
		// ConsoleFile (in /tmp/.vera, which prepareShell makes), and this
		// process prints it, so that it is in the container's log. tail
		// waits for the file to appear.
		Cmd: []string{"/bin/sh", "-c", "exec tail -q -n +1 -F " + ConsoleFile + " 2>/dev/null"},
		// The container's own process (tail) is root, holding only the
		// capabilities below; every command runs as s.user by its exec.
		// Docker gives an exec no capability at all when the container's
		// user is not root, so sandboxd's helpers (root: the killer, with
		// KILL, and prepareShell) could not do their work otherwise.
		User:       "0:0",
		WorkingDir: WorkMount,
		Env:        []string{"HOME=/tmp", "VERA_RUN_ID=" + s.run, "VERA_ROLE=" + string(s.role)},
		Labels:     map[string]string{LabelManaged: "true", LabelRun: s.run, LabelRole: string(s.role), LabelDaemon: s.daemon},
	}
	host := &container.HostConfig{
		Mounts:      mounts,
		Tmpfs:       scratchMounts(s.scratch),
		NetworkMode: container.NetworkMode(s.network),
		Init:        &init,
		Resources: container.Resources{
			Memory:     s.memory,
			MemorySwap: s.memory,
			PidsLimit:  &pids,
			NanoCPUs:   int64(s.cpus * 1e9),
		},
	}
	if s.lab {
		cfg.User = "0:0"
		host.Privileged = true
		return cfg, host
	}
	host.CapDrop = []string{"ALL"}
	host.CapAdd = killerCapabilities
	if uid, _, ok := numericUser(s.user); ok && uid == 0 {
		host.CapAdd = keptCapabilities
	}
	host.SecurityOpt = []string{"no-new-privileges:true"}
	return cfg, host
}

// removeBoxes removes every container of a run.
func (d *Daemon) removeBoxes(ctx context.Context, runID string) error {
	list, err := d.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", LabelRun+"="+runID))})
	if err != nil {
		return dockerErr("list containers", err)
	}
	// A claimed pool container has no vera.run label: it has the run's name.
	if info, err := d.docker.ContainerInspect(ctx, ContainerName(runID, roleAgent)); err == nil && info.Config != nil &&
		info.Config.Labels[LabelManaged] == "true" && runOfContainer(info.Config.Labels, info.Name) == runID {
		list = append(list, container.Summary{ID: info.ID})
	}
	var errs []error
	for _, c := range list {
		if err := d.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// dockerErr wraps a Docker error, saying so plainly when the engine is not
// reachable.
func dockerErr(what string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("%s: Docker is not reachable (is the engine running? DOCKER_HOST=%q): %w", what, os.Getenv("DOCKER_HOST"), err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
