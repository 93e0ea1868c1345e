package sandboxd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/errdefs"

	"github.com/vera-run/vera/internal/rundir"
)

// The warm pool: agent containers made ahead of their runs, so that a new
// run's first command does not wait for a container to be created,
// started and prepared (its shell set up, /work/.venv made).
//
// A pool container is made for one sandbox configuration (image, network,
// scratch limit; never lab mode, never a run with an input dir, whose
// mounts only its run can name). Its /work is a directory of the pool,
// WorkRoot/.vera-pool/<token>/work (no run dir lies under .vera-pool:
// package rundir refuses the name). A run claims one by:
//
//  1. renaming the container to the run's name (vera-<run_id>). Docker
//     cannot change a container's labels: the claimed container keeps
//     vera.pool and has no vera.run; sandboxd reads its run from its name
//     (runOfContainer), for its Docker events, its removal and reaping;
//  2. renaming the pool's work directory into the run's directory as its
//     work/ — only when the run has no /work yet (or an empty one, which
//     goes): renameat2 with RENAME_NOREPLACE, from the pool's directory
//     to the run dir, both held open (rundir.Dir.MoveIn). Nothing is
//     exchanged and nothing is moved into a tree that exists: a run dir is
//     VERA's (new, empty, or marked as the run's), and a /work that holds
//     files keeps them under a new container. The bind mount follows the
//     directory, not its path, so the container's /work is now the run's.
//
// A claim that cannot be made (the pool is empty, the run's /work holds
// files already, the run dir is on another filesystem than the pool, the
// run has a container already) falls back to creating a container. The pool is refilled in
// the background after each claim. A claimed container belongs to its run
// only: it is taken out of the pool under the pool's lock before anything
// else, and a name can be held by one container. The pool's containers
// are removed when the daemon stops, and a daemon removes, when it starts,
// every unclaimed pool container left by an earlier process with its id
// (one killed with SIGKILL).
const (
	// LabelPool marks a container made for the warm pool, with the id of
	// the daemon that made it.
	LabelPool = "vera.pool"
	// LabelPoolKey names the sandbox configuration a pool container was
	// made for.
	LabelPoolKey = "vera.pool.key"
	// LabelPoolSpool is the spool dir of the daemon that made a pool
	// container: only a daemon of the same id on the same spool (its
	// restart) reaps it; other buses' daemons may share the engine and
	// the id.
	LabelPoolSpool = "vera.pool.spool"

	poolNamePrefix = "vera.pool." // never the name of a run's container: run ids have no dots
	poolDirName    = ".vera-pool"
	poolReadyFile  = "ready" // in a pool container's directory once it is ready
	poolSpool      = ".pool" // SpoolDir/.pool: pool containers' shell-state dirs (no run id has a dot)
	maxPoolKeys    = 4       // configurations kept warm at once, most recently used first
)

// poolKey is the sandbox configuration a pool container fits.
type poolKey struct {
	image, network string
	scratch        int64
}

func (k poolKey) String() string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", k.image, k.network, k.scratch)))
	return hex.EncodeToString(sum[:6])
}

// pooledBox is a ready pool container.
type pooledBox struct {
	id, name  string
	dir, work string // dir: the pool's directory of it; work: dir/work, mounted at /work
	bash, sh  string
	key       poolKey
}

// warmPool keeps up to size ready containers per sandbox configuration.
type warmPool struct {
	d    *Daemon
	size int

	mu      sync.Mutex
	ready   map[poolKey][]pooledBox
	filling map[poolKey]int
	keys    []poolKey // most recently used first
	stopped bool
	wake    chan struct{}
	fills   sync.WaitGroup

	claimed, missed int // counters, for the log

	// one fill at a time: the pool refills in the background and must not
	// take the engine from runs waiting for a container now
	fillSem chan struct{}
}

func newWarmPool(d *Daemon, size int) *warmPool {
	return &warmPool{d: d, size: size, ready: map[poolKey][]pooledBox{}, filling: map[poolKey]int{}, wake: make(chan struct{}, 1),
		fillSem: make(chan struct{}, 1)}
}

// defaultKey is the configuration of a run that asks for nothing special.
func (d *Daemon) defaultPoolKey() poolKey {
	return poolKey{image: d.cfg.Image, network: d.cfg.Network, scratch: d.scratchLimit(&runState{})}
}

