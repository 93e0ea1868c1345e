package sandboxd_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/sandboxd"
)

// BenchmarkRoundTrip measures tool.requested → tool.finished through the
// bus and sandboxd against a raw Docker API exec (create, attach, read,
// inspect) of the same command in the same container, interleaved in one
// run. It reports p50 and p99 of both and the ratio of the p50s.
//
//	VERA_TEST_LOG= go test ./sandboxd -run '^$' -bench RoundTrip -benchtime 200x
func BenchmarkRoundTrip(b *testing.B) {
	for _, c := range []struct{ name, cmd string }{
		{"true", "true"},
		{"1MB", "head -c 1000000 /dev/zero | tr '\\0' x"},
	} {
		b.Run(c.name, func(b *testing.B) { benchRoundTrip(b, c.cmd) })
	}
}

// BenchmarkRoundTripCluster is BenchmarkRoundTrip on an in-process
// 3-node cluster with R3 streams (every event stored by a majority).
//
//	VERA_TEST_LOG= go test ./sandboxd -run '^$' -bench RoundTripCluster -benchtime 200x
func BenchmarkRoundTripCluster(b *testing.B) {
	c := bustest.StartCluster(b, 3)
	bb := bustest.Connect(b, c.URL(), bus.Options{Replicas: 3})
	f := newFixtureOn(b, c.URL(), bb, nil, true)
	benchRoundTripOn(b, f, "true")
}

func benchRoundTrip(b *testing.B, command string) {
	benchRoundTripOn(b, newFixtureOpts(b, nil, true), command)
}

func benchRoundTripOn(b *testing.B, f *fixture, command string) {
	run := f.run("rt")
	ctx := context.Background()

	// One subscriber delivers every tool.finished of the run.
	finished := make(chan catalog.ToolFinished, 16)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for rec, err := range f.b.Read(rctx, bus.ReadOptions{RunID: run, Types: []string{catalog.TypeToolFinished}, Follow: true}) {
			if err != nil {
				return
			}
			var tf catalog.ToolFinished
			if rec.Event.DecodeData(&tf) == nil {
				finished <- tf
			}
		}
	}()
	viaBus := func(i int) time.Duration {
		id := fmt.Sprintf("b%d", i)
		ev, _ := f.b.Events.New(run, catalog.ToolRequested{RequestID: id, Requester: catalog.RequesterAgent, Tool: catalog.ToolShell, Command: command, TimeoutMS: 60000})
		start := time.Now()
		if _, err := f.b.Publish(ctx, ev); err != nil {
			b.Fatal(err)
		}
		for tf := range finished {
			if tf.RequestID == id {
				if tf.ExitCode != 0 {
					b.Fatalf("command failed: %+v", tf)
				}
				return time.Since(start)
			}
		}
		return 0
	}
	viaBus(-1) // creates the container
	info, err := f.docker.ContainerInspect(ctx, sandboxd.ContainerName(run, "agent"))
	if err != nil {
		b.Fatal(err)
	}
	raw := func() time.Duration {
		start := time.Now()
		created, err := f.docker.ContainerExecCreate(ctx, info.ID, container.ExecOptions{
			User: f.cfg.User, AttachStdout: true, AttachStderr: true, WorkingDir: "/work", Cmd: []string{"bash", "-c", command},
		})
		if err != nil {
			b.Fatal(err)
		}
		att, err := f.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := stdcopy.StdCopy(io.Discard, io.Discard, att.Reader); err != nil {
			b.Fatal(err)
		}
		att.Close()
		ins, err := f.docker.ContainerExecInspect(ctx, created.ID)
		if err != nil || ins.ExitCode != 0 {
			b.Fatalf("raw exec: %v exit %d", err, ins.ExitCode)
		}
		return time.Since(start)
	}
	raw() // warm up
	var rawD, busD []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rawD = append(rawD, raw())
		busD = append(busD, viaBus(i))
	}
	b.StopTimer()
	p := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	b.ReportMetric(float64(p(rawD, 0.5).Microseconds())/1000, "raw-p50-ms")
	b.ReportMetric(float64(p(rawD, 0.99).Microseconds())/1000, "raw-p99-ms")
	b.ReportMetric(float64(p(busD, 0.5).Microseconds())/1000, "bus-p50-ms")
	b.ReportMetric(float64(p(busD, 0.99).Microseconds())/1000, "bus-p99-ms")
	b.ReportMetric(float64(p(busD, 0.5))/float64(p(rawD, 0.5)), "ratio-p50")
}
