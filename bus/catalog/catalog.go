package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/vera-run/vera/bus"
)

// Payload is implemented (with a value receiver) by the Go type of the data
// member of every catalogued event. EventType returns the CloudEvents type,
// for example "vera.tool.requested".
type Payload = bus.Payload

// Errors returned by Decode and Encode. Test with errors.Is.
var (
	// ErrUnknownType: the type is not in the catalogue (vera.ext.* types
	// never are). Consumers skip such events; they are not malformed.
	ErrUnknownType = errors.New("catalog: unknown event type")
	// ErrInvalidData: the data does not decode into the type's Go value
	// (not a JSON object, bad JSON, wrong JSON types, trailing data, or a
	// policy rule that contradicts the type). Such an event is dead-lettered.
	ErrInvalidData = errors.New("catalog: invalid event data")
)

// Component names: the CloudEvents source of the events a component
// publishes, and the names used in Entry.Producers and Entry.Consumers.
const (
	ComponentAgent      = "agent"
	ComponentSandboxd   = "sandboxd"
	ComponentLogic      = "verifier.logic"
	ComponentDeepVerify = "verifier.deepverify"
	ComponentVerifyFast = "verifier.verifyfast"
	ComponentProjector  = "projector"
	ComponentDashboard  = "dashboard"
	ComponentCLI        = "cli"
)

const (
	extensionArea        = "ext"
	policyArea           = "policy"
	nameTokenPattern     = `[a-z][a-z0-9_]*`
	schemaBaseURL        = "https://vera.dev/schemas/"
	subjectRunPrefix     = "vera.run."
	subjectRunIDSegment  = "<run_id>"
	updateDocsEnv        = "VERA_UPDATE_DOCS"
	docsPathFromRepoRoot = "docs/events.md"
)

// Components lists every component name, in a stable order.
func Components() []string {
	return []string{
		ComponentAgent, ComponentSandboxd, ComponentLogic, ComponentDeepVerify,
		ComponentVerifyFast, ComponentProjector, ComponentDashboard, ComponentCLI,
	}
}

var typeRE = regexp.MustCompile(`^vera\.(` + nameTokenPattern + `)\.(` + nameTokenPattern + `)$`)

// ValidType reports whether typ follows the type grammar
// vera.<area>.<event>, area and event each matching ^[a-z][a-z0-9_]*$.
// It says nothing about whether the type is catalogued.
func ValidType(typ string) bool { return typeRE.MatchString(typ) }

