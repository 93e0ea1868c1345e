package sandboxd

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// TestSpooledResultRoundTrip: a result kept on disk for a successor comes
// back with its facts, their ids and the result itself unchanged.
func TestSpooledResultRoundTrip(t *testing.T) {
	reg := &bus.Factory{Source: "sandboxd"}
	fact, err := reg.New("run-1", catalog.ContainerEvent{Container: "vera-run-1", Action: "vera_state_not_reported", Time: time.Unix(1, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	tf := catalog.ToolFinished{RequestID: "req-s0005", ExitCode: 3, Stdout: catalog.Output{Head: "five\n", Bytes: 5}, CwdAfter: "/work", ShellStateAfter: "f () \n{ \n    :\n}\n#vera-state-end"}
	path := filepath.Join(t.TempDir(), "run-1", "req-s0005.result")
	if err := saveResult(path, []bus.Event{fact}, tf); err != nil {
		t.Fatal(err)
	}
	u, ok := loadResult(path)
	if !ok || len(u.facts) != 1 || u.facts[0].ID != fact.ID || u.facts[0].Type != fact.Type || string(u.facts[0].Data) != string(fact.Data) {
		t.Fatalf("facts: %+v", u)
	}
	if u.tf.RequestID != tf.RequestID || u.tf.ExitCode != 3 || u.tf.Stdout.Head != "five\n" || u.tf.ShellStateAfter != tf.ShellStateAfter {
		t.Fatalf("result: %+v", u.tf)
	}
	if _, ok := loadResult(filepath.Join(t.TempDir(), "none.result")); ok {
		t.Fatal("a missing file loaded")
	}
}
