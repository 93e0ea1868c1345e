package bus

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Outside tools' events (vera.ext.* types) reach the record through a
// stream of their own, which the server bounds per run and per identity:
//
//	an ext identity publishes     vera.extin.<run_id>.<identity>   (stream VERA_EXT)
//	the stream VERA sources it as vera.run.<run_id>.ext.<identity>
//
// The identity token is the publisher's own: an ext identity may publish
// only on subjects that end with its name (bus/auth), so the record says
// which identity sent each outside event, and the server counts per
// subject. VERA_EXT keeps at most ExtEventsPerRun events of at most
// ExtMaxEventSize bytes per run and identity (16 MiB) and refuses the
// next with "maximum messages per subject exceeded"; its whole size is
// bounded too (StoreLimits.Ext), so outside tools can never fill the
// event store VERA's components write to. The event's type is its
// envelope's (any vera.ext.* type), not the subject's.
const (
	ExtStream = "VERA_EXT"
	// ExtInRoot is the root of the subjects outside tools publish their
	// events on: vera.extin.<run_id>.<identity>.
	ExtInRoot = "vera.extin"
	// ExtArea is the area of outside types (vera.ext.*) and of their
	// subjects in VERA (vera.run.<run_id>.ext.<identity>).
	ExtArea = "ext"

	// ExtMaxEventSize bounds one outside event (its envelope).
	ExtMaxEventSize = 16 << 10
	// ExtEventsPerRun bounds the outside events of one identity on one
	// run: with ExtMaxEventSize, 16 MiB.
	ExtEventsPerRun = 1024
)

// ExtInSubject is the subject identity publishes run runID's outside
// events on.
func ExtInSubject(runID, identity string) (string, error) {
	if err := ValidateRunID(runID); err != nil {
		return "", err
	}
	if identity == "" || strings.ContainsAny(identity, ".*> \t\r\n") {
		return "", fmt.Errorf("outside events: identity %q cannot name a subject token", identity)
	}
	return ExtInRoot + "." + runID + "." + identity, nil
}

// ExtStreamConfig is the configuration of VERA_EXT.
func (o Options) ExtStreamConfig() jetstream.StreamConfig {
	o.setDefaults()
	perRun := o.ExtEventsPerRun
	if perRun <= 0 {
		perRun = ExtEventsPerRun
	}
	return jetstream.StreamConfig{
		Name:                 ExtStream,
		Description:          "VERA outside tools' events, bounded per run and identity: vera.extin.<run_id>.<identity>, sourced into VERA",
		Subjects:             []string{ExtInRoot + ".*.*"},
		Storage:              jetstream.FileStorage,
		Retention:            jetstream.LimitsPolicy,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		MaxMsgsPerSubject:    perRun,
		MaxMsgSize:           ExtMaxEventSize,
		MaxBytes:             o.Limits.Ext,
		Replicas:             o.Replicas,
		Duplicates:           o.DedupWindow,
		DenyDelete:           true,
	}
}

// extSource makes VERA source VERA_EXT, each event on its run's subject.
func extSource() *jetstream.StreamSource {
	return &jetstream.StreamSource{
		Name: ExtStream,
		SubjectTransforms: []jetstream.SubjectTransformConfig{{
			Source:      ExtInRoot + ".*.*",
			Destination: SubjectRoot + ".{{wildcard(1)}}." + ExtArea + ".{{wildcard(2)}}",
		}},
	}
}

// identityOf is the identity of a connection: its seed file's name
// without the extension, else source.
func identityOf(credsFile, source string) string {
	if credsFile != "" {
		base := filepath.Base(credsFile)
		return strings.TrimSuffix(base, filepath.Ext(base))
	}
	return source
}

// isExtType reports whether typ is an outside type (vera.ext.…).
func isExtType(typ string) bool { return strings.HasPrefix(typ, "vera."+ExtArea+".") }

// typeMatches reports whether typ matches the NATS-style type pattern
// (tokens, '*' one token, a final '>' one or more).
func typeMatches(pattern, typ string) bool {
	if pattern == "" || pattern == ">" || pattern == "vera.>" {
		return true
	}
	p, t := strings.Split(pattern, "."), strings.Split(typ, ".")
	for i, tok := range p {
		if tok == ">" && i == len(p)-1 {
			return len(t) > i
		}
		if i >= len(t) || (tok != "*" && tok != t[i]) {
			return false
		}
	}
	return len(p) == len(t)
}