// poolKeyOf is the configuration of the run's agent container, and
// whether a pool container can serve it at all.
func (d *Daemon) poolKeyOf(rs *runState, input string) (poolKey, bool) {
	if input != "" || d.labFor(rs) {
		return poolKey{}, false
	}
	img, network := d.imageAndNetwork(rs)
	return poolKey{image: img, network: network, scratch: d.scratchLimit(rs)}, true
}

// run fills the pool until ctx ends, then removes the containers it holds.
func (p *warmPool) run(ctx context.Context) {
	p.reapStale(ctx)
	p.use(p.d.defaultPoolKey())
	for {
		p.refill(ctx)
		select {
		case <-ctx.Done():
			p.stop()
			return
		case <-p.wake:
		}
	}
}

// use notes that a run wanted key: it is kept warm from now on (the least
// recently used of more than maxPoolKeys is dropped).
func (p *warmPool) use(k poolKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, have := range p.keys {
		if have == k {
			copy(p.keys[1:i+1], p.keys[:i])
			p.keys[0] = k
			return
		}
	}
	p.keys = append([]poolKey{k}, p.keys...)
	if len(p.keys) > maxPoolKeys {
		old := p.keys[maxPoolKeys]
		p.keys = p.keys[:maxPoolKeys]
		drop := p.ready[old]
		delete(p.ready, old)
		go p.remove(context.Background(), drop)
	}
	p.poke()
}

func (p *warmPool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// refill starts making containers for every configuration below size.
func (p *warmPool) refill(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	for _, k := range p.keys {
		for n := len(p.ready[k]) + p.filling[k]; n < p.size; n++ {
			p.filling[k]++
			p.fills.Add(1)
			go func(k poolKey) {
				defer p.fills.Done()
				var pb pooledBox
				var err error
				select {
				case p.fillSem <- struct{}{}:
					pb, err = p.make(ctx, k)
					<-p.fillSem
				case <-ctx.Done():
					err = ctx.Err()
				}
				p.mu.Lock()
				p.filling[k]--
				keep := err == nil && !p.stopped && p.wanted(k)
				if keep {
					p.ready[k] = append(p.ready[k], pb)
				}
				p.mu.Unlock()
				switch {
				case err != nil:
					if ctx.Err() == nil {
						p.d.log.Warn("warm pool: could not make a container; trying again in 5 s", "image", k.image, "err", err)
						time.AfterFunc(5*time.Second, p.poke)
					}
				case !keep:
					p.remove(context.WithoutCancel(ctx), []pooledBox{pb})
				}
			}(k)
		}
	}
}

func (p *warmPool) wanted(k poolKey) bool {
	for _, have := range p.keys {
		if have == k {
			return true
		}
	}
	return false
}

// make creates, starts and prepares one pool container.
func (p *warmPool) make(ctx context.Context, k poolKey) (pooledBox, error) {
	d := p.d
	token := randomToken()
	pb := pooledBox{key: k, name: poolNamePrefix + p.d.cfg.DaemonID + "." + token}
	pb.dir = filepath.Join(d.cfg.WorkRoot, poolDirName, token)
	if err := d.makePoolDir(pb.dir); err != nil {
		return pb, err
	}
	pb.work = filepath.Join(pb.dir, rundir.WorkName)
	if err := d.checkImage(ctx, k.image); err != nil {
		_ = os.RemoveAll(pb.dir)
		return pb, err
	}
	state, err := d.makeStateDir(poolSpool, pb.name)
	if err != nil {
		_ = os.RemoveAll(pb.dir)
		return pb, err
	}
	cfg, host := boxConfig(boxSpec{
		role: roleAgent, daemon: d.cfg.DaemonID, image: k.image, work: pb.work, state: state, network: k.network,
		user: d.cfg.User, memory: d.cfg.Memory, pids: d.cfg.PidsLimit, cpus: d.cfg.CPUs, scratch: k.scratch,
	})
	delete(cfg.Labels, LabelRun)
	cfg.Labels[LabelPool] = p.d.cfg.DaemonID
	cfg.Labels[LabelPoolKey] = k.String()
	cfg.Labels[LabelPoolSpool] = d.cfg.SpoolDir
	cfg.Env = withoutVar(cfg.Env, "VERA_RUN_ID")
	d.applyLayerLimit(host, k.scratch)
	id, err := d.createAndStart(ctx, cfg, host, pb.name)
	if err != nil {
		_ = os.RemoveAll(pb.dir)
		_ = os.RemoveAll(state)
		return pb, err
	}
	pb.id = id
	fail := func(err error) (pooledBox, error) {
		p.remove(context.WithoutCancel(ctx), []pooledBox{pb})
		return pb, err
	}
	if pb.bash, pb.sh, err = d.prepareShell(ctx, id); err != nil {
		return fail(fmt.Errorf("sandbox image %s: %w", k.image, err))
	}
	if _, err := d.execSimple(ctx, id, d.cfg.User, venvScript); err != nil && ctx.Err() == nil {
		d.log.Warn("warm pool: bootstrap /work/.venv failed", "container", pb.name, "err", err)
	}
	// Beside /work, for whoever watches the pool from the host.
	_ = os.WriteFile(filepath.Join(pb.dir, poolReadyFile), nil, 0o600)
	return pb, nil
}

// makePoolDir makes a pool container's directory, dir (mode 0700, under
// WorkRoot/.vera-pool), and its work/, handed to the sandbox user.
func (d *Daemon) makePoolDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("warm pool dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("warm pool dir: %w", err)
	}
	pd, err := rundir.OpenTrusted(dir, false)
	if err != nil {
		return fmt.Errorf("warm pool dir: %w", err)
	}
	defer pd.Close()
	uid, gid := d.sandboxOwner()
	_, f, err := pd.Work(true, uid, gid)
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("warm pool dir: %w", err)
	}
	return f.Close()
}

