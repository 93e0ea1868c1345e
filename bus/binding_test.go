package bus

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// binaryHeader is what the CloudEvents Go SDK's NATS binding writes for an
// event in binary mode: every attribute as a ce-<name> header.
func binaryHeader(kv ...string) nats.Header {
	h := nats.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestParseStoredMsgBinaryReadsAsStructured(t *testing.T) {
	const subj = "vera.run.run-1.ext.acme.scanned"
	h := binaryHeader(
		"ce-specversion", "1.0", "ce-id", "scan-1", "ce-source", "acme", "ce-type", "vera.ext.acme.scanned",
		"ce-time", "2026-11-21T12:00:00.5Z", "ce-datacontenttype", "application/json",
		"ce-dataschema", "https://acme.example/scan.json", "ce-traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"ce-tracestate", "acme=1", "ce-causationid", "cause-1", "ce-other", "ignored", "Nats-Msg-Id", "x",
	)
	data := []byte(`{"hosts": 3}`)
	ev, err := ParseStoredMsg(subj, h, data)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Binary() {
		t.Error("Binary() = false for a binary-mode message")
	}
	want := Event{
		SpecVersion: "1.0", ID: "scan-1", Source: "acme", Type: "vera.ext.acme.scanned", Subject: "run-1", RunID: "run-1",
		Time: time.Date(2026, 11, 21, 12, 0, 0, 5e8, time.UTC), DataContentType: "application/json",
		DataSchema: "https://acme.example/scan.json", Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		Tracestate: "acme=1", CausationID: "cause-1", Data: data,
	}
	got := ev
	got.binary, got.runFromSubject = false, false
	if !sameEvent(got, want) {
		t.Fatalf("binary message read as\n %+v\nwant\n %+v", got, want)
	}
	// Its structured form is an ordinary envelope of the run, read back
	// (as a structured message) as the same event.
	env, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(env, []byte(`"runid":"run-1"`)) || !bytes.Contains(env, []byte(`"data":{"hosts":3}`)) {
		t.Fatalf("structured form %s", env)
	}
	back, err := ParseStoredMsg(subj, binaryHeader("Content-Type", ContentTypeCloudEvents), env)
	got.Data = []byte(`{"hosts":3}`) // the structured form is compact
	if err != nil || back.Binary() || !sameEvent(back, got) {
		t.Fatalf("structured form read back as %+v, %v", back, err)
	}
	// Envelope gives the structured form for a binary record, the stored
	// bytes otherwise.
	rec := Record{Raw: data, Event: ev}
	if e, err := rec.Envelope(); err != nil || !bytes.Equal(e, env) {
		t.Fatalf("Envelope of a binary record = %s, %v", e, err)
	}
	rec = Record{Raw: env, Event: back}
	if e, _ := rec.Envelope(); !bytes.Equal(e, env) {
		t.Fatalf("Envelope of a structured record = %s", e)
	}
}

func TestParseStoredMsgBinaryData(t *testing.T) {
	const subj = "vera.run.r.ext.acme.scanned"
	base := []string{"ce-specversion", "1.0", "ce-id", "a", "ce-source", "acme", "ce-type", "vera.ext.acme.scanned", "ce-time", "2026-11-21T12:00:00Z"}
	for _, tc := range []struct {
		name    string
		header  []string
		data    string
		json    bool
		wantErr string
	}{
		{name: "no content type is JSON", data: `{"a":1}`, json: true},
		{name: "Content-Type header", header: []string{"Content-Type", "application/json; charset=utf-8"}, data: `[1]`, json: true},
		{name: "lowercase content-type (the SDK's)", header: []string{"content-type", "application/vnd.acme+json"}, data: `"s"`, json: true},
		{name: "text is data_base64", header: []string{"ce-datacontenttype", "text/plain"}, data: "hello\n"},
		{name: "bytes are data_base64", header: []string{"content-type", "application/octet-stream"}, data: "\x00\xff"},
		{name: "no data", data: ""},
		{name: "bad JSON", data: `{"a":`, wantErr: "data is not valid JSON"},
		{name: "bad time", header: []string{"ce-time", "yesterday"}, data: `{}`, wantErr: "ce-time"},
		{name: "bad traceparent", header: []string{"ce-traceparent", "00-abc-def-01"}, data: `{}`, wantErr: "traceparent"},
		{name: "relative dataschema", header: []string{"ce-dataschema", "scan.json"}, data: `{}`, wantErr: "dataschema"},
		{name: "type of another subject", header: []string{"ce-type", "vera.tool.finished"}, data: `{}`, wantErr: "does not match subject"},
		{name: "another run", header: []string{"ce-runid", "other", "ce-subject", "other"}, data: `{}`, wantErr: "does not match subject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := binaryHeader(append(append([]string(nil), base...), tc.header...)...)
			ev, err := ParseStoredMsg(subj, h, []byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.data == "":
				if ev.Data != nil || ev.DataBase64 != nil {
					t.Fatalf("data %q, data_base64 %q for none", ev.Data, ev.DataBase64)
				}
			case tc.json:
				if string(ev.Data) != tc.data || ev.DataBase64 != nil {
					t.Fatalf("data %q, data_base64 %q, want data %s", ev.Data, ev.DataBase64, tc.data)
				}
			default:
				if string(ev.DataBase64) != tc.data || ev.Data != nil {
					t.Fatalf("data %q, data_base64 %q, want data_base64 %q", ev.Data, ev.DataBase64, tc.data)
				}
			}
			env, err := ev.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseEvent(env); err != nil {
				t.Fatalf("structured form %s: %v", env, err)
			}
		})
	}
}

