// Package componenttest is the conformance suite every VERA component
// passes (component.Component), run on a real NATS server with
// authentication on, the component connected as its own identity.
//
// A component is added to the suite with one Subject: how to build it on
// a connection, how to make it react in a run, and how to tell that it
// has. Run then checks, each as a subtest:
//
//   - bad-envelope: a message on a consumed subject that is not a
//     CloudEvent reaches the dead-letter stream with a reason;
//   - undecodable-data: a well-formed event of a consumed type whose data
//     does not decode is dead-lettered with a reason, never dropped;
//   - schema: data that breaks the type's JSON Schema (Subject.BadData) is
//     dead-lettered with a reason naming the rule;
//   - unknown-types: events of types the catalogue does not know are
//     ignored (no dead letter) and the component goes on;
//   - reacts-once: the component reacts to Subject.Trigger; deleting its
//     durable consumers and starting it again (every event redelivered, as
//     in a replay) stores no second reaction and changes nothing it wrote;
//   - drain: cancelling its context makes Run return nil promptly, leaking
//     no goroutine;
//   - restart: events published while it is down are handled when a new
//     instance starts, from its durable consumer.
package componenttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
)

// Subject is one component under test.
type Subject struct {
	// New builds the component on b, a connection as its identity. The
	// returned cleanup (may be nil) runs after the component stopped: it
	// closes what New opened (model clients, Docker clients).
	New func(t testing.TB, b *bus.Bus) (c component.Component, cleanup func())
	// Trigger publishes on pub (admin) the events that make the component
	// react in run runID.
	Trigger func(t testing.TB, pub *bus.Bus, runID string)
	// Reacted reports whether the component has finished reacting to the
	// trigger of runID.
	Reacted func(t testing.TB, r *bus.Bus, runID string) bool
	// Snapshot, optional, returns a digest of what the component wrote
	// for runID outside the bus (the projector's files); it must not
	// change when events are delivered again.
	Snapshot func(t testing.TB, runID string) string
	// BadType is a type the component consumes, used for the envelope and
	// data cases.
	BadType string
	// BadData are data of BadType (or of another consumed type: Type set)
	// that decode but break the schema.
	BadData []BadData
	// Timeout bounds each wait; default 60s.
	Timeout time.Duration
}

// BadData is one schema violation.
type BadData struct {
	Type string // default Subject.BadType
	Data string
	Want string // a part of the dead letter's reason
}

var runs atomic.Int64

func newRunID(prefix string) string {
	return fmt.Sprintf("conf-%s-%d-%d", prefix, time.Now().UnixNano()%1e6, runs.Add(1))
}

// env is a secure server with an admin connection.
type env struct {
	t     *testing.T
	root  *testing.T // the suite's test: instances outlive subtests
	url   string
	store auth.Store
	admin *bus.Bus
	s     Subject
}

// connect opens a connection as identity name.
func (e *env) connect(name string) *bus.Bus {
	return bustest.ConnectAs(e.root, e.url, e.store, name, bus.Options{ReadOnly: true})
}

// instance is a running component.
type instance struct {
	c       component.Component
	stop    context.CancelFunc
	done    chan error
	cleanup func()
}

func (e *env) start(b *bus.Bus) *instance {
	e.t.Helper()
	c, cleanup := e.s.New(e.root, b)
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{c: c, stop: cancel, done: make(chan error, 1), cleanup: cleanup}
	go func() { in.done <- c.Run(ctx) }()
	e.root.Cleanup(func() { in.halt(e.root) })
	return in
}

// halt cancels the component and waits for Run; it returns Run's error.
func (in *instance) halt(t testing.TB) error {
	if in.stop == nil {
		return nil
	}
	in.stop()
	in.stop = nil
	var err error
	select {
	case err = <-in.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s: Run did not return within 30s of its context's end", in.c.Name())
	}
	if in.cleanup != nil {
		in.cleanup()
	}
	return err
}

