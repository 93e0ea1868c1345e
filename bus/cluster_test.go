package bus_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// TestClusterNodeLossKeepsAcknowledgedEvents publishes to an R3 stream,
// stops the stream's leader mid-publish, and checks that every acknowledged
// event is stored exactly once and that a consumer sees all of them.
func TestClusterNodeLossKeepsAcknowledgedEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test skipped in -short mode")
	}
	c := bustest.StartCluster(t, 3)
	b := bustest.Connect(t, c.URL(), bus.Options{Replicas: 3, PublishTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	stream, err := b.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream is not R3: %+v", info.Cluster)
	}
	leader := info.Cluster.Leader

	var mu sync.Mutex
	consumed := map[string]int{}
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "cluster", AckWait: 2 * time.Second},
		func(ctx context.Context, m *bus.Message) error {
			mu.Lock()
			consumed[m.Event.ID]++
			mu.Unlock()
			return nil
		})

	const total = 300
	acked := map[string]bool{}
	for i := 0; i < total; i++ {
		if i == total/3 {
			idx, _ := strconv.Atoi(leader[1:])
			t.Logf("stopping stream leader %s after %d acks", leader, len(acked))
			c.Stop(idx - 1)
		}
		ev := mustEvent(t, b, "cl", note{N: i})
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatalf("publish %d after node loss: %v", i, err)
		}
		acked[ev.ID] = true
	}

	stored, err := b.ReadRun(ctx, "cl")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, ev := range stored {
		seen[ev.ID]++
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("acknowledged event %s stored %d times", id, seen[id])
		}
	}
	if len(stored) != total {
		t.Errorf("stored %d events, want %d", len(stored), total)
	}
	waitFor(t, "consumer to see every event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(consumed) == total
	})
	stop()
	if info, err := stream.Info(ctx); err == nil && info.Cluster != nil {
		t.Logf("new leader %s", info.Cluster.Leader)
	}
}
