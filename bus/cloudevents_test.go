package bus_test

// The CloudEvents Go SDK as an outside client of VERA's stream, in both
// directions and both modes of the CloudEvents NATS protocol binding.
//
// The SDK's nats_jetstream/v2 protocol works on VERA's existing stream: its
// NewSenderFromConn and NewConsumerFromConn look the stream up by name
// (StreamInfo "VERA", which the ext identity may do) and create one only
// when it is missing, so they never touch VERA's; the sender publishes on
// the one subject it is given, and the consumer subscribes through the
// legacy JetStreamContext with the options we pass (BindStream to VERA, an
// ordered ephemeral consumer, which the ext identity may create). The
// connections are plain nats.go connections with the ext identity's nkey,
// which may publish only vera.extin.*.ext (and read). Production code does
// not import the SDK; only this test does.

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	cenats "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

const ceRun = "01JNZ8P2W7C5D9E3F6G8H1J2K3"

// extConn connects to url as the ext identity with plain nats.go, as an
// outside tool would.
func extConn(t *testing.T, url string, store auth.Store) *nats.Conn {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(store.Path(auth.Ext))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, opt, nats.Name("acme-sdk"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// sdkSender returns an SDK client that publishes on subject, of stream.
func sdkSender(t *testing.T, nc *nats.Conn, stream, subject string) cloudevents.Client {
	t.Helper()
	sender, err := cenats.NewSenderFromConn(nc, stream, subject, nil)
	if err != nil {
		t.Fatalf("SDK sender on stream %s: %v", stream, err)
	}
	c, err := cloudevents.NewClient(sender)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type sentEvent struct {
	id, source, data string
	base64           []byte // non-JSON data
	runid            bool   // the event carries runid itself
	structured       bool
}

var sdkEvents = []sentEvent{
	{id: "scan-binary", source: "acme/scanner", data: `{"hosts":3,"open":[22,443]}`},
	{id: "scan-structured", source: "acme/scanner", data: `{"hosts":4}`, runid: true, structured: true},
	{id: "scan-text", source: "acme/scanner", base64: []byte("3 hosts\n")},
}

// sendSDKEvents publishes sdkEvents with the SDK on vera.extin.<ceRun>.ext,
// as the ext identity publishes its outside events (VERA_EXT, sourced
// into VERA as vera.run.<ceRun>.ext.ext), and waits until VERA holds them.
func sendSDKEvents(t *testing.T, url string, store auth.Store) {
	t.Helper()
	nc := extConn(t, url, store)
	c := sdkSender(t, nc, bus.ExtStream, bus.ExtInRoot+"."+ceRun+"."+auth.Ext)
	for i, s := range sdkEvents {
		ev := cloudevents.NewEvent()
		ev.SetID(s.id)
		ev.SetSource(s.source)
		ev.SetType("vera.ext.acme.scanned")
		ev.SetTime(time.Date(2026, 11, 21, 12, 0, i, 0, time.UTC))
		if s.runid {
			ev.SetExtension("runid", ceRun)
			ev.SetSubject(ceRun)
		}
		var err error
		if s.base64 != nil {
			err = ev.SetData("text/plain", s.base64)
		} else {
			err = ev.SetData(cloudevents.ApplicationJSON, json.RawMessage(s.data))
		}
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if s.structured {
			ctx = cloudevents.WithEncodingStructured(ctx)
		}
		if res := c.Send(ctx, ev); cloudevents.IsUndelivered(res) {
			t.Fatalf("SDK send %s: %v", s.id, res)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := js.Stream(context.Background(), bus.StreamName)
		if err == nil {
			if info, err := st.Info(context.Background()); err == nil && info.State.Msgs >= uint64(len(sdkEvents)) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("VERA did not store the %d outside events", len(sdkEvents))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkSDKEvents checks that evs are sdkEvents read as ordinary events.
func checkSDKEvents(t *testing.T, where string, evs []bus.Event) {
	t.Helper()
	if len(evs) != len(sdkEvents) {
		t.Fatalf("%s: %d events, want %d: %+v", where, len(evs), len(sdkEvents), evs)
	}
	for i, s := range sdkEvents {
		ev := evs[i]
		if ev.ID != s.id || ev.Source != s.source || ev.Type != "vera.ext.acme.scanned" || ev.RunID != ceRun || ev.Subject != ceRun || ev.SpecVersion != "1.0" {
			t.Errorf("%s: event %d is %+v, want id %s source %s run %s", where, i, ev, s.id, s.source, ceRun)
		}
		if !ev.Time.Equal(time.Date(2026, 11, 21, 12, 0, i, 0, time.UTC)) {
			t.Errorf("%s: %s time %v", where, s.id, ev.Time)
		}
		if s.base64 != nil {
			if !bytes.Equal(ev.DataBase64, s.base64) || ev.Data != nil || ev.DataContentType != "text/plain" {
				t.Errorf("%s: %s data %q data_base64 %q (%s), want data_base64 %q", where, s.id, ev.Data, ev.DataBase64, ev.DataContentType, s.base64)
			}
		} else if string(ev.Data) != s.data || ev.DataContentType != cloudevents.ApplicationJSON {
			t.Errorf("%s: %s data %s (%s), want %s", where, s.id, ev.Data, ev.DataContentType, s.data)
		}
		if err := ev.Validate(); err != nil {
			t.Errorf("%s: %s: %v", where, s.id, err)
		}
	}
}

func TestCloudEventsSDKPublishesToVERA(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	sendSDKEvents(t, s.ClientURL(), store)
	ctx := ctxT(t)

	// What the SDK stored: binary mode as ce- headers and the data alone,
	// structured mode as the whole event in the body.
	st, err := admin.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if first.Header.Get("ce-id") != "scan-binary" || first.Header.Get("ce-specversion") != "1.0" || string(first.Data) != sdkEvents[0].data {
		t.Fatalf("the SDK's binary-mode message: header %v data %s", first.Header, first.Data)
	}

	// Read, by an ordered consumer and by direct gets (with FromSeq).
	for _, opts := range []bus.ReadOptions{{RunID: ceRun}, {RunID: ceRun, Direct: true}, {RunID: ceRun, FromSeq: 1}} {
		var evs []bus.Event
		for rec, err := range admin.Read(ctx, opts) {
			if err != nil {
				t.Fatal(err)
			}
			if rec.Err != nil {
				t.Fatalf("read %+v: sequence %d malformed: %v", opts, rec.Sequence, rec.Err)
			}
			env, err := rec.Envelope()
			if err != nil {
				t.Fatal(err)
			}
			back, err := bus.ParseEvent(env)
			if err != nil || back.ID != rec.Event.ID {
				t.Fatalf("read %+v: envelope of %s: %s: %v", opts, rec.Event.ID, env, err)
			}
			evs = append(evs, rec.Event)
		}
		checkSDKEvents(t, "Read", evs)
		if !evs[0].Binary() || evs[1].Binary() || !evs[2].Binary() {
			t.Errorf("Binary() = %v %v %v, want true false true", evs[0].Binary(), evs[1].Binary(), evs[2].Binary())
		}
	}

	// A durable consumer.
	cctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var consumed []bus.Event
	done := make(chan error, 1)
	go func() {
		done <- admin.Consume(cctx, bus.ConsumerConfig{Durable: "ce-test", RunID: ceRun, Types: []string{"vera.ext.>"}}, func(_ context.Context, m *bus.Message) error {
			env, err := m.Envelope()
			if err != nil {
				return err
			}
			if _, err := bus.ParseEvent(env); err != nil {
				t.Errorf("consumed %s: envelope %s: %v", m.Event.ID, env, err)
			}
			mu.Lock()
			defer mu.Unlock()
			consumed = append(consumed, m.Event)
			if len(consumed) == len(sdkEvents) {
				cancel()
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("consumer did not get the SDK's events")
	}
	checkSDKEvents(t, "Consume", consumed)
	if n := countDeadLetters(t, admin); n != 0 {
		t.Fatalf("%d dead letters", n)
	}

	// Export writes every event as a structured envelope line; imported
	// elsewhere, they are ordinary structured events.
	var file bytes.Buffer
	stats, err := admin.Export(ctx, &file, bus.ExportOptions{RunID: ceRun})
	if err != nil || stats.Events != len(sdkEvents) || stats.Malformed != 0 {
		t.Fatalf("export: %+v, %v", stats, err)
	}
	for i, line := range strings.Split(strings.TrimSpace(file.String()), "\n") {
		ev, err := bus.ParseEvent([]byte(line))
		if err != nil || ev.Type == bus.RawType || ev.ID != sdkEvents[i].id || ev.RunID != ceRun {
			t.Fatalf("export line %d %s: %+v, %v", i+1, line, ev, err)
		}
	}
	_, other := bustest.New(t)
	ist, err := other.Import(ctx, bytes.NewReader(file.Bytes()), bus.ImportOptions{})
	if err != nil || ist.Imported != len(sdkEvents) || len(ist.Bad) != 0 {
		t.Fatalf("import: %+v, %v", ist, err)
	}
	var imported []bus.Event
	for rec, err := range other.Read(ctx, bus.ReadOptions{RunID: ceRun}) {
		if err != nil || rec.Err != nil {
			t.Fatalf("read imported: %v %v", err, rec.Err)
		}
		if rec.Event.Binary() {
			t.Errorf("imported %s is still binary", rec.Event.ID)
		}
		imported = append(imported, rec.Event)
	}
	checkSDKEvents(t, "export→import", imported)
	var again bytes.Buffer
	if _, err := other.Export(ctx, &again, bus.ExportOptions{RunID: ceRun}); err != nil || again.String() != file.String() {
		t.Fatalf("export of the import differs (%v):\n%s\nwant\n%s", err, again.String(), file.String())
	}
}

// countDeadLetters counts the messages on the dead-letter stream.
func countDeadLetters(t *testing.T, b *bus.Bus) uint64 {
	t.Helper()
	st, err := b.JetStream().Stream(ctxT(t), bus.DeadLetterStream)
	if err != nil {
		return 0
	}
	info, err := st.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestCloudEventsSDKReadsVERAEvents(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t)
	agent := bustest.ConnectAs(t, s.ClientURL(), store, catalog.ComponentAgent, bus.Options{})
	var sent []bus.Event
	for i, text := range []string{"first note", "second note"} {
		ev, err := agent.Events.New(ceRun, catalog.NotesAppended{Step: i + 1, Author: "agent", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := agent.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, ev)
	}

	// Every message VERA publishes as an event is marked as structured mode.
	st, err := admin.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(bus.HeaderContentType); got != bus.ContentTypeCloudEvents {
		t.Fatalf("stored %s: Content-Type %q, want %q (headers %v)", m.Subject, got, bus.ContentTypeCloudEvents, m.Header)
	}

	// The SDK's JetStream consumer, bound to VERA's stream, as the ext
	// identity: an ordered ephemeral consumer from the stream's start.
	nc := extConn(t, s.ClientURL(), store)
	consumer, err := cenats.NewConsumerFromConn(nc, bus.StreamName, "vera.run."+ceRun+".>", nil,
		[]nats.SubOpt{nats.BindStream(bus.StreamName), nats.OrderedConsumer(), nats.DeliverAll()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = consumer.OpenInbound(rctx) }()
	var got []cloudevents.Event
	for len(got) < len(sent) {
		msg, err := consumer.Receive(rctx)
		if err != nil {
			t.Fatalf("SDK receive: %v", err)
		}
		if enc := msg.ReadEncoding(); enc != binding.EncodingStructured {
			t.Fatalf("the SDK reads VERA's message as %v, want structured", enc)
		}
		ev, err := binding.ToEvent(rctx, msg)
		if err != nil {
			t.Fatalf("SDK ToEvent: %v", err)
		}
		got = append(got, *ev)
	}
	for i, ev := range got {
		want := sent[i]
		if err := ev.Validate(); err != nil {
			t.Errorf("SDK validation of %s: %v", ev.ID(), err)
		}
		if ev.ID() != want.ID || ev.Type() != catalog.TypeNotesAppended || ev.Source() != catalog.ComponentAgent || ev.Subject() != ceRun {
			t.Errorf("SDK event %d: %s", i, ev)
		}
		if ds := ev.DataSchema(); ds != "https://vera.dev/schemas/vera.notes.appended.json" || ds != catalog.SchemaID(catalog.TypeNotesAppended) {
			t.Errorf("SDK event %d dataschema %q", i, ds)
		}
		ext := ev.Extensions()
		if ext["traceparent"] != bus.Traceparent(ceRun) || ext["runid"] != ceRun {
			t.Errorf("SDK event %d extensions %v, want traceparent %s and runid %s", i, ext, bus.Traceparent(ceRun), ceRun)
		}
		var d catalog.NotesAppended
		if err := ev.DataAs(&d); err != nil || d.Text != []string{"first note", "second note"}[i] {
			t.Errorf("SDK event %d data %s: %v", i, ev.Data(), err)
		}
	}

	// The SDK's message reader over a plain message get reads the same.
	raw, err := st.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := binding.ToEvent(ctx, cenats.NewMessage(&nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}))
	if err != nil || ev.Validate() != nil || ev.ID() != sent[1].ID {
		t.Fatalf("SDK message reader: %v %v", ev, err)
	}
}

// TestMalformedBinaryModeExportKeepsHeaders: a binary-mode message that is
// not a valid event of its subject (here its ce-type names another
// subject's type) is exported in a vera.bus.raw line with its CloudEvents
// headers, so that import stores it as it was: read back it is the same
// malformed message with the same headers, two such messages that differ
// only in their headers stay two, a second import adds nothing, and
// export → import → export gives the same file.
func TestMalformedBinaryModeExportKeepsHeaders(t *testing.T) {
	_, src := bustest.New(t)
	ctx := ctxT(t)
	const subj = "vera.run.mb.ext.acme.scanned"
	for _, id := range []string{"forged-1", "forged-2"} {
		h := nats.Header{}
		for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": id, "ce-source": "acme", "ce-type": "vera.tool.finished", "ce-time": "2026-11-21T12:00:00Z"} {
			h.Set(k, v)
		}
		if _, err := src.JetStream().PublishMsg(ctx, &nats.Msg{Subject: subj, Header: h, Data: []byte(`{"exit_code":0}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ok, err := src.Events.NewRaw("mb", "vera.ext.acme.scanned", json.RawMessage(`{"hosts":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Publish(ctx, ok); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	st, err := src.Export(ctx, &file, bus.ExportOptions{RunID: "mb"})
	if err != nil || st.Malformed != 2 || st.Events != 1 {
		t.Fatalf("export: %+v, %v", st, err)
	}
	lines := strings.Split(strings.TrimSpace(file.String()), "\n")
	for _, line := range lines[:2] {
		ev, err := bus.ParseEvent([]byte(line))
		var d bus.RawData
		if err != nil || ev.Type != bus.RawType || ev.DecodeData(&d) != nil || d.Header.Get("ce-type") != "vera.tool.finished" || d.Malformed == "" {
			t.Fatalf("raw line %s: %+v %v", line, d, err)
		}
	}

	_, dst := bustest.New(t)
	for i, want := range []bus.ImportStats{{Imported: 1, Malformed: 2}, {Existing: 3}} {
		ist, err := dst.Import(ctx, bytes.NewReader(file.Bytes()), bus.ImportOptions{})
		if err != nil || ist.Imported != want.Imported || ist.Malformed != want.Malformed || ist.Existing != want.Existing || len(ist.Bad) > 0 {
			t.Fatalf("import #%d: %+v, %v (want %+v)", i+1, ist, err, want)
		}
	}
	var recs []bus.Record
	for rec, err := range dst.Read(ctx, bus.ReadOptions{RunID: "mb"}) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 3 || recs[0].Err == nil || recs[0].Header.Get("ce-id") != "forged-1" || recs[1].Header.Get("ce-id") != "forged-2" ||
		string(recs[0].Raw) != `{"exit_code":0}` || recs[2].Err != nil || recs[2].Event.ID != ok.ID {
		t.Fatalf("imported run: %+v", recs)
	}
	var again bytes.Buffer
	if _, err := dst.Export(ctx, &again, bus.ExportOptions{RunID: "mb"}); err != nil || again.String() != file.String() {
		t.Fatalf("export of the import differs (%v):\n%s\nwant\n%s", err, again.String(), file.String())
	}
}
