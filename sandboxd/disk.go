package sandboxd

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
)

// Disk limits. The engine here may not support a size for a container's
// writable layer (--storage-opt size needs overlay2 on xfs with pquota;
// fuse-overlayfs, btrfs without quotas and others refuse it), and /work is
// a bind mount of a host directory, which no Docker option limits. So:
//
//   - scratch space: /tmp, /var/tmp and /run/lock, the only places of an
//     image the sandbox user may write besides /work, are tmpfs mounts of
//     the scratch limit's size (the kernel enforces it: a write past it
//     fails with "No space left on device"; tmpfs pages count against the
//     container's memory limit, so the limit is at most that);
//   - the writable layer: where the engine supports --storage-opt size,
//     the scratch limit is also the layer's size; where it does not, a
//     watchdog checks the layer's size (Docker's SizeRw) while a command
//     runs as root (lab mode: only root can write elsewhere) and kills the
//     command past the limit;
//   - /work: a watchdog measures the run's work dir on the host (the
//     blocks its files take, so a sparse file counts for what it stores)
//     every diskPoll while an agent command runs, and kills the command
//     when /work holds more than the limit. A command can write what it
//     writes within one poll beyond the limit before it is stopped; the
//     edit tool refuses an edit that would pass it.
//
// Each kill is a clear tool result; the daemon and other runs go on.

// Defaults of the limits.
const (
	DefaultWorkLimit    = 4 << 30
	DefaultScratchLimit = 1 << 30
	// diskPoll is how often the watchdogs measure during a command.
	diskPoll = 500 * time.Millisecond
	// layerPoll is how often the writable layer is measured (Docker walks
	// the layer to answer).
	layerPoll = 3 * time.Second
)

// workLimit is the run's /work limit in bytes (0 = none).
func (d *Daemon) workLimit(rs *runState) int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.cfg != nil && rs.cfg.Sandbox.WorkLimitMB > 0 {
		return rs.cfg.Sandbox.WorkLimitMB << 20
	}
	return d.cfg.WorkLimit
}

// scratchLimit is the run's scratch limit in bytes, at most the memory
// limit (tmpfs pages are the container's memory).
func (d *Daemon) scratchLimit(rs *runState) int64 {
	rs.mu.Lock()
	lim := d.cfg.ScratchLimit
	if rs.cfg != nil && rs.cfg.Sandbox.ScratchLimitMB > 0 {
		lim = rs.cfg.Sandbox.ScratchLimitMB << 20
	}
	rs.mu.Unlock()
	if d.cfg.Memory > 0 && lim > d.cfg.Memory {
		lim = d.cfg.Memory
	}
	return lim
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// usedBytes is what a directory tree takes on disk (allocated blocks).
func usedBytes(root string) (int64, error) {
	var total int64
	err := filepath.WalkDir(root, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: not counted
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// workUsed is what the run's /work takes.
func (d *Daemon) workUsed(rs *runState) (int64, error) {
	work, _, err := d.admit(rs)
	if err != nil {
		return 0, err
	}
	return usedBytes(work)
}

// diskWatch watches a command's disk use until stop is called; over a
// limit, it calls kill once with the reason.
type diskWatch struct {
	stop   func()
	reason func() string
}

// watchDisk starts the watchdogs that apply to a command in box b.
func (d *Daemon) watchDisk(ctx context.Context, rs *runState, b *box, root bool, kill func(reason string)) diskWatch {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var reason string
	workLim := d.workLimit(rs)
	layerLim := int64(0)
	if root && !d.storageOptOK() {
		layerLim = d.scratchLimit(rs)
	}
	work := ""
	if b.role == roleAgent && workLim > 0 {
		if w, _, err := d.admit(rs); err == nil {
			work = w
		}
	}
	if work == "" && layerLim == 0 {
		cancel()
		close(done)
		return diskWatch{stop: func() {}, reason: func() string { return "" }}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(diskPoll)
		defer tick.Stop()
		lastLayer := time.Now()
		// What /work held as the command began: a command that finds it
		// over the limit already (the previous one was killed there) is
		// killed only if it adds to it, so that removing files, the way
		// out the error names, always works.
		base := int64(-1)
		if work != "" {
			if used, err := usedBytes(work); err == nil {
				base = used
			}
		}
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			if work != "" {
				if used, err := usedBytes(work); err == nil && used > workLim && used > base {
					reason = fmt.Sprintf("disk limit: /work holds %s, more than its limit of %s; the command was killed. Remove files to free space (du -sh /work/* shows what takes it).", mib(used), mib(workLim))
					kill(reason)
					return
				}
			}
			if layerLim > 0 && time.Since(lastLayer) >= layerPoll {
				lastLayer = time.Now()
				info, _, err := d.docker.ContainerInspectWithRaw(wctx, b.id, true)
				if err == nil && info.SizeRw != nil && *info.SizeRw > layerLim {
					reason = fmt.Sprintf("disk limit: the container's writable layer holds %s, more than the scratch limit of %s; the command was killed.", mib(*info.SizeRw), mib(layerLim))
					kill(reason)
					return
				}
			}
		}
	}()
	return diskWatch{
		stop:   func() { cancel(); <-done },
		reason: func() string { cancel(); <-done; return reason },
	}
}

// storageOptOK reports whether the engine takes a size for a container's
// writable layer (learnt when the first container is created).
func (d *Daemon) storageOptOK() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.layerSize == layerSizeOK
}

// Whether the engine supports --storage-opt size.
const (
	layerSizeUnknown = iota
	layerSizeOK
	layerSizeNo
)

// scratchMounts are the tmpfs mounts of a sandbox: every directory of the
// image the sandbox user may write besides /work.
func scratchMounts(limit int64) map[string]string {
	if limit <= 0 {
		return nil
	}
	opt := fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=1777", limit)
	return map[string]string{"/tmp": opt, "/var/tmp": opt, "/run/lock": "rw,noexec,nosuid,nodev,size=1048576,mode=1777"}
}

// isStorageOptUnsupported tells an engine's refusal of --storage-opt size.
func isStorageOptUnsupported(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "storage-opt") || strings.Contains(s, "storage opt") || strings.Contains(s, "quota")
}

// applyLayerLimit sets the writable layer's size when the engine may
// support it.
func (d *Daemon) applyLayerLimit(host *container.HostConfig, limit int64) {
	d.mu.Lock()
	state := d.layerSize
	d.mu.Unlock()
	if state != layerSizeNo && limit > 0 {
		host.StorageOpt = map[string]string{"size": fmt.Sprintf("%d", limit)}
	}
}

// noteLayerSize records whether the engine took the layer size.
func (d *Daemon) noteLayerSize(ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ok {
		d.layerSize = layerSizeOK
	} else {
		d.layerSize = layerSizeNo
	}
}
