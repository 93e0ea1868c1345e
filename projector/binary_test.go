package projector

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// TestBinaryModeEventTracedStructured: an outside tool's CloudEvent stored
// in binary mode (attributes in ce- headers, the body its data alone, as
// the CloudEvents SDKs publish by default) is a trace.jsonl line like any
// other event: its structured envelope, live and rebuilt, never its bare
// data.
func TestBinaryModeEventTracedStructured(t *testing.T) {
	_, b := bustest.New(t)
	dir := filepath.Join(t.TempDir(), "run-bin")
	evs := synthRun(t, "run-bin", dir, 2)
	stop := startFiles(t, b)
	publish(t, b, evs[:3])
	h := nats.Header{}
	for k, v := range map[string]string{
		"ce-specversion": "1.0", "ce-id": "acme-1", "ce-source": "acme", "ce-type": "vera.ext.acme.scanned",
		"ce-time": "2026-11-21T12:00:00.0045Z", "content-type": "application/json",
	} {
		h.Set(k, v)
	}
	msg := &nats.Msg{Subject: "vera.run.run-bin.ext.acme.scanned", Header: h, Data: []byte(`{"hosts": 3}`)}
	if _, err := b.JetStream().PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	ext, err := bus.ParseStoredMsg(msg.Subject, msg.Header, msg.Data)
	if err != nil || !ext.Binary() {
		t.Fatalf("binary message: %+v, %v", ext, err)
	}
	publish(t, b, evs[3:])
	waitProjected(t, dir, lastSeq(t, b, "run-bin"))
	stop()

	all := append(append(append([]bus.Event(nil), evs[:3]...), ext), evs[3:]...)
	live := readFiles(t, dir)
	sameFiles(t, "live vs Render", Render(all), live)
	env, _ := ext.Marshal()
	if !bytes.Contains(live[FileTrace], append(env, '\n')) || bytes.Contains(live[FileTrace], []byte("\n{\"hosts\"")) {
		t.Fatalf("trace.jsonl has no structured line %s for the binary event:\n%s", env, live[FileTrace])
	}
	checkLines(t, dir)
	rb := filepath.Join(t.TempDir(), "rebuilt")
	if err := mustFiles(t, b, FilesConfig{}).Rebuild(context.Background(), "run-bin", rb); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "live vs Rebuild", live, readFiles(t, rb))
}
