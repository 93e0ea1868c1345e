package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/projector"
)

// MetricsFile is the metrics snapshot Rebuild writes beside the projected
// files.
const MetricsFile = "metrics.prom"

// OutputFiles lists every file Rebuild writes, sorted.
func OutputFiles() []string {
	return append(projector.FileNames(), MetricsFile)
}

// RebuildOptions tune Rebuild.
type RebuildOptions struct {
	// Force allows writing into a non-empty directory (the projected
	// files and metrics.prom are replaced; other files are left alone).
	Force  bool
	Logger *slog.Logger
}

// RebuildResult describes a rebuild.
type RebuildResult struct {
	RunID     string           `json:"run_id"`
	Dir       string           `json:"dir"`
	Events    int              `json:"events"`
	Malformed int              `json:"malformed,omitempty"`
	Files     map[string]int64 `json:"files"` // bytes per file written
}

// ErrNotEmpty is returned when the output directory holds files and
// overwriting was not allowed.
var ErrNotEmpty = errors.New("output directory is not empty")

// PrepareOut makes sure dir can receive a replay: it is created when
// missing; an existing non-empty directory is refused unless force.
func PrepareOut(dir string, force bool) error {
	if dir == "" {
		return errors.New("no output directory")
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create output directory: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("output directory: %w", err)
	case len(entries) > 0 && !force:
		return fmt.Errorf("%s: %w (pass --force to overwrite)", dir, ErrNotEmpty)
	}
	return nil
}

// Rebuild writes the file projections of run runID and its metrics
// snapshot into dir, from the events b holds, through the projector's own
// code. See the package documentation.
func Rebuild(ctx context.Context, b *bus.Bus, runID, dir string, opts RebuildOptions) (RebuildResult, error) {
	res := RebuildResult{RunID: runID, Dir: dir}
	if err := checkRun(ctx, b, runID); err != nil {
		return res, err
	}
	if err := PrepareOut(dir, opts.Force); err != nil {
		return res, err
	}
	files, err := projector.NewFiles(b, projector.FilesConfig{Logger: opts.Logger})
	if err != nil {
		return res, err
	}
	if err := files.Rebuild(ctx, runID, dir); err != nil {
		return res, fmt.Errorf("rebuild files of run %s: %w", runID, err)
	}
	m := projector.NewMetrics(nil, opts.Logger)
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: runID}) {
		if err != nil {
			return res, fmt.Errorf("read run %s: %w", runID, err)
		}
		if rec.Err != nil {
			res.Malformed++
			m.ObserveMalformed()
			continue
		}
		res.Events++
		m.Observe(rec.Event)
	}
	if err := writeAtomic(filepath.Join(dir, MetricsFile), m.WriteText); err != nil {
		return res, fmt.Errorf("write %s: %w", MetricsFile, err)
	}
	res.Files = map[string]int64{}
	for _, name := range OutputFiles() {
		fi, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // nothing fed it, as in the live projection
		}
		if err != nil {
			return res, err
		}
		res.Files[name] = fi.Size()
	}
	return res, nil
}

// writeAtomic writes path through a temporary file, fsync and rename.
func writeAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
