package catalog

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestValidateAcceptsEveryExample(t *testing.T) {
	for _, e := range Entries() {
		data, err := json.Marshal(e.Example)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(e.Type, data); err != nil {
			t.Errorf("%s: example rejected: %v", e.Type, err)
		}
		// A zero value encodes nil slices and maps as null: what every Go
		// producer writes for an empty list.
		zero, _ := json.Marshal(e.New())
		if err := Validate(e.Type, zero); err != nil && !strings.Contains(err.Error(), "minLength") && !strings.Contains(err.Error(), "minimum") && !strings.Contains(err.Error(), "enum") && !strings.Contains(err.Error(), "must be") && !strings.Contains(err.Error(), "pattern") {
			t.Errorf("%s: zero value rejected for a reason other than a range or enum: %v", e.Type, err)
		}
	}
}

// Every event of the recorded demo run (written by the real components)
// passes its schema.
func TestValidateAcceptsARecordedRun(t *testing.T) {
	f, err := os.Open("../../cmd/vera/demo/example-run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	n := 0
	for sc.Scan() {
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if _, ok := Lookup(ev.Type); !ok {
			continue
		}
		n++
		if err := Validate(ev.Type, ev.Data); err != nil {
			t.Errorf("recorded %s rejected: %v", ev.Type, err)
		}
	}
	if n < 50 {
		t.Fatalf("only %d catalogued events in the recording", n)
	}
}

func TestValidateRejectsWithAReason(t *testing.T) {
	for _, tc := range []struct {
		typ, data string
		want      []string
	}{
		{TypeToolRequested, `{"request_id":"r","requester":"root","tool":"shell","command":"id","timeout_ms":1000,"step":1}`, []string{"/requester", "agent"}},
		{TypeToolRequested, `{"request_id":"r","requester":"agent","tool":"shell","command":"id","timeout_ms":-1,"step":1}`, []string{"/timeout_ms", "1"}},
		{TypeToolRequested, `{"request_id":"r","requester":"agent","tool":"shell","timeout_ms":5,"step":1}`, []string{"command"}},
		{TypeToolRequested, `{"request_id":"r","requester":"agent","tool":"shell","command":"id","timeout_ms":"5","step":1}`, []string{"/timeout_ms"}},
		{TypeToolRequested, `[1,2]`, []string{"object"}},
		{TypeToolRequested, `{"request_id":`, []string{"invalid"}},
	} {
		err := Validate(tc.typ, []byte(tc.data))
		if !errors.Is(err, ErrInvalidData) {
			t.Errorf("%s %s: err = %v, want ErrInvalidData", tc.typ, tc.data, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: %v does not say %q", tc.typ, tc.data, err, w)
			}
		}
	}
	if err := Validate("vera.nope.nope", []byte(`{}`)); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v", err)
	}
}
