package sandboxd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkWorkPoll measures one poll of the /work watchdog (usedBytes,
// the walk workUsed does) on a work dir of 3,000 files in 60 directories
// (a checkout with a venv is of that order), and reports the CPU it takes
// (user+system, from getrusage) beside the wall time, and what share of
// one core the watchdog of one idle run costs at workIdlePoll; du -s of
// the same tree is the raw thing to compare with:
//
//	go test -run '^$' -bench WorkPoll ./sandboxd/
func BenchmarkWorkPoll(b *testing.B) {
	root := b.TempDir()
	data := make([]byte, 3000)
	for d := 0; d < 60; d++ {
		dir := filepath.Join(root, fmt.Sprintf("pkg%02d", d), "sub")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.py", i)), data[:(i*61)%len(data)], 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	want, err := usedBytes(root)
	if err != nil || want == 0 {
		b.Fatalf("%d %v", want, err)
	}
	cpu := func(who int) time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(who, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.Run("usedBytes", func(b *testing.B) {
		c0 := cpu(syscall.RUSAGE_SELF)
		for i := 0; i < b.N; i++ {
			if got, err := usedBytes(root); err != nil || got != want {
				b.Fatalf("%d %v", got, err)
			}
		}
		perPoll := (cpu(syscall.RUSAGE_SELF) - c0) / time.Duration(b.N)
		b.ReportMetric(float64(perPoll.Nanoseconds()), "cpu-ns/poll")
		b.ReportMetric(100*float64(perPoll)/float64(workIdlePoll), "%core-idle")
	})
	// The raw thing, for the ratio: du -s of the same tree (its CPU,
	// from the children's rusage, without the fork and exec).
	if _, err := exec.LookPath("du"); err != nil {
		return
	}
	b.Run("du-s", func(b *testing.B) {
		c0 := cpu(syscall.RUSAGE_CHILDREN)
		for i := 0; i < b.N; i++ {
			if err := exec.Command("du", "-s", root).Run(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(((cpu(syscall.RUSAGE_CHILDREN) - c0) / time.Duration(b.N)).Nanoseconds()), "cpu-ns/poll")
	})
}
