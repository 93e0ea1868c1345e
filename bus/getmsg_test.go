package bus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// silentThenAnswering leaves its first `silent` requests unanswered (they
// end with their context, as a request no server answers does) and
// answers the next.
type silentThenAnswering struct {
	silent, calls int
}

func (s *silentThenAnswering) GetMsg(ctx context.Context, seq uint64, _ ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	s.calls++
	if s.calls <= s.silent {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &jetstream.RawStreamMsg{Sequence: seq}, nil
}

// TestGetMsgAsksAgainWhenUnanswered: a message get nobody answers (a
// cluster electing its stream leader, a request lost with a route) is
// asked again after its own timeout instead of hanging the read until the
// caller's context ends; a context that ends stops it.
func TestGetMsgAsksAgainWhenUnanswered(t *testing.T) {
	b := &Bus{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &silentThenAnswering{silent: 2}
	start := time.Now()
	m, err := b.getMsg(ctx, s, 7, "vera.run.x.>")
	if err != nil || m.Sequence != 7 || s.calls != 3 {
		t.Fatalf("getMsg = %v, %v after %d calls", m, err, s.calls)
	}
	if took := time.Since(start); took < 2*msgGetAttempt || took > 2*msgGetAttempt+5*time.Second {
		t.Fatalf("two unanswered attempts then an answer took %s, want about %s", took, 2*msgGetAttempt)
	}

	short, cancelShort := context.WithTimeout(context.Background(), msgGetAttempt/2)
	defer cancelShort()
	never := &silentThenAnswering{silent: 1 << 30}
	if _, err := b.getMsg(short, never, 1, "vera.run.x.>"); !errors.Is(err, context.DeadlineExceeded) || never.calls != 1 {
		t.Fatalf("a get whose context ends: %v after %d calls", err, never.calls)
	}
}
