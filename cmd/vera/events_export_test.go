package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// TestExportCLIKeepsEveryStoredMessage: `vera events export` of a run with
// a VERA event, an outside CloudEvent without runid, a message that is not
// JSON and a JSON message that is no envelope writes all four (the bad ones
// marked as vera.bus.raw lines), `vera events import` stores them back on a
// fresh server, and exporting there gives the same file. A run holding only
// malformed messages still exports.
func TestExportCLIKeepsEveryStoredMessage(t *testing.T) {
	srcSrv, src := bustest.New(t)
	ctx := context.Background()
	ev, err := src.Events.NewRaw("mix", "vera.ext.demo", []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	stored := []struct{ subject, raw string }{
		{"vera.run.mix.ext.acme", `{"specversion":"1.0","id":"acme-1","source":"acme","type":"vera.ext.acme","time":"2026-11-21T12:00:00Z","data":{"found":3}}`},
		{"vera.run.mix.ext.junk", "not json"},
		{"vera.run.mix.ext.half", `{"specversion":"1.0","id":"half-1"}`},
		{"vera.run.onlybad.ext.junk", "garbage"},
	}
	for _, m := range stored {
		if _, err := src.JetStream().Publish(ctx, m.subject, []byte(m.raw)); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	first := filepath.Join(dir, "mix.jsonl")
	_, errOut, code := runCLI(t, "events", "export", "--nats-url", srcSrv.ClientURL(), "--run", "mix", "-o", first)
	if code != 0 || !strings.Contains(errOut, "exported run mix: 2 events") || !strings.Contains(errOut, "2 malformed messages included verbatim") {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	file, _ := os.ReadFile(first)
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("export wrote %d lines, want 4:\n%s", len(lines), file)
	}
	for i, l := range lines[1:] {
		var line struct {
			Type string      `json:"type"`
			Data bus.RawData `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil || line.Type != bus.RawType {
			t.Fatalf("line %d is not a %s line: %v %s", i+2, bus.RawType, err, l)
		}
		m := stored[i]
		if "vera.run.mix."+line.Data.SubjectTail != m.subject || string(line.Data.Raw) != m.raw || (line.Data.Malformed != "") != (i > 0) {
			t.Errorf("line %d: %+v, want %s %q", i+2, line.Data, m.subject, m.raw)
		}
	}

	only := filepath.Join(dir, "onlybad.jsonl")
	if _, errOut, code := runCLI(t, "events", "export", "--nats-url", srcSrv.ClientURL(), "--run", "onlybad", "-o", only); code != 0 ||
		strings.Contains(errOut, "no events") || !strings.Contains(errOut, "1 malformed messages included verbatim") {
		t.Errorf("export of a run with only a malformed message: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "events", "export", "--nats-url", srcSrv.ClientURL(), "--run", "nothing"); code != exitFailure ||
		!strings.Contains(errOut, "run nothing has no stored messages") {
		t.Errorf("export of an empty run: exit %d: %s", code, errOut)
	}

	dst := bustest.StartServer(t)
	for i, want := range []string{
		"imported 2 events (0 already present), 0 blobs, from 4 lines of " + first + "; 2 malformed messages (vera.bus.raw lines) stored back verbatim",
		"imported 0 events (4 already present)",
	} {
		_, errOut, code := runCLI(t, "events", "import", "--nats-url", dst.ClientURL(), first)
		if code != 0 || !strings.Contains(errOut, want) {
			t.Fatalf("import #%d: exit %d: %s", i+1, code, errOut)
		}
	}
	second := filepath.Join(dir, "again.jsonl")
	if _, errOut, code := runCLI(t, "events", "export", "--nats-url", dst.ClientURL(), "--run", "mix", "-o", second); code != 0 {
		t.Fatalf("export from the fresh server: %s", errOut)
	}
	again, _ := os.ReadFile(second)
	if !bytes.Equal(file, again) {
		t.Fatalf("export → import → export differs:\n%s\n---\n%s", file, again)
	}

	out, _, code := runCLI(t, "events", "export", "--help")
	if code != 0 || !strings.Contains(out, "vera.bus.raw") || !strings.Contains(out, "runid") {
		t.Errorf("export --help does not explain the marked lines: %s", out)
	}
}
