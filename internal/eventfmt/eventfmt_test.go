package eventfmt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
)

func TestLine(t *testing.T) {
	ev := bus.Event{
		Type: "vera.tool.requested", RunID: "r1", Source: "agent",
		Time: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.Local),
		Data: json.RawMessage(`{"request_id":"q1","command":"ls  -la\n/work","timeout_ms":900000,"env":{},"denied":false,"meta":{"a":[1,2]}}`),
	}
	got := Line(ev, 200)
	want := `03:04:05.006 r1 tool.requested [agent] request_id=q1 command="ls -la /work" timeout_ms=900000 meta={"a":[1,2]}`
	if got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	long := ev
	long.Data = json.RawMessage(`{"text":"` + strings.Repeat("x", 500) + `"}`)
	if l := Line(long, 50); len([]rune(l)) != 50 || !strings.HasSuffix(l, "…") {
		t.Fatalf("not cut to width: %d %q", len([]rune(l)), l)
	}
	blob := bus.Event{Type: "vera.ext.bin", RunID: "r", Source: "s", DataBase64: []byte{1, 2, 3}, DataContentType: "application/octet-stream"}
	if l := Line(blob, 0); !strings.HasSuffix(l, "<3 bytes of application/octet-stream>") {
		t.Fatal(l)
	}
}

func TestMalformed(t *testing.T) {
	got := Malformed(7, "vera.run.x.ext.demo", []byte("not\n json \xff"), errors.New("bad"), 0)
	if got != "MALFORMED seq=7 vera.run.x.ext.demo: bad: not json ?" {
		t.Fatal(got)
	}
}