// claim gives the run a pool container named name whose /work becomes
// the run dir's work/, or reports false (the caller creates a container).
func (p *warmPool) claim(ctx context.Context, rs *runState, k poolKey, dir *rundir.Dir, name string) (container.InspectResponse, pooledBox, bool) {
	p.use(k)
	p.mu.Lock()
	list := p.ready[k]
	if len(list) == 0 || p.stopped {
		p.missed++
		p.mu.Unlock()
		p.d.log.Debug("warm pool: no container ready for the run's configuration; making one", "run", rs.id, "image", k.image, "network", k.network)
		return container.InspectResponse{}, pooledBox{}, false
	}
	pb := list[len(list)-1]
	p.ready[k] = list[:len(list)-1]
	p.mu.Unlock()
	p.poke()
	d := p.d
	log := d.log.With("run", rs.id, "container", name, "pool_container", pb.name)
	giveBack := func() {
		p.mu.Lock()
		if !p.stopped && p.wanted(k) {
			p.ready[k] = append(p.ready[k], pb)
			pb.id = ""
		}
		p.mu.Unlock()
		if pb.id != "" {
			p.remove(context.WithoutCancel(ctx), []pooledBox{pb})
		}
	}
	// The run's auditor container, if any, mounts the work dir as it is
	// now; putting another directory in its place would hide /work from it.
	if _, err := d.docker.ContainerInspect(ctx, ContainerName(rs.id, roleAuditor)); err == nil {
		giveBack()
		return container.InspectResponse{}, pooledBox{}, false
	}
	if err := d.docker.ContainerRename(ctx, pb.id, name); err != nil {
		log.Info("warm pool: could not name the container for the run; making one instead", "err", err)
		if errdefs.IsNotFound(err) {
			_ = os.RemoveAll(pb.dir)
			return container.InspectResponse{}, pooledBox{}, false
		}
		giveBack()
		return container.InspectResponse{}, pooledBox{}, false
	}
	if err := moveInPool(pb.dir, dir); err != nil {
		log.Info("warm pool: the pool's /work cannot become the run's (it has a /work of its own, or it is on another filesystem); making a container instead", "run_dir", dir.Path(), "err", err)
		p.remove(context.WithoutCancel(ctx), []pooledBox{{id: pb.id, name: name, dir: pb.dir}})
		return container.InspectResponse{}, pooledBox{}, false
	}
	rs.forgetWork() // an empty /work made before, if any, is gone: reopen the run's
	_ = os.Remove(filepath.Join(pb.dir, poolReadyFile))
	_ = os.Remove(pb.dir)
	info, err := d.docker.ContainerInspect(ctx, pb.id)
	if err != nil || info.State == nil || !info.State.Running {
		log.Warn("warm pool: the claimed container is not running; making one instead", "err", err)
		_ = d.docker.ContainerRemove(context.WithoutCancel(ctx), pb.id, container.RemoveOptions{Force: true})
		return container.InspectResponse{}, pooledBox{}, false
	}
	p.mu.Lock()
	p.claimed++
	p.mu.Unlock()
	log.Info("warm pool: container claimed")
	return info, pb, true
}

