package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"
)

type demo struct {
	Text string `json:"text"`
}

func (demo) EventType() string { return "vera.ext.demo" }

func fixedFactory() *Factory {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	return &Factory{Source: "test", Clock: ClockFunc(func() time.Time { return t0 }), IDs: NewULIDSource(rand.New(rand.NewSource(1)))}
}

func TestFactoryBuildsValidEnvelope(t *testing.T) {
	f := fixedFactory()
	ev, err := f.New("run-1", demo{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"specversion": "1.0", "source": "test", "type": "vera.ext.demo", "subject": "run-1",
		"runid": "run-1", "datacontenttype": "application/json", "time": "2026-11-21T12:00:00Z",
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	if len(ev.ID) != 26 {
		t.Errorf("id %q is not a ULID", ev.ID)
	}
	if bytes.Contains(raw, []byte("\n")) {
		t.Error("stored form must be one line")
	}
	back, err := ParseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	var d demo
	if err := back.DecodeData(&d); err != nil || d.Text != "hi" {
		t.Fatalf("decode data: %v %+v", err, d)
	}
}

func TestIDsAreMonotonicAndReproducible(t *testing.T) {
	a, b := fixedFactory(), fixedFactory()
	prev := ""
	for i := 0; i < 1000; i++ {
		ea, _ := a.New("r", demo{})
		eb, _ := b.New("r", demo{})
		if ea.ID != eb.ID {
			t.Fatalf("same seed gave %s and %s", ea.ID, eb.ID)
		}
		if ea.ID <= prev {
			t.Fatalf("id %s does not sort after %s", ea.ID, prev)
		}
		prev = ea.ID
	}
}

func TestDeriveID(t *testing.T) {
	cause, _ := fixedFactory().New("r", demo{})
	a, b := DeriveID("r", cause.ID, "exec"), DeriveID("r", cause.ID, "exec")
	if a != b {
		t.Fatalf("derive is not deterministic: %s %s", a, b)
	}
	if a == DeriveID("r", cause.ID, "other") || a == cause.ID {
		t.Fatal("derived id collides")
	}
	// The same cause id in another run (an outside tool that reuses ids)
	// derives another id: one run's reaction never hides the other's.
	if a == DeriveID("r2", cause.ID, "exec") {
		t.Fatal("derived id collides")
	}
	if a[:10] != cause.ID[:10] {
		t.Errorf("derived id %s should carry the cause's timestamp %s", a, cause.ID)
	}
	ev, err := fixedFactory().New("r", demo{}, ReactionTo(cause, "exec"))
	if err != nil || ev.ID != a || ev.CausationID != cause.ID {
		t.Fatalf("ReactionTo: %v %+v", err, ev)
	}
}

func TestValidateRejects(t *testing.T) {
	good, _ := fixedFactory().New("r1", demo{})
	cases := map[string]func(e *Event){
		"specversion":  func(e *Event) { e.SpecVersion = "0.3" },
		"no id":        func(e *Event) { e.ID = "" },
		"no source":    func(e *Event) { e.Source = "" },
		"bad type":     func(e *Event) { e.Type = "tool.requested" },
		"upper type":   func(e *Event) { e.Type = "vera.Tool.requested" },
		"one token":    func(e *Event) { e.Type = "vera.tool" },
		"bad run":      func(e *Event) { e.RunID, e.Subject = "a.b", "a.b" },
		"subject":      func(e *Event) { e.Subject = "other" },
		"no time":      func(e *Event) { e.Time = time.Time{} },
		"invalid json": func(e *Event) { e.Data = json.RawMessage(`{`) },
		"both data":    func(e *Event) { e.DataBase64 = []byte{1} },
	}
	for name, mut := range cases {
		e := good
		mut(&e)
		if err := e.Validate(); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: Validate = %v, want ErrInvalidEvent", name, err)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good event: %v", err)
	}
	if _, err := ParseEvent([]byte("not json")); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("ParseEvent(garbage) = %v", err)
	}
}

func TestSubjects(t *testing.T) {
	s, err := Subject("R", "vera.tool.requested")
	if err != nil || s != "vera.run.R.tool.requested" {
		t.Fatalf("Subject = %q, %v", s, err)
	}
	run, typ, err := ParseSubject("vera.run.R.ext.mytool.thing")
	if err != nil || run != "R" || typ != "vera.ext.mytool.thing" {
		t.Fatalf("ParseSubject = %q %q %v", run, typ, err)
	}
	for _, bad := range []string{"vera.run.R", "other.R.x.y", "vera.run.R.Tool.x", "vera.run..tool.x"} {
		if _, _, err := ParseSubject(bad); err == nil {
			t.Errorf("ParseSubject(%q) accepted", bad)
		}
	}
	for _, c := range []struct{ run, pat, want string }{
		{"", "", "vera.run.*.>"},
		{"R", "", "vera.run.R.>"},
		{"R", "vera.tool.*", "vera.run.R.tool.*"},
		{"", "vera.ext.>", "vera.run.*.ext.>"},
		{"*", "vera.*.finished", "vera.run.*.*.finished"},
	} {
		got, err := FilterSubject(c.run, c.pat)
		if err != nil || got != c.want {
			t.Errorf("FilterSubject(%q,%q) = %q, %v; want %q", c.run, c.pat, got, err, c.want)
		}
	}
	for _, bad := range []string{"tool.*", "vera.>.x", "vera.Tool", "vera."} {
		if _, err := FilterSubject("", bad); err == nil {
			t.Errorf("FilterSubject accepted %q", bad)
		}
	}
	if err := ValidateRunID(strings.Repeat("a", 129)); err == nil {
		t.Error("129-char run id accepted")
	}
}

func TestKeyedID(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := KeyedID(t0, "k"), KeyedID(t0, "k")
	if a != b || a == KeyedID(t0, "other") || a == KeyedID(t0.Add(time.Millisecond), "k") {
		t.Fatalf("KeyedID not a function of (time, key): %s %s", a, b)
	}
	if KeyedID(t0, "k") >= KeyedID(t0.Add(time.Second), "a") {
		t.Fatal("keyed ids must sort by time")
	}
}