func (e *env) timeout() time.Duration {
	if e.s.Timeout > 0 {
		return e.s.Timeout
	}
	return 60 * time.Second
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(e.timeout())
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", e.timeout(), what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// publishRaw stores data on run runID's subject of type typ, as admin.
func (e *env) publishRaw(runID, typ string, data []byte, msgID string) {
	e.t.Helper()
	subj := bus.SubjectRoot + "." + runID + "." + strings.TrimPrefix(typ, "vera.")
	if _, err := e.admin.PublishRaw(context.Background(), subj, msgID, data); err != nil {
		e.t.Fatalf("publish %s: %v", subj, err)
	}
}

// envelope is a valid CloudEvent of type typ in runID whose data is the
// raw JSON data.
func envelope(runID, typ, data string) []byte {
	id := bus.NewULIDSource(nil).NewID(time.Now())
	ev := map[string]any{"specversion": "1.0", "id": id, "source": "conformance", "type": typ, "subject": runID,
		"runid": runID, "time": time.Now().UTC().Format(time.RFC3339Nano), "datacontenttype": "application/json", "data": json.RawMessage(data)}
	raw, _ := json.Marshal(ev)
	return raw
}

// deadLetters returns the dead letters of run runID from the component's
// consumers (durable names of its convention): the last one stored per
// consumer, read with direct gets (no consumer is created).
func (e *env) deadLetters(name, runID string) []bus.DeadLetter {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.admin.JetStream().Stream(ctx, bus.DeadLetterStream)
	if err != nil {
		e.t.Fatalf("dead letters: %v", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(bus.DeadLetterSubject+".*."+runID))
	if err != nil {
		e.t.Fatalf("dead letters: %v", err)
	}
	prefix := component.Durable(name, "")
	var out []bus.DeadLetter
	for subj := range info.State.Subjects {
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			e.t.Fatalf("dead letter %s: %v", subj, err)
		}
		var dl bus.DeadLetter
		if err := json.Unmarshal(m.Data, &dl); err != nil {
			e.t.Fatalf("dead letter: %v", err)
		}
		if dl.Consumer == prefix || strings.HasPrefix(dl.Consumer, prefix+"-") {
			out = append(out, dl)
		}
	}
	return out
}

// produced returns the events of runID stamped by the component.
func (e *env) produced(name, runID string) []bus.Event {
	e.t.Helper()
	evs, err := e.admin.ReadRun(context.Background(), runID)
	if err != nil {
		e.t.Fatalf("read run %s: %v", runID, err)
	}
	var out []bus.Event
	for _, ev := range evs {
		if ev.Source == name {
			out = append(out, ev)
		}
	}
	return out
}

// drained waits until every consumer of the component has nothing
// pending.
func (e *env) drained(name string) {
	e.t.Helper()
	e.waitFor(name+"'s consumers to drain", func() bool {
		for _, d := range e.durables(name) {
			ok, err := e.admin.ConsumerDrained(context.Background(), d)
			if err != nil || !ok {
				return false
			}
		}
		return true
	})
}

// durables lists the component's durable consumers on the stream.
func (e *env) durables(name string) []string {
	e.t.Helper()
	ctx := context.Background()
	st, err := e.admin.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		e.t.Fatal(err)
	}
	prefix := component.Durable(name, "")
	var out []string
	names := st.ConsumerNames(ctx)
	for n := range names.Name() {
		if n == prefix || strings.HasPrefix(n, prefix+"-") {
			out = append(out, n)
		}
	}
	if err := names.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// Run runs the suite against s.
func Run(t *testing.T, s Subject) {
	srv, store := bustest.StartSecureServer(t)
	e := &env{t: t, root: t, url: srv.ClientURL(), store: store, s: s}
	e.admin = bustest.ConnectAs(t, e.url, store, auth.Admin, bus.Options{Source: "conformance"})

	// The component names itself: build it once (not run) to learn its
	// name, which is the identity it then connects as.
	probe, cleanup := s.New(t, e.admin)
	name := probe.Name()
	if cleanup != nil {
		cleanup()
	}
	if !slices.Contains(catalog.Components(), name) {
		t.Fatalf("Name() = %q is not a catalogue component %v", name, catalog.Components())
	}
	if got, want := probe.Consumes(), catalog.ConsumedBy(name); !slices.Equal(got, want) {
		t.Errorf("Consumes() = %v, the catalogue says %v", got, want)
	}
	if got, want := probe.Produces(), catalog.ProducedBy(name); !slices.Equal(got, want) {
		t.Errorf("Produces() = %v, the catalogue says %v", got, want)
	}
	if s.BadType != "" && !slices.Contains(probe.Consumes(), s.BadType) {
		t.Fatalf("BadType %s is not a type %s consumes", s.BadType, name)
	}

	in := e.start(e.connect(name))

	t.Run("reacts-once", func(t *testing.T) {
		e := e.with(t)
		run := newRunID("once")
		s.Trigger(t, e.admin, run)
		e.waitFor(name+" to react in "+run, func() bool { return s.Reacted(t, e.admin, run) })
		e.drained(name)
		before := ids(e.produced(name, run))
		var snap string
		if s.Snapshot != nil {
			snap = s.Snapshot(t, run)
		}
		// Every event again: delete the durables and start anew, as a
		// replay of the stream into a fresh deployment would.
		if err := in.halt(t); err != nil {
			t.Fatalf("Run = %v after cancel", err)
		}
		for _, d := range e.durables(name) {
			if err := e.admin.JetStream().DeleteConsumer(context.Background(), bus.StreamName, d); err != nil {
				t.Fatalf("delete consumer %s: %v", d, err)
			}
		}
		in = e.start(e.connect(name))
		e.waitFor(name+" to consume again", func() bool { return len(e.durables(name)) > 0 })
		e.drained(name)
		if after := ids(e.produced(name, run)); !slices.Equal(before, after) {
			t.Errorf("redelivery stored a second reaction: %d events before, %d after\nbefore %v\nafter  %v", len(before), len(after), before, after)
		}
		if s.Snapshot != nil {
			if now := s.Snapshot(t, run); now != snap {
				t.Errorf("redelivery changed what %s wrote for the run", name)
			}
		}
	})

	if s.BadType != "" {
		t.Run("bad-envelope", func(t *testing.T) {
			e := e.with(t)
			run := newRunID("env")
			e.publishRaw(run, s.BadType, []byte("this is not a CloudEvent"), "")
			e.wantDeadLetter(name, run, "")
		})
		t.Run("undecodable-data", func(t *testing.T) {
			e := e.with(t)
			run := newRunID("data")
			e.publishRaw(run, s.BadType, envelope(run, s.BadType, `[1,2,3]`), "")
			e.wantDeadLetter(name, run, s.BadType)
		})
	}
	for i, bd := range s.BadData {
		t.Run(fmt.Sprintf("schema-%d", i+1), func(t *testing.T) {
			e := e.with(t)
			typ := bd.Type
			if typ == "" {
				typ = s.BadType
			}
			run := newRunID("schema")
			e.publishRaw(run, typ, envelope(run, typ, bd.Data), "")
			e.wantDeadLetter(name, run, bd.Want)
		})
	}

	t.Run("unknown-types", func(t *testing.T) {
		e := e.with(t)
		run := newRunID("unknown")
		// A type the catalogue does not know (a newer VERA's), and an
		// outside tool's extension event.
		e.publishRaw(run, "vera.future.thing", envelope(run, "vera.future.thing", `{"x":1}`), "")
		e.publishRaw(run, "vera.ext.tool.note", envelope(run, "vera.ext.tool.note", `{"x":1}`), "")
		s.Trigger(t, e.admin, run)
		e.waitFor(name+" to react after unknown types", func() bool { return s.Reacted(t, e.admin, run) })
		e.drained(name)
		if dls := e.deadLetters(name, run); len(dls) > 0 {
			t.Errorf("unknown types were dead-lettered: %+v", dls[0])
		}
	})

	t.Run("drain", func(t *testing.T) {
		e := e.with(t)
		if err := in.halt(t); err != nil {
			t.Fatalf("Run = %v after cancel, want nil", err)
		}
		b := e.connect(name)
		before := goroutines()
		in2 := e.start(b)
		run := newRunID("drain")
		s.Trigger(t, e.admin, run)
		e.waitFor(name+" to react", func() bool { return s.Reacted(t, e.admin, run) })
		start := time.Now()
		if err := in2.halt(t); err != nil {
			t.Fatalf("Run = %v after cancel, want nil", err)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("Run took %s to return after cancel", d)
		}
		// The server runs in this process: its goroutines (the deleted
		// consumers' among them) are not the component's.
		var leaked []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			leaked = leaked[:0]
			for id, stack := range goroutines() {
				if _, old := before[id]; !old && !strings.Contains(stack, "nats-server/v2/server") {
					leaked = append(leaked, stack)
				}
			}
			if len(leaked) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, g := range leaked {
			t.Errorf("goroutine left after Run returned:\n%s", g)
		}
	})

	t.Run("restart", func(t *testing.T) {
		e := e.with(t)
		run := newRunID("restart")
		// Down: the trigger waits on the stream.
		s.Trigger(t, e.admin, run)
		time.Sleep(200 * time.Millisecond)
		if s.Reacted(t, e.admin, run) {
			t.Fatal("reacted while no instance was running")
		}
		in = e.start(e.connect(name))
		e.waitFor(name+" to react after a restart", func() bool { return s.Reacted(t, e.admin, run) })
	})
}

func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// wantDeadLetter waits for a dead letter of run from the component whose
// reason contains want.
func (e *env) wantDeadLetter(name, run, want string) {
	e.t.Helper()
	var got []bus.DeadLetter
	e.waitFor("a dead letter of "+run+" from "+name, func() bool {
		got = e.deadLetters(name, run)
		return len(got) > 0
	})
	for _, dl := range got {
		if dl.Reason == "" {
			e.t.Errorf("dead letter without a reason: %+v", dl)
		}
		if !strings.Contains(dl.Reason, want) {
			e.t.Errorf("dead letter reason %q does not mention %q", dl.Reason, want)
		}
	}
}

// goroutines returns every goroutine's stack by its id, but this one's.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // the caller
		}
		head, _, _ := strings.Cut(g, " [")
		out[head] = g
	}
	return out
}

func ids(evs []bus.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	slices.Sort(out)
	return out
}

// DigestFiles is a Snapshot helper: the digest of the named files' bytes
// (a missing file counts as empty).
func DigestFiles(read func(name string) ([]byte, error), names ...string) string {
	h := sha256.New()
	for _, n := range names {
		b, _ := read(n)
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}