func TestParseStoredMsgModes(t *testing.T) {
	f := fixedFactory()
	ev, err := f.New("run-1", demo{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := ev.Marshal()
	subj, _ := ev.NATSSubject()
	// Headers any case; a structured Content-Type wins over ce- headers
	// (the NATS binding's marker of structured mode).
	for _, h := range []nats.Header{
		nil,
		{},
		{"Content-Type": {ContentTypeCloudEvents}},
		{"content-type": {"application/cloudevents+json; charset=UTF-8"}, "ce-specversion": {"1.0"}},
		{"Nats-Msg-Id": {"run-1/x"}},
	} {
		got, err := ParseStoredMsg(subj, h, env)
		if err != nil || got.Binary() || got.ID != ev.ID {
			t.Fatalf("header %v: %+v, %v", h, got, err)
		}
	}
	h := nats.Header{"Ce-Specversion": {"1.0"}, "CE-ID": {"x"}, "Ce-Source": {"s"}, "Ce-Type": {"vera.ext.demo"}, "Ce-Time": {"2026-11-21T12:00:00Z"}}
	got, err := ParseStoredMsg(subj, h, []byte(`{"text":"hi"}`))
	if err != nil || !got.Binary() || got.ID != "x" || got.Source != "s" || got.RunID != "run-1" {
		t.Fatalf("mixed-case binary headers: %+v, %v", got, err)
	}
}

func TestValidateTraceparentAndDataSchema(t *testing.T) {
	f := fixedFactory()
	ev, err := f.New("run-1", demo{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Traceparent != Traceparent("run-1") {
		t.Fatalf("factory traceparent %q, want %q", ev.Traceparent, Traceparent("run-1"))
	}
	if ev.DataSchema != "" {
		t.Fatalf("an unregistered type got dataschema %q", ev.DataSchema)
	}
	for _, tp := range []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
		Traceparent("01JNZ8P2W7C5D9E3F6G8H1J2K3"),
	} {
		e := ev
		e.Traceparent = tp
		if err := e.Validate(); err != nil {
			t.Errorf("traceparent %q: %v", tp, err)
		}
	}
	for _, tp := range []string{
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
		"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"garbage",
	} {
		e := ev
		e.Traceparent = tp
		if err := e.Validate(); err == nil || !strings.Contains(err.Error(), "traceparent") {
			t.Errorf("traceparent %q accepted (%v)", tp, err)
		}
	}
	for uri, ok := range map[string]bool{
		"https://vera.dev/schemas/vera.tool.requested.json": true,
		"urn:acme:scan:v1":  true,
		"a+b.c-d:x":         true,
		"scan.json":         false,
		"/schemas/x.json":   false,
		"1http://x":         false,
		"https:":            false,
		":x":                false,
		"https://a b":       false,
		"https://x\n.json":  false,
		"https://x/\x7f.js": false,
	} {
		e := ev
		e.DataSchema = uri
		if err := e.Validate(); (err == nil) != ok {
			t.Errorf("dataschema %q: %v, want ok=%v", uri, err, ok)
		}
	}
}

type schemaDemo struct{}

func (schemaDemo) EventType() string { return "vera.bindingtest.schema" }

func TestFactoryStampsRegisteredDataSchema(t *testing.T) {
	const url = "https://vera.dev/schemas/vera.bindingtest.schema.json"
	RegisterDataSchema("vera.bindingtest.schema", url)
	f := fixedFactory()
	ev, err := f.New("run-1", schemaDemo{})
	if err != nil {
		t.Fatal(err)
	}
	if ev.DataSchema != url {
		t.Fatalf("dataschema %q, want %q", ev.DataSchema, url)
	}
	raw, _ := ev.Marshal()
	back, err := ParseEvent(raw)
	if err != nil || back.DataSchema != url || back.Traceparent != ev.Traceparent {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// TestTraceparentAlwaysValid: the traceparent the Factory stamps is valid
// for any run id, ULID or not, so VERA never publishes an envelope its own
// Validate (or a Distributed Tracing reader) rejects.
func TestTraceparentAlwaysValid(t *testing.T) {
	src := NewULIDSource(nil)
	for i := 0; i < 2000; i++ {
		runs := []string{src.NewID(time.Now()), fmt.Sprintf("run-%d", i), strings.Repeat("z", 1+i%128), "00000000000000000000000000"}
		for _, run := range runs {
			if tp := Traceparent(run); !validTraceparent(tp) {
				t.Fatalf("Traceparent(%q) = %q is not valid", run, tp)
			}
		}
	}
}
