package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

var tokenRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func TestEntriesSortedUniqueAndWellFormed(t *testing.T) {
	entries := Entries()
	if len(entries) == 0 {
		t.Fatal("empty catalogue")
	}
	seen := map[string]bool{}
	for i, e := range entries {
		if i > 0 && entries[i-1].Type >= e.Type {
			t.Errorf("Entries not sorted by Type: %q before %q", entries[i-1].Type, e.Type)
		}
		if seen[e.Type] {
			t.Errorf("duplicate type %q", e.Type)
		}
		seen[e.Type] = true
		parts := strings.Split(e.Type, ".")
		if len(parts) != 3 || parts[0] != "vera" || !tokenRE.MatchString(parts[1]) || !tokenRE.MatchString(parts[2]) {
			t.Errorf("type %q does not match vera.<area>.<event>", e.Type)
		}
		if !ValidType(e.Type) {
			t.Errorf("ValidType(%q) = false", e.Type)
		}
		if IsExtension(e.Type) {
			t.Errorf("%q: vera.ext.* types are reserved for outside tools", e.Type)
		}
		if e.Summary == "" || strings.Contains(e.Summary, "\n") {
			t.Errorf("%s: summary must be one non-empty line", e.Type)
		}
		if e.Description == "" {
			t.Errorf("%s: empty description", e.Type)
		}
		if len(e.Producers) == 0 || len(e.Consumers) == 0 {
			t.Errorf("%s: producers and consumers must not be empty", e.Type)
		}
		for _, c := range append(slices.Clone(e.Producers), e.Consumers...) {
			if !slices.Contains(Components(), c) {
				t.Errorf("%s: unknown component %q", e.Type, c)
			}
		}
		if !slices.Contains(e.Consumers, ComponentProjector) {
			t.Errorf("%s: the projector consumes every type (it rebuilds trace.jsonl)", e.Type)
		}
		if e.New == nil || e.Example == nil {
			t.Fatalf("%s: New and Example are required", e.Type)
		}
		got, ok := Lookup(e.Type)
		if !ok || got.Type != e.Type {
			t.Errorf("Lookup(%q) = %v, %v", e.Type, got.Type, ok)
		}
	}
	if !slices.Equal(Types(), slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})) {
		t.Error("Types() does not list the entries in order")
	}
	if _, ok := Lookup("vera.nope.nothing"); ok {
		t.Error("Lookup of an unknown type succeeded")
	}
}

func TestEntriesReturnsACopy(t *testing.T) {
	a := Entries()
	a[0].Type = "mutated"
	if Entries()[0].Type == "mutated" {
		t.Fatal("Entries exposes the registry")
	}
}

func TestBriefTypesPresent(t *testing.T) {
	want := []string{
		TypeTaskSubmitted, TypeRunStarted, TypeRunFinished, TypeRunCancelled,
		TypeModelRequested, TypeModelResponded, TypeAgentStep, TypeAgentProtocol,
		TypeToolRequested, TypeToolStarted, TypeToolFinished, TypeToolSession,
		TypeNotesAppended, TypeEvidenceRecorded, TypeLedgerMove, TypeLedgerQuery,
		TypeContainerLog, TypeContainerEvent, TypeLogicVerdict,
		TypeAuditRequested, TypeAuditDecomposed, TypeAuditCheckStarted, TypeAuditCheck, TypeAuditJudged, TypeAuditFeedback,
		TypeVerifyFastPhase, TypeVerifyFastScored,
		TypeEvalStarted, TypeEvalTaskScored, TypeEvalFinished, TypeForkPrefix,
		TypePolicyPreToolNudge, TypePolicyLengthNudge, TypePolicyReminder, TypePolicyChoice,
		TypePolicyChoiceMatched, TypePolicyStagnation, TypePolicyFailureEscalation, TypePolicyDomainShift,
		TypePolicyConclusionReady, TypePolicyFinalizationStop, TypePolicyNotesGate,
		TypePolicyQueryMutationRequired, TypePolicyNegativeClaim, TypePolicyRepetitionNudge,
	}
	for _, typ := range want {
		if _, ok := Lookup(typ); !ok {
			t.Errorf("%s missing from the catalogue", typ)
		}
	}
	if len(want) != len(Entries()) {
		t.Errorf("catalogue has %d types, the test knows %d: add new constants here", len(Entries()), len(want))
	}
}

func TestNewReturnsPointerOfTheType(t *testing.T) {
	for _, e := range Entries() {
		p := e.New()
		rv := reflect.ValueOf(p)
		if rv.Kind() != reflect.Pointer || rv.IsNil() {
			t.Errorf("%s: New() returned %T, want a non-nil pointer", e.Type, p)
			continue
		}
		if got := p.EventType(); got != e.Type {
			t.Errorf("%s: New().EventType() = %q", e.Type, got)
		}
		if rv.Elem().Type() != reflect.TypeOf(e.Example) {
			t.Errorf("%s: New() is %T but Example is %T", e.Type, p, e.Example)
		}
		if e.Example.EventType() != e.Type {
			t.Errorf("%s: Example.EventType() = %q", e.Type, e.Example.EventType())
		}
		if reflect.ValueOf(e.Example).Kind() == reflect.Pointer {
			t.Errorf("%s: Example must be a value", e.Type)
		}
		if p2 := e.New(); p2 == p {
			t.Errorf("%s: New() returned the same pointer twice", e.Type)
		}
	}
}