// SplitType returns the area and event of a well-formed type name:
// SplitType("vera.tool.requested") = ("tool", "requested", true).
func SplitType(typ string) (area, event string, ok bool) {
	m := typeRE.FindStringSubmatch(typ)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// IsExtension reports whether typ is a well-formed type under vera.ext.:
// vera.ext.<event>, optionally with more tokens (vera.ext.acme.scanned),
// each token matching ^[a-z][a-z0-9_]*$. Those types are reserved for
// outside tools: the bus carries them, they are never in the catalogue, and
// VERA's components ignore them.
func IsExtension(typ string) bool { return extTypeRE.MatchString(typ) }

var extTypeRE = regexp.MustCompile(`^vera\.` + extensionArea + `(\.` + nameTokenPattern + `)+$`)

// SchemaID returns the $id of the JSON Schema of typ's data:
// https://vera.dev/schemas/<type>.json.
func SchemaID(typ string) string { return schemaBaseURL + typ + ".json" }

// Entry describes one catalogued event type.
type Entry struct {
	Type        string         // "vera.tool.requested"
	Summary     string         // one line
	Description string         // meaning, when emitted, idempotency notes
	Producers   []string       // component names
	Consumers   []string       // component names
	New         func() Payload // returns a pointer to a zero value (policy types: with Rule set)
	Example     Payload        // a realistic filled example (a value, not a pointer)
}

type registryT struct {
	sorted   []Entry // by Type
	declared []Entry // in declaration order: the life of a run, for the docs
	byType   map[string]int
}

var registry = buildRegistry(withObservers(catalogEntries()))

// Every catalogued type's events carry its schema's $id as their
// CloudEvents dataschema: bus's Factory stamps it.
func init() {
	for _, e := range registry.sorted {
		bus.RegisterDataSchema(e.Type, SchemaID(e.Type))
	}
}

// observers read every event of the runs they show, whatever its type:
// the projector (files and metrics), the dashboard (its live feed) and the
// cli (`vera run` following a run, `vera events tail`).
var observers = []string{ComponentProjector, ComponentDashboard, ComponentCLI}

// withObservers adds the observers to every entry's consumers.
func withObservers(entries []Entry) []Entry {
	for i, e := range entries {
		cons := slices.Clone(e.Consumers)
		for _, o := range observers {
			if !slices.Contains(cons, o) {
				cons = append(cons, o)
			}
		}
		entries[i].Consumers = cons
	}
	return entries
}

func buildRegistry(entries []Entry) registryT {
	r := registryT{byType: make(map[string]int, len(entries)), declared: slices.Clone(entries)}
	r.sorted = slices.Clone(entries)
	slices.SortFunc(r.sorted, func(a, b Entry) int { return strings.Compare(a.Type, b.Type) })
	for i, e := range r.sorted {
		if !ValidType(e.Type) || IsExtension(e.Type) {
			panic("catalog: bad event type name " + e.Type)
		}
		if _, dup := r.byType[e.Type]; dup {
			panic("catalog: duplicate event type " + e.Type)
		}
		r.byType[e.Type] = i
	}
	return r
}

// Entries returns every catalogued type, sorted by Type. The slice is a copy;
// the Producers, Consumers and Example it points to are shared and must not
// be modified.
func Entries() []Entry { return slices.Clone(registry.sorted) }

// Types returns every catalogued type name, sorted.
func Types() []string {
	out := make([]string, len(registry.sorted))
	for i, e := range registry.sorted {
		out[i] = e.Type
	}
	return out
}

// Lookup returns the entry of a catalogued type.
func Lookup(typ string) (Entry, bool) {
	i, ok := registry.byType[typ]
	if !ok {
		return Entry{}, false
	}
	return registry.sorted[i], true
}

// Decode decodes the data member of an event of type typ. It returns a
// pointer to the type's Go value (for example *ToolRequested), which
// implements Payload.
//
// Unknown types give an error wrapping ErrUnknownType. Data that is not a
// single JSON object, is malformed, has a value of the wrong JSON type or
// is followed by more data gives an error wrapping ErrInvalidData. Unknown
// members are ignored so that a newer producer that added a field does not
// break an older consumer. Decode does not check enum values or ranges.
func Decode(typ string, data []byte) (Payload, error) {
	e, ok := Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: %s: data must be a JSON object", ErrInvalidData, typ)
	}
	p := e.New()
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidData, typ, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s: unexpected data after the JSON object", ErrInvalidData, typ)
	}
	if got := p.EventType(); got != typ {
		return nil, fmt.Errorf("%w: %s: data describes %s", ErrInvalidData, typ, got)
	}
	return p, nil
}

// Encode marshals p (a value or a pointer) as the data member of an event
// and returns its type. A nil p or a type not in the catalogue gives an
// error wrapping ErrUnknownType.
func Encode(p Payload) (typ string, data []byte, err error) {
	if p == nil || (reflect.ValueOf(p).Kind() == reflect.Pointer && reflect.ValueOf(p).IsNil()) {
		return "", nil, fmt.Errorf("%w: nil payload", ErrUnknownType)
	}
	typ = p.EventType()
	e, ok := Lookup(typ)
	if !ok {
		return "", nil, fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	if reflect.Indirect(reflect.ValueOf(p)).Type() != reflect.TypeOf(e.Example) {
		return "", nil, fmt.Errorf("%w: %s carried by %T", ErrInvalidData, typ, p)
	}
	data, err = json.Marshal(p)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s: %v", ErrInvalidData, typ, err)
	}
	return typ, data, nil
}

// ProducedBy returns, sorted, every catalogued type whose Producers list
// names component. The identities and publish permissions of the bus are
// generated from it (bus/auth), so a type a component produces but the
// catalogue does not list is refused by the server.
func ProducedBy(component string) []string {
	return typesWhere(component, func(e Entry) []string { return e.Producers })
}

// ConsumedBy returns, sorted, every catalogued type whose Consumers list
// names component.
func ConsumedBy(component string) []string {
	return typesWhere(component, func(e Entry) []string { return e.Consumers })
}

func typesWhere(component string, list func(Entry) []string) []string {
	var out []string
	for _, e := range registry.sorted {
		if slices.Contains(list(e), component) {
			out = append(out, e.Type)
		}
	}
	return out
}
