package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/vera-run/vera/bus"
)

// storeLimits are the sizes VERA's streams may take (issue 26: the store
// had no limit, and a full disk stops every component's publish): the
// --max-store total split among the streams (bus.SplitStore), or, for the
// embedded server with no --max-store, what is stored under storeDir now
// plus half the free space of its disk. Against an outside server with no
// --max-store the streams keep the limits they have (zero limits).
func (g *globals) storeLimits(storeDir string, external bool, log *slog.Logger) (bus.StoreLimits, error) {
	if g.maxStore != "" {
		total, err := parseSize(g.maxStore)
		if err != nil {
			return bus.StoreLimits{}, usageError{fmt.Errorf("--max-store: %w", err)}
		}
		l := bus.SplitStore(total)
		log.Info("store limits", "total", size(total), "events", size(l.Events), "blobs", size(l.Blobs), "dead_letters", size(l.DeadLetters), "outside_events", size(l.Ext))
		return l, nil
	}
	if external {
		return bus.StoreLimits{}, nil
	}
	var st syscall.Statfs_t
	dir := storeDir
	for {
		if err := syscall.Statfs(dir, &st); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return bus.StoreLimits{}, nil // no disk to measure: no limit
		}
		dir = parent
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	total := usedBytes(storeDir) + free/2
	l := bus.SplitStore(total)
	log.Info("store limits (default: what is stored plus half the free disk; --max-store to choose)", "total", size(total),
		"events", size(l.Events), "blobs", size(l.Blobs), "dead_letters", size(l.DeadLetters), "outside_events", size(l.Ext))
	return l, nil
}

// usedBytes is what the files under dir take (0 when it does not exist).
func usedBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// parseSize reads a size: a number of bytes, or with a unit B, KB, MB, GB,
// TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), case
// insensitive, optionally with a space.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional unit (e.g. 20GB, 500MiB)", s)
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, unit)
	}
	return int64(f * mult), nil
}

// size writes a byte count for a person.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
