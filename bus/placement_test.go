package bus_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// TestPlacementBucketConfigured: EnsureStreams creates the placement
// bucket with one value per key on file storage, PlacementKV opens it,
// and a bucket changed behind VERA's back is set right on the next
// EnsureStreams.
func TestPlacementBucketConfigured(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	kv, err := b.PlacementKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
		want := b.Options().PlacementKVConfig()
		if st.Bucket() != bus.PlacementBucket || st.History() != 1 || info.Config.Storage != jetstream.FileStorage ||
			info.Config.Description != want.Description || info.Config.Replicas != 1 ||
			!info.Config.AllowMsgTTL || st.LimitMarkerTTL() != bus.PlacementMarkerTTL {
			t.Fatalf("placement bucket: history %d, config %+v", st.History(), info.Config)
		}
	}
	check()
	if _, err := kv.Create(ctx, "runs.r1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	// Changed by hand: EnsureStreams restores the history, keeping keys.
	cfg := b.Options().PlacementKVConfig()
	cfg.History = 5
	cfg.Description = "changed"
	if _, err := b.JetStream().UpdateKeyValue(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := b.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	check()
	if _, err := kv.Get(ctx, "runs.r1"); err != nil {
		t.Fatalf("key after EnsureStreams: %v", err)
	}
	// A bucket made by a version without marker TTLs (no per-message
	// TTLs) is given them by EnsureStreams, keeping its keys.
	if err := b.JetStream().DeleteKeyValue(ctx, bus.PlacementBucket); err != nil {
		t.Fatal(err)
	}
	old := b.Options().PlacementKVConfig()
	old.LimitMarkerTTL = 0
	if kv, err = b.JetStream().CreateKeyValue(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "runs.r2", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	check()
	if _, err := kv.Get(ctx, "runs.r2"); err != nil {
		t.Fatalf("key after EnsureStreams gave the bucket marker TTLs: %v", err)
	}
}
