package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

const blobChunkSize = 512 << 10

// BlobRef points at a big payload in the object store by its content digest.
// Events carry BlobRefs instead of the bytes (invariant 6).
// (The jsonschema tags feed the catalogue's generated schemas.)
type BlobRef struct {
	Digest      string `json:"digest" jsonschema:"pattern=^sha256:[0-9a-f]{64}$" jsonschema_description:"Content address: 'sha256:' followed by the lowercase hex SHA-256 of the stored bytes. The object's name in the object store."`
	Size        int64  `json:"size" jsonschema:"minimum=0" jsonschema_description:"Size of the stored bytes."`
	ContentType string `json:"content_type" jsonschema_description:"Media type of the stored bytes, e.g. text/plain; charset=utf-8, application/json or application/octet-stream."`
	Name        string `json:"name,omitempty" jsonschema_description:"Optional human-friendly name, e.g. stdout.txt or messages.json."`
}

// ErrBlobNotFound is returned when no blob has the digest.
var ErrBlobNotFound = errors.New("blob not found")

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Digest returns the content digest of data in BlobRef form.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func objectName(digest string) (string, error) {
	if !digestPattern.MatchString(digest) {
		return "", fmt.Errorf("bad blob digest %q: want sha256:<64 hex>", digest)
	}
	return strings.TrimPrefix(digest, "sha256:"), nil
}

func (b *Bus) blobStore(ctx context.Context) (jetstream.ObjectStore, error) {
	// Opening asks the stream's leader, which a cluster may be electing
	// (a node just died): retry timeouts for up to a minute, as publishes
	// do, instead of failing an export on the first one.
	var os jetstream.ObjectStore
	octx, cancel := context.WithTimeout(ctx, blobOpenWait)
	defer cancel()
	err := b.retryAPI(octx, "open object store "+BlobBucket, func(actx context.Context) error {
		var err error
		os, err = b.js.ObjectStore(actx, BlobBucket)
		return err
	})
	if err == nil {
		return os, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open object store %s: %w", BlobBucket, err)
	}
	os, err = b.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      BlobBucket,
		Description: "VERA big payloads (model I/O, tool output), named by sha256",
		Storage:     jetstream.FileStorage,
		Replicas:    b.opts.Replicas,
	})
	if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
		return nil, fmt.Errorf("create object store %s: %w", BlobBucket, err)
	}
	if err != nil {
		return b.js.ObjectStore(ctx, BlobBucket)
	}
	return os, nil
}

// blobOpenWait bounds the retries of opening the object store.
const blobOpenWait = time.Minute

// PutBlob stores data under its digest (once: an existing blob is kept) and
// returns its reference.
func (b *Bus) PutBlob(ctx context.Context, data []byte, contentType string) (BlobRef, error) {
	ref := BlobRef{Digest: Digest(data), Size: int64(len(data)), ContentType: contentType}
	return ref, b.putBlob(ctx, ref, bytes.NewReader(data))
}

// PutBlobFile stores the file at path as a blob without holding it in memory.
func (b *Bus) PutBlobFile(ctx context.Context, path, contentType string) (BlobRef, error) {
	return b.PutBlobFileDigest(ctx, path, "", contentType)
}

