package bus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// ErrPermissionDenied: the server refused to let this connection's
// identity publish on a subject (an event type it does not produce, or a
// JetStream API it may not use). Such a publish is never retried.
var ErrPermissionDenied = errors.New("permission denied by the NATS server")

// denials turns the server's asynchronous "Permissions Violation for
// Publish to SUBJECT" into a prompt error for the operation waiting on
// that subject, which would otherwise wait for its timeout: the server
// answers a refused publish with an error on the connection, never with
// a reply.
type denials struct {
	mu      sync.Mutex
	next    int
	waiters map[int]denialWaiter
}

type denialWaiter struct {
	prefix string // a subject, or a prefix ending in "."
	cancel context.CancelCauseFunc
}

var denialRE = regexp.MustCompile(`(?i)publish to "([^"]+)"`)

// observe is called with the connection's async errors; it reports
// whether err was a refused publish.
func (d *denials) observe(err error) bool {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	m := denialRE.FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	subject := m[1]
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.waiters {
		if subject == w.prefix || (strings.HasSuffix(w.prefix, ".") && strings.HasPrefix(subject, w.prefix)) {
			w.cancel(fmt.Errorf("%w: publish to %q", ErrPermissionDenied, subject))
		}
	}
	return true
}

// watch returns a context that is cancelled, with a cause wrapping
// ErrPermissionDenied, when the server refuses a publish to subject (or
// to a subject under prefix, when it ends in "."). Call stop when done.
func (d *denials) watch(ctx context.Context, subject string) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	d.mu.Lock()
	if d.waiters == nil {
		d.waiters = make(map[int]denialWaiter)
	}
	d.next++
	id := d.next
	d.waiters[id] = denialWaiter{prefix: subject, cancel: cancel}
	d.mu.Unlock()
	return wctx, func() {
		d.mu.Lock()
		delete(d.waiters, id)
		d.mu.Unlock()
		cancel(nil)
	}
}

// deniedCause returns the permission error that ended ctx, or nil.
func deniedCause(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil && errors.Is(c, ErrPermissionDenied) {
		return c
	}
	return nil
}
