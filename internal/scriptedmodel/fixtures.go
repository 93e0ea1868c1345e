package scriptedmodel

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"sync"
)

// The conformance fixtures: the exact response bodies of each server
// family VERA is run against (OpenAI, vLLM, llama.cpp's llama-server,
// Ollama's /v1, LM Studio, gpt-oss Harmony markup, an HTML error page from
// a proxy), written from each server's documentation or source, one file
// per case under fixtures/<family>/, with fixtures/fixtures.json saying
// where each comes from and what the reply must parse to. docs/models.md
// maps every fixture to its document.
//
//go:embed fixtures
var fixtureFS embed.FS

// Fixture is one recorded wire body of a server family and what a client
// must make of it.
type Fixture struct {
	Family string `json:"family"` // openai, vllm, llamacpp, ollama, lmstudio, harmony, proxy
	Case   string `json:"case"`
	File   string `json:"file"`   // path under fixtures/
	Stream bool   `json:"stream"` // an SSE body (text/event-stream)
	// Source is the document (or public capture) the body was written from.
	Source string `json:"source"`
	// Server says which server, version and flags send this body.
	Server string `json:"server"`
	Note   string `json:"note,omitempty"`
	// Status is the HTTP status (0: 200); ContentType overrides the one
	// implied by Stream; Header holds extra response headers.
	Status      int               `json:"status,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Header      map[string]string `json:"header,omitempty"`
	Expect      FixtureExpect     `json:"expect"`

	// Body is the file's content, verbatim.
	Body []byte `json:"-"`
}

// FixtureExpect is what a client must parse a fixture into (empty fields
// must come back empty), or, when Error is set, the substrings its one-line
// error must contain.
type FixtureExpect struct {
	Text            string            `json:"text,omitempty"`
	Reasoning       string            `json:"reasoning,omitempty"`
	ReasoningSource string            `json:"reasoning_source,omitempty"`
	ToolCalls       []FixtureToolCall `json:"tool_calls,omitempty"`
	FinishReason    string            `json:"finish_reason,omitempty"`
	Usage           *FixtureUsage     `json:"usage,omitempty"`
	Model           string            `json:"model,omitempty"`
	Error           []string          `json:"error,omitempty"`
}

// FixtureToolCall is an expected native tool call.
type FixtureToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// FixtureUsage is an expected token count.
type FixtureUsage struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Total      int64 `json:"total"`
	Reasoning  int64 `json:"reasoning,omitempty"`
	Cached     int64 `json:"cached,omitempty"`
}

// IsError reports whether the fixture is an error the client must report.
func (f Fixture) IsError() bool { return len(f.Expect.Error) > 0 }

// Name is "family/case".
func (f Fixture) Name() string { return f.Family + "/" + f.Case }

// Reply returns a reply that serves the fixture's body verbatim, with its
// status, content type and headers.
func (f Fixture) Reply() Reply {
	ct := f.ContentType
	switch {
	case ct != "":
	case f.Stream:
		ct = "text/event-stream; charset=utf-8"
	default:
		ct = "application/json"
	}
	r := Reply{RawBody: f.Body, RawContentType: ct, Status: f.Status}
	if len(f.Header) > 0 {
		r.Header = http.Header{}
		for k, v := range f.Header {
			r.Header.Set(k, v)
		}
	}
	return r
}

var (
	fixturesOnce sync.Once
	fixtures     []Fixture
	fixturesErr  error
)

// Fixtures returns every fixture of the index, bodies loaded, in index
// order.
func Fixtures() ([]Fixture, error) {
	fixturesOnce.Do(func() { fixtures, fixturesErr = loadFixtures() })
	if fixturesErr != nil {
		return nil, fixturesErr
	}
	out := make([]Fixture, len(fixtures))
	copy(out, fixtures)
	return out, nil
}

// LoadFixture returns one fixture by family and case.
func LoadFixture(family, name string) (Fixture, error) {
	all, err := Fixtures()
	if err != nil {
		return Fixture{}, err
	}
	for _, f := range all {
		if f.Family == family && f.Case == name {
			return f, nil
		}
	}
	return Fixture{}, fmt.Errorf("scriptedmodel: no fixture %s/%s", family, name)
}

// MustFixture is LoadFixture for tests: it panics when the fixture does
// not exist.
func MustFixture(family, name string) Fixture {
	f, err := LoadFixture(family, name)
	if err != nil {
		panic(err)
	}
	return f
}

func loadFixtures() ([]Fixture, error) {
	idx, err := fixtureFS.ReadFile("fixtures/fixtures.json")
	if err != nil {
		return nil, fmt.Errorf("scriptedmodel: reading the fixture index: %w", err)
	}
	var all []Fixture
	if err := json.Unmarshal(idx, &all); err != nil {
		return nil, fmt.Errorf("scriptedmodel: parsing the fixture index: %w", err)
	}
	seen := map[string]bool{}
	for i := range all {
		f := &all[i]
		if f.Family == "" || f.Case == "" || f.File == "" || f.Source == "" {
			return nil, fmt.Errorf("scriptedmodel: fixture #%d (%s) lacks a family, case, file or source", i+1, f.Name())
		}
		if seen[f.Name()] {
			return nil, fmt.Errorf("scriptedmodel: fixture %s is listed twice", f.Name())
		}
		seen[f.Name()] = true
		if f.Body, err = fixtureFS.ReadFile(path.Join("fixtures", f.File)); err != nil {
			return nil, fmt.Errorf("scriptedmodel: fixture %s: %w", f.Name(), err)
		}
	}
	return all, nil
}
