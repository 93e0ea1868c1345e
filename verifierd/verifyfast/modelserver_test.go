package verifyfast

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

var testTransport = &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}

// newHTTPCompleter is the production model client (openai-go) pointed at
// a scripted server, without its own retries so that the batch's and the
// auditor's retry behaviour is what the tests see.
func newHTTPCompleter(baseURL string) llm.Completer {
	c, err := llm.New(llm.Config{BaseURL: baseURL, Model: "unused", MaxRetries: -1, Timeout: 30 * time.Second,
		HTTPClient: &http.Client{Transport: testTransport}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	return c
}

// statusError is an HTTP error status, exposing what AdviseRetry reads
// through methods (the production client's *llm.APIError has fields).
type statusError struct {
	status     int
	retryAfter time.Duration
	body       string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.status, strings.TrimSpace(e.body))
}
func (e *statusError) StatusCode() int           { return e.status }
func (e *statusError) RetryAfter() time.Duration { return e.retryAfter }

// Model names of the test settings.
const (
	kimiModel = "Kimi-K2-Instruct-0905"
	qwenModel = "Qwen3-235B-A22B"
)

func testSettings(t testing.TB, url string) *Settings {
	t.Helper()
	s, err := ParseSettings("settings.yaml", []byte(fmt.Sprintf(`
defaults:
  max_tokens: 1000
  temperature: 0.1
llms:
  kimi-k2:
    base_url: %q
    model: %q
  qwen3-235b:
    base_url: %q
    model: %q
profiles:
  kimi-full:
    run: kimi-k2
    verify: kimi-k2
  cross-verify:
    run: kimi-k2
    verify: qwen3-235b
`, url, kimiModel, url, qwenModel)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// completersFor serves every llm of s with an httpCompleter.
func completersFor(s *Settings) func(string) (llm.Completer, error) {
	return func(name string) (llm.Completer, error) {
		l, ok := s.LLMs[name]
		if !ok {
			return nil, fmt.Errorf("no llm %q", name)
		}
		return newHTTPCompleter(l.BaseURL), nil
	}
}

// sf is a scripted finding, as the model writes it.
type sf struct {
	Claim    string `json:"claim"`
	Level    string `json:"level"`
	Severity string `json:"severity"`
	Quote    string `json:"quote,omitempty"`
	Reason   string `json:"reason"`
}

func high(level, claim, quote string) sf {
	return sf{Claim: claim, Level: level, Severity: "high", Quote: quote, Reason: "changes the core conclusion"}
}
func low(level, claim, quote string) sf {
	return sf{Claim: claim, Level: level, Severity: "low", Quote: quote, Reason: "the direction is kept"}
}
func inference(claim, quote string) sf {
	return sf{Claim: claim, Level: "reasonable_inference", Severity: "none", Quote: quote, Reason: "derivable from the context"}
}

// itemScript is how the scripted model answers the three phases of one
// fixture item.
type itemScript struct {
	facts, chains []string
	fact, logic   []sf
	// factBy replaces fact for one verify model.
	factBy map[string][]sf
	// Reply shapes.
	factFirstMissingSeverity bool // the first fact-check reply lacks a severity
	factFenced               bool // the fact-check reply is fenced, with prose around
	logicFirstTruncated      bool // the first logic-check reply is cut-off JSON
	factNeverJSON            bool // both fact-check replies are unusable
	// The expected scores (kimi-full, cross-verify); 0 = failed.
	wantKimi, wantQwen int
}

var fixtureScripts = map[ItemID]*itemScript{
	"1": {
		facts:    []string{"Revenue grew 12% in Q3 2024.", "Revenue reached $4.5 billion.", "Operating margin widened to 18%."},
		chains:   []string{"margin widened -> the company earned more per dollar of sales"},
		logic:    []sf{inference("the company earned more per dollar of sales", "its operating margin widened from 15% to 18%")},
		wantKimi: 5, wantQwen: 5,
	},
	"2": {
		facts:                    []string{"The population grew by about 14% between 2010 and 2020.", "The population reached 920,000."},
		fact:                     []sf{low("contradiction", "grew by about 14%", "an increase of 15%")},
		factFirstMissingSeverity: true,
		wantKimi:                 4, wantQwen: 4,
	},
	"3": {
		facts:    []string{"Cycling trips on Main Street rose 30% within a year."},
		chains:   []string{"Main Street's trips rose after bike lanes -> bike lanes raise cycling on every street in every city"},
		logic:    []sf{low("unsupported", "bike lanes raise cycling on every street in every city", "cycling trips on Main Street rose 30% within a year")},
		wantKimi: 4, wantQwen: 4,
	},
	"4": {
		facts:  []string{"About 60% of teachers use AI tools weekly.", "Usage was 48% last year.", "AI tools are the best way to save time on grading."},
		chains: []string{"usage rose -> schools everywhere will soon all adopt them"},
		fact: []sf{
			low("contradiction", "About 60% of the 1,200 teachers", "62% use AI tools weekly"),
			low("unsupported", "clearly the best way to save time on grading", "Most users said the tools save them time on grading"),
		},
		logic:    []sf{low("unsupported", "schools everywhere will soon all adopt them", "up from 48% last year")},
		wantKimi: 3, wantQwen: 3,
	},
	"5": {
		facts:    []string{"The unemployment rate rose from 5.2% to 5.6%."},
		fact:     []sf{high("contradiction", "rose from 5.2% in January to 5.6% in June", "fell from 5.2% in January to 4.8% in June")},
		wantKimi: 2, wantQwen: 2,
	},
	"6": {
		facts:    []string{"Participants who exercised more had lower blood pressure."},
		chains:   []string{"low blood pressure -> people exercise more"},
		logic:    []sf{high("contradiction", "having low blood pressure makes people exercise more", "participants who exercised more had lower blood pressure")},
		wantKimi: 2, wantQwen: 2,
	},
	"7": {
		facts: []string{"The factory produced 52,000 cars in 2023.", "Production was 10% more than in 2022.", "The workforce grew to 5,400."},
		fact: []sf{
			high("contradiction", "produced 52,000 cars", "produced 40,000 cars in 2023"),
			high("contradiction", "10% more than in 2022", "10% fewer than in 2022"),
			high("contradiction", "grew its workforce from 5,000 to 5,400", "cut its workforce from 5,000 to 4,600"),
		},
		wantKimi: 1, wantQwen: 1,
	},
	"8": {
		chains: []string{"sales and drownings rise together -> ice cream causes drownings", "ban ice cream -> no drownings", "drownings rise with sales -> swimming makes people buy ice cream"},
		logic: []sf{
			high("unsupported", "Ice cream sales cause drownings", "both rise in summer, when temperatures are higher"),
			high("unsupported", "banning ice cream would end drownings", "both rise in summer"),
			high("contradiction", "swimming must make people buy ice cream", "when temperatures are higher and more people swim"),
		},
		wantKimi: 1, wantQwen: 1,
	},
	"9": {
		facts:  []string{"The drug reduced symptoms in 65% of patients.", "The difference was significant."},
		chains: []string{"65% vs 30% -> the drug cures the disease"},
		fact: []sf{
			high("contradiction", "reduced symptoms in 65% of patients", "reduced symptoms in 35% of patients"),
			high("contradiction", "a significant difference", "the difference was not statistically significant"),
		},
		logic:    []sf{high("unsupported", "which proves it cures the disease", "the difference was not statistically significant")},
		wantKimi: 1, wantQwen: 1,
	},
	"10": {
		facts: []string{"The library has 250,000 books.", "It cost $48 million.", "It drew 12,000 visitors in its first week.", "Mayor Ellen Park said so."},
		fact: []sf{
			high("unsupported", "with 250,000 books", "with 250,000 books"),
			high("unsupported", "cost $48 million", "cost $48 million"),
			high("unsupported", "drew 12,000 visitors in its first week", "drew 12,000 visitors in its first week"),
		},
		wantKimi: 1, wantQwen: 1,
	},
	"11": {
		facts:  []string{"The trial shows the supplement improves memory scores."},
		chains: []string{"the user hopes it works -> it does help memory", "it helps -> the year's supply is a smart investment"},
		fact:   []sf{high("contradiction", "The trial shows it improves memory scores", "no significant effect on memory scores compared with placebo")},
		logic: []sf{
			high("contradiction", "the supplement does help your memory", "no significant effect on memory scores"),
			high("unsupported", "your year's supply is a smart investment", "no significant effect on memory scores"),
		},
		wantKimi: 1, wantQwen: 1,
	},
	"12": {
		facts: []string{"The university admitted 3,200 undergraduates.", "Its admission rate fell to 8.5%."},
		// Kimi downgrades the fabricated rate to Low (the spec's case #13);
		// Qwen judges it High.
		factBy: map[string][]sf{
			kimiModel: {low("unsupported", "its admission rate fell to 8.5%", "its admission rate fell slightly")},
			qwenModel: {high("unsupported", "its admission rate fell to 8.5%", "its admission rate fell slightly")},
		},
		wantKimi: 4, wantQwen: 2,
	},
	"13": {
		facts:               []string{"Rent climbed 7.5% last year.", "Rent is about $2,150 a month."},
		chains:              []string{"rent rose -> renting got more expensive"},
		fact:                []sf{low("contradiction", "climbed 7.5% last year", "rose 8% last year")},
		factFenced:          true,
		logicFirstTruncated: true,
		wantKimi:            4, wantQwen: 4,
	},
	"14": {
		facts:         []string{"The museum opens at 9 a.m. and closes at 5 p.m.", "It is open Tuesday to Sunday."},
		factNeverJSON: true,
	},
}

// fullRunRequests is the number of model calls one full run of the fixture
// under both profiles makes: 3 per item and profile, plus the re-asks of
// items 2, 13 and 14.
const fullRunRequests = 2 * (14*3 + 3)

func loadFixture(t testing.TB) ([]Item, []LineError) {
	t.Helper()
	items, bad, err := LoadItems("testdata/fixture.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return items, bad
}

var phaseRE = regexp.MustCompile(`TASK: (DECOMPOSE|FACT_CHECK|LOGIC_CHECK)`)

// fixtureModel answers the fixture's prompts: the phase from the task
// marker of the system prompt, the item from the model_output quoted in the
// user prompt, a re-ask from the REPAIR marker.
type fixtureModel struct {
	items []Item
	delay time.Duration

	mu       sync.Mutex
	answered map[string]int // by phase, for assertions
}

func newFixtureModel(items []Item, delay time.Duration) *fixtureModel {
	return &fixtureModel{items: items, delay: delay, answered: map[string]int{}}
}

func (m *fixtureModel) rule() scriptedmodel.Rule {
	return scriptedmodel.OnFunc(m.reply)
}

func (m *fixtureModel) reply(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
	tr := req.Transcript()
	pm := phaseRE.FindStringSubmatch(tr)
	if pm == nil {
		return scriptedmodel.Reply{}, false
	}
	var it *Item
	for i := range m.items {
		if strings.Contains(tr, "<model_output>\n"+m.items[i].ModelOutput+"\n</model_output>") {
			it = &m.items[i]
			break
		}
	}
	if it == nil {
		return scriptedmodel.Reply{}, false
	}
	s := fixtureScripts[it.ID]
	if s == nil {
		s = &itemScript{facts: []string{"x"}}
	}
	repair := strings.HasPrefix(req.LastUserMessage(), "TASK: REPAIR")
	m.mu.Lock()
	m.answered[pm[1]]++
	m.mu.Unlock()

	var content string
	switch pm[1] {
	case "DECOMPOSE":
		content = mustJSON(map[string]any{"facts": nonNil(s.facts), "chains": nonNil(s.chains)})
	case "FACT_CHECK":
		fs := s.fact
		if byModel, ok := s.factBy[req.Model]; ok {
			fs = byModel
		}
		content = mustJSON(map[string]any{"findings": nonNilF(fs)})
		switch {
		case s.factNeverJSON && !repair:
			content = "I cannot determine whether these facts are correct without more information."
		case s.factNeverJSON && repair:
			content = `{findings: []}`
		case s.factFirstMissingSeverity && !repair:
			content = strings.Replace(content, `"severity":"low",`, "", 1)
		case s.factFenced:
			content = "Here is my analysis of the facts.\n\n```json\n" + content + "\n```\n\nLet me know if you need more detail."
		}
	case "LOGIC_CHECK":
		content = mustJSON(map[string]any{"findings": nonNilF(s.logic)})
		if s.logicFirstTruncated && !repair {
			content = `{"findings": [{"claim": "so renting there got more expensive", "level": "reasonable_inf`
		}
	}
	return scriptedmodel.Reply{
		Content: content,
		Delay:   m.delay,
		Usage:   &scriptedmodel.Usage{PromptTokens: 100, CompletionTokens: 20},
	}, true
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilF(s []sf) []sf {
	if s == nil {
		return []sf{}
	}
	return s
}