// PutBlobFileDigest is PutBlobFile for a file whose digest the caller
// already computed while writing it ("" to compute it here). The object
// store checks the content against it.
func (b *Bus) PutBlobFileDigest(ctx context.Context, path, digest, contentType string) (BlobRef, error) {
	f, err := os.Open(path)
	if err != nil {
		return BlobRef{}, fmt.Errorf("put blob: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return BlobRef{}, fmt.Errorf("put blob: %w", err)
	}
	if digest == "" {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return BlobRef{}, fmt.Errorf("put blob: hash %s: %w", path, err)
		}
		digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	ref := BlobRef{Digest: digest, Size: st.Size(), ContentType: contentType}
	return ref, b.putBlob(ctx, ref, f)
}

// putBlob stores r (rewound before each attempt) under ref's digest. The
// object store publishes a big blob's chunks without pacing, and a busy
// server answers "too many requests" (10167); Put is atomic (a failed put
// leaves nothing), so it is simply tried again after a pause.
func (b *Bus) putBlob(ctx context.Context, ref BlobRef, r io.ReadSeeker) error {
	var err error
	for attempt := 1; attempt <= 6; attempt++ {
		if _, serr := r.Seek(0, io.SeekStart); serr != nil {
			return fmt.Errorf("put blob: %w", serr)
		}
		if err = b.putBlobOnce(ctx, ref, r); err == nil || !isAPIErrorCode(err, 10167) && !retryable(err) {
			return err
		}
		b.log.Warn("put blob: server busy; retrying", "digest", ref.Digest, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("put blob %s: %w", ref.Digest, ctx.Err())
		case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
		}
	}
	return err
}

func (b *Bus) putBlobOnce(ctx context.Context, ref BlobRef, r io.Reader) error {
	name, err := objectName(ref.Digest)
	if err != nil {
		return err
	}
	store, err := b.blobStore(ctx)
	if err != nil {
		return err
	}
	old, err := store.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	switch {
	case err == nil && !old.Deleted && int64(old.Size) == ref.Size:
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
		return fmt.Errorf("put blob %s: %w", ref.Digest, err)
	}
	// 512 KiB chunks (the default is 128 KiB): a quarter of the fsync'd
	// writes, still well under a default server's 1 MiB max payload.
	meta := jetstream.ObjectMeta{Name: name, Description: ref.ContentType, Opts: &jetstream.ObjectMetaOptions{ChunkSize: blobChunkSize}}
	if err := b.putObject(ctx, meta, r); err != nil {
		return fmt.Errorf("put blob %s (%d bytes): %w", ref.Digest, ref.Size, err)
	}
	// A deleted or damaged earlier copy's chunks stay: only admin purges
	// the blob store (bus/auth), and they are never read again (the new
	// meta names the new chunks).
	return nil
}

// blobWindow bounds the chunks of one put awaiting their acks.
const blobWindow = 32

// putObject stores r as object meta.Name in the blob bucket, laid out
// exactly as jetstream's ObjectStore.Put lays it out (the chunks on
// $O.<bucket>.C.<nuid>, then the object's info on
// $O.<bucket>.M.<base64url(name)> with a subject rollup), so that the
// object store reads it as its own. It publishes through the bus's own
// JetStream context: ObjectStore.Put makes a context per call, and in
// nats.go v1.55 the reconnect watcher that context starts can be parked
// forever when Put's cleanup runs before the watcher is scheduled, one
// leaked goroutine per lost race. The chunks go out with at most
// blobWindow awaiting their acks (Put sends them all at once, which a busy
// server answers with "too many requests"). Nothing is visible until the
// info is stored; the chunks of a put that failed stay unread (only admin
// may purge the blob store: a purge request names what it removes in its
// body, which no permission can confine to one object), bounded by the
// bucket's size limit.
func (b *Bus) putObject(ctx context.Context, meta jetstream.ObjectMeta, r io.Reader) error {
	id := nuid.Next()
	chunkSubj := "$O." + BlobBucket + ".C." + id
	window := make([]jetstream.PubAckFuture, 0, blobWindow)
	awaitOldest := func() error {
		f := window[0]
		window = append(window[:0], window[1:]...)
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h := sha256.New()
	var size uint64
	var chunks uint32
	buf := make([]byte, meta.Opts.ChunkSize)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			// The chunk is copied into the connection's buffer by the
			// publish (as ObjectStore.Put relies on too), so buf is reused.
			h.Write(buf[:n])
			f, err := b.js.PublishMsgAsync(&nats.Msg{Subject: chunkSubj, Data: buf[:n]})
			if err != nil {
				return err
			}
			window = append(window, f)
			size += uint64(n)
			chunks++
			if len(window) >= blobWindow {
				if err := awaitOldest(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	for len(window) > 0 {
		if err := awaitOldest(); err != nil {
			return err
		}
	}
	info := jetstream.ObjectInfo{ObjectMeta: meta, Bucket: BlobBucket, NUID: id, Size: size, Chunks: chunks,
		Digest: jetstream.GetObjectDigestValue(h)}
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	m := nats.NewMsg("$O." + BlobBucket + ".M." + base64.URLEncoding.EncodeToString([]byte(meta.Name)))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = data
	if _, err := b.js.PublishMsg(ctx, m); err != nil {
		return err
	}
	return nil
}

// GetBlob returns the bytes of the blob with the digest, checking them.
func (b *Bus) GetBlob(ctx context.Context, digest string) ([]byte, error) {
	name, err := objectName(digest)
	if err != nil {
		return nil, err
	}
	store, err := b.blobStore(ctx)
	if err != nil {
		return nil, err
	}
	// Without a deadline of the caller's, jetstream would bound the whole
	// read by its 5s API default, too short for a big blob on a busy
	// machine: allow a minute plus a second per MiB.
	if _, ok := ctx.Deadline(); !ok {
		limit := time.Minute
		if info, err := store.GetInfo(ctx, name); err == nil {
			limit += time.Duration(info.Size>>20) * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	data, err := store.GetBytes(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("get blob %s: %w", digest, ErrBlobNotFound)
		}
		return nil, fmt.Errorf("get blob %s: %w", digest, err)
	}
	if Digest(data) != digest {
		return nil, fmt.Errorf("get blob %s: content digest mismatch", digest)
	}
	return data, nil
}

// HasBlob reports whether a blob with the digest is stored.
func (b *Bus) HasBlob(ctx context.Context, digest string) (bool, error) {
	name, err := objectName(digest)
	if err != nil {
		return false, err
	}
	store, err := b.blobStore(ctx)
	if err != nil {
		return false, err
	}
	info, err := store.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat blob %s: %w", digest, err)
	}
	return !info.Deleted, nil
}