// StoreLimits bound what VERA's streams may hold, in bytes (0: no
// limit). A full stream refuses new messages (DiscardNew: nothing stored
// is ever dropped to make room), but for the dead letters, whose oldest
// go first.
type StoreLimits struct {
	Events      int64 // VERA, outside events sourced into it included
	Ext         int64 // VERA_EXT
	DeadLetters int64 // VERA_DLQ
	Blobs       int64 // the object store
}

// SplitStore divides a total store budget among VERA's streams: the
// events 70 %, blobs 20 %, dead letters 5 %, outside events 5 %.
func SplitStore(total int64) StoreLimits {
	if total <= 0 {
		return StoreLimits{}
	}
	return StoreLimits{Events: total * 70 / 100, Blobs: total * 20 / 100, DeadLetters: total * 5 / 100, Ext: total * 5 / 100}
}

// DeadLetterCopyMax bounds the copy of the rejected message a dead letter
// carries: the message itself stays in its stream (Sequence names it).
const DeadLetterCopyMax = 16 << 10

// storeFullLogEvery spaces the one-line report of a full stream.
const storeFullLogEvery = time.Minute

// ErrStoreFull: a stream refused a message because it holds what its
// limits allow (StoreLimits). Nothing stored is dropped to make room; the
// publish is not retried within the call (a consumer's delivery comes back
// later, when there may be room).
var ErrStoreFull = errors.New("stream full")

// ErrExtBudget: an identity published as many outside events on a run as
// VERA_EXT keeps per run and identity. Permanent.
var ErrExtBudget = errors.New("outside events: budget of this run and identity used up")

// limitError turns the server's refusal of a message for a stream's
// limits into ErrStoreFull or ErrExtBudget (or ErrTooLarge), with what it
// means and what to do; nil for any other error. A full store is said in
// one log line a minute, not once per publish.
func (b *Bus) limitError(subject string, err error) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return nil
	}
	ext := strings.HasPrefix(subject, ExtInRoot+".")
	switch {
	case apiErr.ErrorCode == 10054 && ext:
		return Permanent(fmt.Errorf("%w: an outside event is at most %d bytes (%s): %v", ErrTooLarge, ExtMaxEventSize, subject, err))
	case apiErr.ErrorCode != 10077:
		return nil
	case strings.Contains(apiErr.Description, "per subject") && ext:
		return Permanent(fmt.Errorf("%w: %s holds as many outside events as VERA_EXT keeps per run and identity (its max_msgs_per_subject); this one was not stored: %v",
			ErrExtBudget, subject, err))
	case strings.Contains(apiErr.Description, "maximum bytes") || strings.Contains(apiErr.Description, "maximum messages"):
		stream := StreamName
		switch {
		case ext:
			stream = ExtStream
		case strings.HasPrefix(subject, DeadLetterSubject+"."):
			stream = DeadLetterStream
		case strings.HasPrefix(subject, "$O."):
			stream = "OBJ_" + BlobBucket
		}
		full := fmt.Errorf("%w: stream %s holds what its limit allows (%s); %s was not stored, and nothing stored is lost. Make room or raise the limit (vera up --max-store, or the stream's max_bytes)",
			ErrStoreFull, stream, apiErr.Description, subject)
		if last := b.fullLogged.Load(); last == 0 || time.Since(time.Unix(0, last)) >= storeFullLogEvery {
			b.fullLogged.Store(time.Now().UnixNano())
			b.log.Error("store full: "+full.Error(), "stream", stream)
		}
		return full
	}
	return nil
}

// limitBlobs gives the object store's stream its size limit
// (Limits.Blobs), never below what it holds.
func (b *Bus) limitBlobs(ctx context.Context) error {
	want := b.opts.Limits.Blobs
	if want <= 0 {
		return nil
	}
	return b.retryAPI(ctx, "limit the object store "+BlobBucket, func(actx context.Context) error {
		s, err := b.js.Stream(actx, "OBJ_"+BlobBucket)
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		want := max(want, int64(info.State.Bytes))
		if info.Config.MaxBytes == want {
			return nil
		}
		cfg := info.Config
		cfg.MaxBytes = want
		_, err = b.js.UpdateStream(actx, cfg)
		return err
	})
}
