package bus_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// reusedID is an event id an outside tool uses in every run it starts:
// CloudEvents ids are unique per source, not across runs.
const reusedID = "01JDEMO0000000000000000042"

func submitted(t *testing.T, b *bus.Bus, run, id string) bus.Event {
	t.Helper()
	ev, err := b.Events.NewRaw(run, "vera.task.submitted", []byte(`{"task":"run `+run+`"}`), bus.WithID(id))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func countRun(t *testing.T, b *bus.Bus, run string) int {
	t.Helper()
	evs, err := b.ReadRun(ctxT(t), run)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestSameIDInTwoRunsIsStoredInBoth: deduplication is per run. A second
// run whose vera.task.submitted reuses another run's id is stored (and so
// starts), through every way the bus publishes; the same event twice to
// the same run is still stored once.
func TestSameIDInTwoRunsIsStoredInBoth(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)

	// Publish.
	a, err := b.Publish(ctx, submitted(t, b, "dup-a", reusedID))
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Publish(ctx, submitted(t, b, "dup-b", reusedID))
	if err != nil {
		t.Fatal(err)
	}
	if a.Duplicate || c.Duplicate || a.Sequence == c.Sequence {
		t.Fatalf("second run's task dropped as a duplicate of the first's: %+v %+v", a, c)
	}
	if again, err := b.Publish(ctx, submitted(t, b, "dup-b", reusedID)); err != nil || !again.Duplicate || again.Sequence != c.Sequence {
		t.Fatalf("the same event twice in one run: %+v %v, want a duplicate of %d", again, err, c.Sequence)
	}

	// A fenced publish, and its retry after it landed.
	fenced := submitted(t, b, "dup-c", reusedID)
	f1, err := b.Publish(ctx, fenced, bus.ExpectLastSequence("vera.run.dup-c.>", 0))
	if err != nil || f1.Duplicate {
		t.Fatalf("fenced publish of a reused id in a new run: %+v %v", f1, err)
	}
	if f2, err := b.Publish(ctx, fenced, bus.ExpectLastSequence("vera.run.dup-c.>", 0)); err != nil || !f2.Duplicate || f2.Sequence != f1.Sequence {
		t.Fatalf("retry of a fenced publish: %+v %v", f2, err)
	}

	// PublishBatch.
	batch := []bus.Event{submitted(t, b, "dup-d", reusedID), submitted(t, b, "dup-e", reusedID)}
	acks, err := b.PublishBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if acks[0].Duplicate || acks[1].Duplicate {
		t.Fatalf("batch: %+v", acks)
	}
	acks, err = b.PublishBatch(ctx, batch)
	if err != nil || !acks[0].Duplicate || !acks[1].Duplicate {
		t.Fatalf("batch again: %+v %v", acks, err)
	}

	// PublishRaw: the message id is scoped to the subject's run too.
	for _, run := range []string{"dup-f", "dup-g"} {
		ack, err := b.PublishRaw(ctx, "vera.run."+run+".ext.raw", "fixed-id", []byte("not an envelope"))
		if err != nil || ack.Duplicate {
			t.Fatalf("raw publish to %s: %+v %v", run, ack, err)
		}
	}
	if ack, err := b.PublishRaw(ctx, "vera.run.dup-g.ext.raw", "fixed-id", []byte("not an envelope")); err != nil || !ack.Duplicate {
		t.Fatalf("raw publish twice: %+v %v", ack, err)
	}

	for run, want := range map[string]int{"dup-a": 1, "dup-b": 1, "dup-c": 1, "dup-d": 1, "dup-e": 1} {
		if n := countRun(t, b, run); n != want {
			t.Errorf("run %s holds %d events, want %d", run, n, want)
		}
	}
	for _, run := range []string{"dup-f", "dup-g"} {
		n := 0
		for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: run}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			_ = rec
		}
		if n != 1 {
			t.Errorf("run %s holds %d raw messages, want 1", run, n)
		}
	}
}

// TestImportSameIDInTwoRuns: an import file with two runs' events under one
// id stores both (inside the dedup window, where the server would have
// dropped the second as a duplicate while the import counted it as
// imported); the same line twice is stored once.
func TestImportSameIDInTwoRuns(t *testing.T) {
	_, b := bustest.New(t)
	var file bytes.Buffer
	for _, run := range []string{"imp-a", "imp-b", "imp-a"} {
		ev := submitted(t, b, run, reusedID)
		raw, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		file.Write(raw)
		file.WriteByte('\n')
	}
	st, err := b.Import(ctxT(t), bytes.NewReader(file.Bytes()), bus.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Imported != 2 || st.Existing != 1 || len(st.Bad) != 0 {
		t.Fatalf("import stats %+v, want 2 imported and 1 existing", st)
	}
	for _, run := range []string{"imp-a", "imp-b"} {
		if n := countRun(t, b, run); n != 1 {
			t.Errorf("run %s holds %d events after the import, want 1", run, n)
		}
	}
	// Again, inside the dedup window: nothing new.
	st, err = b.Import(ctxT(t), bytes.NewReader(file.Bytes()), bus.ImportOptions{})
	if err != nil || st.Imported != 0 || st.Existing != 3 {
		t.Fatalf("second import %+v %v", st, err)
	}
}

// TestMsgIDIsRunScoped pins the form of the Nats-Msg-Id, which outside
// tools publishing directly can copy to get the same deduplication.
func TestMsgIDIsRunScoped(t *testing.T) {
	if got := bus.MsgID("r42", reusedID); got != "r42/"+reusedID {
		t.Errorf("MsgID = %q", got)
	}
	if bus.MsgID("a", reusedID) == bus.MsgID("b", reusedID) {
		t.Error("two runs share a message id")
	}
	// Ids that are no safe header value are hashed, so a crafted id cannot
	// add header lines; the hashed form cannot be written as a plain id.
	for _, id := range []string{"with space", "line\r\nNats-Expected-Last-Sequence: 1", strings.Repeat("x", 300), "é"} {
		got := bus.MsgID("r42", id)
		if !strings.HasPrefix(got, "r42#") || strings.ContainsAny(got, " \r\n") || len(got) != len("r42#")+64 {
			t.Errorf("MsgID(%q) = %q", id, got)
		}
	}
}