func TestExamplesRoundTrip(t *testing.T) {
	for _, e := range Entries() {
		data, err := json.Marshal(e.Example)
		if err != nil {
			t.Fatalf("%s: marshal: %v", e.Type, err)
		}
		p, err := Decode(e.Type, data)
		if err != nil {
			t.Fatalf("%s: Decode: %v\n%s", e.Type, err, data)
		}
		got := reflect.ValueOf(p).Elem().Interface()
		if !reflect.DeepEqual(got, e.Example) {
			t.Errorf("%s: round trip changed the value\nwant %#v\ngot  %#v", e.Type, e.Example, got)
		}
		// Encode accepts a value or a pointer and gives the same bytes.
		for _, in := range []Payload{e.Example, p} {
			typ, enc, err := Encode(in)
			if err != nil || typ != e.Type || !bytes.Equal(enc, data) {
				t.Errorf("%s: Encode(%T) = %q, %s, %v", e.Type, in, typ, enc, err)
			}
		}
		if reflect.ValueOf(e.Example).IsZero() {
			t.Errorf("%s: example is the zero value", e.Type)
		}
	}
}

func TestZeroValuesMarshalWithoutNull(t *testing.T) {
	// A nil slice or map without omitempty would be sent as null, which
	// the schema (type array/object) rejects.
	for _, e := range Entries() {
		data, err := json.Marshal(e.New())
		if err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		if bytes.Contains(data, []byte("null")) {
			t.Errorf("%s: zero value marshals a null: %s", e.Type, data)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name, typ, data string
		want            error
	}{
		{"unknown type", "vera.nope.nothing", `{}`, ErrUnknownType},
		{"extension type", "vera.ext.acme_scanned", `{}`, ErrUnknownType},
		{"not a type", "tool.requested", `{}`, ErrUnknownType},
		{"truncated", TypeToolRequested, `{"request_id":`, ErrInvalidData},
		{"garbage", TypeToolRequested, `{nope}`, ErrInvalidData},
		{"empty", TypeToolRequested, ``, ErrInvalidData},
		{"null", TypeToolRequested, `null`, ErrInvalidData},
		{"array", TypeToolRequested, `[]`, ErrInvalidData},
		{"string", TypeToolRequested, `"x"`, ErrInvalidData},
		{"number", TypeToolRequested, `42`, ErrInvalidData},
		{"wrong member type", TypeToolRequested, `{"step":"seven"}`, ErrInvalidData},
		{"wrong nested type", TypeToolFinished, `{"stdout":{"bytes":"many"}}`, ErrInvalidData},
		{"trailing object", TypeToolRequested, `{} {}`, ErrInvalidData},
		{"trailing garbage", TypeToolRequested, `{}x`, ErrInvalidData},
		{"policy rule mismatch", TypePolicyStagnation, `{"rule":"reminder","step":3}`, ErrInvalidData},
	}
	for _, c := range cases {
		p, err := Decode(c.typ, []byte(c.data))
		if err == nil {
			t.Errorf("%s: Decode(%q, %q) = %v, want an error", c.name, c.typ, c.data, p)
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v does not wrap %v", c.name, err, c.want)
		}
		if p != nil {
			t.Errorf("%s: Decode returned a payload with an error", c.name)
		}
	}
}

func TestDecodeTolerates(t *testing.T) {
	// Unknown members (a newer producer), surrounding whitespace and an
	// empty object all decode.
	p, err := Decode(TypeToolRequested, []byte("  \n{\"request_id\":\"req-s0001\",\"added_later\":{\"x\":[1,2]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := p.(*ToolRequested); r.RequestID != "req-s0001" {
		t.Fatalf("got %+v", r)
	}
	p, err = Decode(TypePolicyStagnation, []byte(`{"step":4}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := p.(*PolicyTriggered); r.Rule != RuleStagnation || r.Step != 4 {
		t.Fatalf("policy without rule member: got %+v", r)
	}
}

func TestEncodeErrors(t *testing.T) {
	if _, _, err := Encode(nil); !errors.Is(err, ErrUnknownType) {
		t.Errorf("Encode(nil): %v", err)
	}
	if _, _, err := Encode((*ToolRequested)(nil)); !errors.Is(err, ErrUnknownType) {
		t.Errorf("Encode(typed nil): %v", err)
	}
	if _, _, err := Encode(PolicyTriggered{Rule: "made_up"}); !errors.Is(err, ErrUnknownType) {
		t.Errorf("Encode(unknown policy rule): %v", err)
	}
	if _, _, err := Encode(fakePayload{}); !errors.Is(err, ErrInvalidData) {
		t.Errorf("Encode(foreign Go type claiming a catalogued type): %v", err)
	}
}

type fakePayload struct{}

func (fakePayload) EventType() string { return TypeToolRequested }

func TestTypeHelpers(t *testing.T) {
	for typ, want := range map[string]bool{
		"vera.tool.requested": true, "vera.ext.acme_scanned": true, "vera.a.b": true, "vera.a1_.b_2": true,
		"vera.Tool.requested": false, "vera.tool": false, "vera.tool.requested.x": false, "x.tool.requested": false,
		"vera.1tool.requested": false, "vera._t.r": false, "vera.tool.re-quested": false, "": false, "vera..x": false,
	} {
		if got := ValidType(typ); got != want {
			t.Errorf("ValidType(%q) = %v, want %v", typ, got, want)
		}
	}
	if a, ev, ok := SplitType("vera.audit.check_started"); !ok || a != "audit" || ev != "check_started" {
		t.Errorf("SplitType = %q %q %v", a, ev, ok)
	}
	for typ, want := range map[string]bool{
		"vera.ext.acme_scanned": true, "vera.ext.acme.scanned": true,
		"vera.extra.x": false, "vera.ext": false, "vera.ext.": false, "vera.ext.Acme": false, "vera.tool.ext": false,
	} {
		if got := IsExtension(typ); got != want {
			t.Errorf("IsExtension(%q) = %v, want %v", typ, got, want)
		}
	}
	if got := SchemaID(TypeToolRequested); got != "https://vera.dev/schemas/vera.tool.requested.json" {
		t.Errorf("SchemaID = %q", got)
	}
}

func TestPolicyTypes(t *testing.T) {
	rules := PolicyRules()
	if len(rules) != 14 {
		t.Errorf("PolicyRules() = %v, want the 14 rules", rules)
	}
	if !slices.IsSorted(rules) {
		t.Error("PolicyRules not sorted")
	}
	goType := reflect.TypeFor[PolicyTriggered]()
	for _, rule := range rules {
		typ := "vera.policy." + rule
		e, ok := Lookup(typ)
		if !ok {
			t.Fatalf("%s missing", typ)
		}
		if reflect.TypeOf(e.Example) != goType {
			t.Errorf("%s: data type %T, want PolicyTriggered", typ, e.Example)
		}
		if got, _ := PolicyRule(typ); got != rule {
			t.Errorf("PolicyRule(%q) = %q", typ, got)
		}
		ex := e.Example.(PolicyTriggered)
		if ex.Rule != rule || !ex.Effect.Valid() {
			t.Errorf("%s: example rule %q effect %q", typ, ex.Rule, ex.Effect)
		}
		if got, want := PolicyMetricName(rule), "dra_policy_"+rule+"_total"; got != want {
			t.Errorf("PolicyMetricName(%q) = %q", rule, got)
		}
		if !strings.Contains(e.Description, PolicyMetricName(rule)) {
			t.Errorf("%s: description does not name its metric", typ)
		}
	}
	// The metric names the spec lists must be derivable.
	for _, m := range []string{"pre_tool_nudge", "length_nudge", "reminder", "choice", "choice_matched", "stagnation", "domain_shift", "conclusion_ready"} {
		if !slices.Contains(rules, m) {
			t.Errorf("no policy type for dra_policy_%s_total", m)
		}
	}
	if _, ok := PolicyRule(TypeToolRequested); ok {
		t.Error("PolicyRule of a non-policy type")
	}
	if _, ok := PolicyRule("vera.policy.made_up"); ok {
		t.Error("PolicyRule of an unknown policy type")
	}
}

func TestEnumValid(t *testing.T) {
	if !OutcomeUnresolved.Valid() || Outcome("DONE").Valid() || Outcome("").Valid() {
		t.Error("Outcome.Valid")
	}
	if !ZoneGood.Valid() || Zone("good").Valid() {
		t.Error("Zone.Valid")
	}
	if !ScopeVerifyFast.Valid() || !VerifierHybrid.Valid() || !MoveInstall.Valid() || !LedgerTimeout.Valid() {
		t.Error("Valid of a declared constant")
	}
}

func TestComponentNames(t *testing.T) {
	want := []string{"agent", "sandboxd", "verifier.logic", "verifier.deepverify", "verifier.verifyfast", "projector", "dashboard", "cli"}
	if !slices.Equal(Components(), want) {
		t.Errorf("Components() = %v", Components())
	}
}

func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, e := range Entries() {
				data, _ := json.Marshal(e.Example)
				if _, err := Decode(e.Type, data); err != nil {
					t.Error(err)
				}
				if i%4 == 0 {
					if _, err := Schema(e.Type); err != nil {
						t.Error(err)
					}
				}
			}
			if i%4 == 1 {
				_ = EventsMarkdown()
			}
		}()
	}
	wg.Wait()
}