// stop removes the pool's ready containers (the daemon stops).
func (p *warmPool) stop() {
	p.mu.Lock()
	p.stopped = true
	var all []pooledBox
	for k, list := range p.ready {
		all = append(all, list...)
		delete(p.ready, k)
	}
	p.mu.Unlock()
	p.fills.Wait() // a fill finishing now removes its own container
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p.remove(ctx, all)
	if len(all) > 0 {
		p.d.log.Info("warm pool: containers removed", "count", len(all))
	}
}

// remove removes pool containers and their directories.
func (p *warmPool) remove(ctx context.Context, list []pooledBox) {
	for _, pb := range list {
		if pb.id != "" {
			if err := p.d.docker.ContainerRemove(ctx, pb.id, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
				p.d.log.Warn("warm pool: remove container", "container", pb.name, "err", err)
			}
		}
		if pb.dir != "" {
			_ = os.RemoveAll(pb.dir)
		}
		_ = os.RemoveAll(filepath.Join(p.d.cfg.SpoolDir, poolSpool, pb.name+".state"))
	}
}

// reapStale removes the unclaimed pool containers an earlier process
// with this daemon's id and spool left (it was killed), and the pool's
// directories no container uses any more. A claimed one is its run's: it
// and its shell-state directory stay.
func (p *warmPool) reapStale(ctx context.Context) {
	list, err := p.d.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", LabelPool+"="+p.d.cfg.DaemonID), filters.Arg("label", LabelPoolSpool+"="+p.d.cfg.SpoolDir))})
	if err != nil {
		p.d.log.Warn("warm pool: list containers", "err", err)
		return
	}
	inUse := map[string]bool{}
	n := 0
	for _, c := range list {
		if !unclaimedPoolName(c.Names) {
			for _, m := range c.Mounts {
				inUse[m.Source] = true // a claimed one's: its run's
			}
			continue
		}
		if err := p.d.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
			p.d.log.Warn("warm pool: reap container", "container", c.Names, "err", err)
			for _, m := range c.Mounts {
				inUse[m.Source] = true
			}
			continue
		}
		n++
	}
	dirs, _ := filepath.Glob(filepath.Join(p.d.cfg.WorkRoot, poolDirName, "*"))
	states, _ := filepath.Glob(filepath.Join(p.d.cfg.SpoolDir, poolSpool, "*.state"))
	for _, dir := range append(dirs, states...) {
		if !inUse[dir] && !inUse[filepath.Join(dir, "work")] {
			_ = os.RemoveAll(dir)
		}
	}
	if n > 0 {
		p.d.log.Info("warm pool: reaped the containers an earlier sandboxd left", "count", n)
	}
}

func unclaimedPoolName(names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(strings.TrimPrefix(n, "/"), poolNamePrefix) {
			return true
		}
	}
	return false
}

// runOfContainer is the run a sandbox container belongs to: its vera.run
// label, or, for a claimed pool container (which cannot be relabelled),
// the run in its name.
func runOfContainer(labels map[string]string, name string) string {
	if r := labels[LabelRun]; r != "" {
		return r
	}
	if labels[LabelPool] == "" {
		return ""
	}
	name = strings.TrimPrefix(name, "/")
	if strings.HasPrefix(name, poolNamePrefix) || !strings.HasPrefix(name, "vera-") {
		return ""
	}
	return strings.TrimPrefix(name, "vera-") // pool containers serve the agent only: vera-<run_id>
}

// moveInPool renames the pool directory poolDir's work/ into the run
// dir as its work/ (rundir.Dir.MoveIn: only if the run has none yet, or
// an empty one).
func moveInPool(poolDir string, dir *rundir.Dir) error {
	pd, err := rundir.OpenTrusted(poolDir, false)
	if err != nil {
		return err
	}
	defer pd.Close()
	return dir.MoveIn(pd, rundir.WorkName)
}

// venvScript makes /work/.cache and /work/.venv (the image puts
// /work/.venv/bin first on PATH, so pip install works without root). The
// venv is made without its own copy of pip (ensurepip costs seconds of CPU
// per container, the rest milliseconds): it sees the image's packages, pip
// among them, and its pip and pip3 run that pip with the venv's python, so
// that what they install goes into the venv.
const venvScript = `mkdir -p /work/.cache && { [ -x /work/.venv/bin/python ] || {
  python3 -m venv --without-pip --system-site-packages /work/.venv &&
  for p in pip pip3; do printf '#!/bin/sh\nexec /work/.venv/bin/python -m pip "$@"\n' > /work/.venv/bin/$p && chmod 0755 /work/.venv/bin/$p; done; }; }`

func randomToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
