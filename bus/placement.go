package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// PlacementBucket is the key-value bucket in which the sandbox daemons
// coordinate (package sandboxd/placement): which daemon runs which run
// (runs.<run>) and the daemons alive (daemons.<id>). Only the sandboxd
// identity may write it; every identity may read it.
const PlacementBucket = "VERA_SANDBOXD"

// PlacementMarkerTTL is how long the marker of a released run's lease
// stays in the placement bucket (sandboxd/placement purges runs.<run>
// with this per-message TTL): after it the key is gone, so that the bucket
// does not keep one marker for every run ever run, and a daemon that
// starts reads only the recent ones. A day leaves every daemon time to see
// the release.
const PlacementMarkerTTL = 24 * time.Hour

// PlacementKVConfig is the configuration of the placement bucket for these
// options.
func (o Options) PlacementKVConfig() jetstream.KeyValueConfig {
	o.setDefaults()
	return jetstream.KeyValueConfig{
		Bucket:      PlacementBucket,
		Description: "VERA sandbox placement: which sandboxd runs which run, and the daemons alive",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		// Per-message TTLs on (what the markers of released leases need);
		// the server's own markers, left when a limit removes a key, would
		// live this long too (the bucket has no limit that does).
		LimitMarkerTTL: PlacementMarkerTTL,
	}
}

// placementOpenWait bounds the retries of opening the placement bucket.
const placementOpenWait = time.Minute

// PlacementKV opens the placement bucket. Opening asks the bucket's
// stream leader, which a cluster may be electing: timeouts are retried
// for up to a minute. A bucket that does not exist is an error saying how
// to create it (EnsureStreams as admin, which `vera up` does).
func (b *Bus) PlacementKV(ctx context.Context) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	octx, cancel := context.WithTimeout(ctx, placementOpenWait)
	defer cancel()
	err := b.retryAPI(octx, "open key-value bucket "+PlacementBucket, func(actx context.Context) error {
		var err error
		kv, err = b.js.KeyValue(actx, PlacementBucket)
		return err
	})
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open key-value bucket %s: %w (start the bus once with `vera up` or as admin, which creates it)", PlacementBucket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open key-value bucket %s: %w", PlacementBucket, err)
	}
	return kv, nil
}

// ensurePlacementKV creates the placement bucket, or updates it to the
// current configuration. An identity that may not (every one but admin)
// uses the bucket as it is, and gets a clear error when it is missing.
func (b *Bus) ensurePlacementKV(ctx context.Context) error {
	cfg := b.opts.PlacementKVConfig()
	exists := false
	err := b.retryAPI(ctx, "create key-value bucket "+PlacementBucket, func(actx context.Context) error {
		kv, err := b.js.KeyValue(actx, PlacementBucket)
		if err == nil {
			exists = true
			st, err := kv.Status(actx)
			if err != nil {
				return err
			}
			if samePlacementConfig(st, cfg) {
				return nil
			}
		} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return err
		}
		_, err = b.js.CreateOrUpdateKeyValue(actx, cfg)
		return err
	})
	if errors.Is(err, ErrPermissionDenied) {
		if exists {
			b.log.Warn("key-value bucket "+PlacementBucket+" differs from this version's configuration; this identity may not update it (connect once as admin to do so)", "identity", b.opts.Name)
			return nil
		}
		return fmt.Errorf("key-value bucket %s does not exist and this identity may not create it: %w (start the bus with `vera up`, or connect once with the admin identity, e.g. `vera up --nats-url URL --nats-creds DATA_DIR/creds/admin.nk`)", PlacementBucket, err)
	}
	if err != nil {
		return fmt.Errorf("create key-value bucket %s: %w", PlacementBucket, err)
	}
	return nil
}

// samePlacementConfig reports whether the bucket has every setting VERA
// gives it.
func samePlacementConfig(st jetstream.KeyValueStatus, want jetstream.KeyValueConfig) bool {
	kvs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return false
	}
	cfg := kvs.StreamInfo().Config
	return cfg.Description == want.Description && kvs.History() == int64(want.History) &&
		cfg.Storage == want.Storage && cfg.Replicas == want.Replicas && kvs.LimitMarkerTTL() == want.LimitMarkerTTL
}
