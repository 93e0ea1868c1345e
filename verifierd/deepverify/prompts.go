package deepverify

import (
	"bytes"
	"embed"
	"strings"
	"text/template"

	"github.com/vera-run/vera/bus/catalog"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

var prompts = template.Must(template.New("").Funcs(template.FuncMap{
	"join": strings.Join,
}).ParseFS(promptFS, "prompts/*.tmpl"))

// SystemPrompt is the Auditor persona's system prompt.
func SystemPrompt() string { return mustRender("system.tmpl", nil) }

// DecomposeInput is the data of the decomposition prompt.
type DecomposeInput struct {
	Round         int
	Task          string
	Answer        string
	CandidateStep int
	Notes         string
	Evidence      []catalog.EvidenceRecorded
}

// CheckCall is one command a check ran, with its output as the check's
// model sees it.
type CheckCall struct {
	Command  string
	ExitCode int
	Output   string
}

// CheckInput is the data of one check-loop step prompt.
type CheckInput struct {
	CheckID    string
	Step       int // 1-based model step of the loop
	MaxSteps   int
	Task       string
	Answer     string
	Question   string
	Source     string
	Calls      []CheckCall
	MustDecide bool
}

// JudgeInput is the data of the judge prompt.
type JudgeInput struct {
	Round        int
	Task         string
	Answer       string
	Summary      []catalog.AuditFinding
	LikelyErrors []catalog.LikelyError
	Checks       []catalog.AuditCheck
}

// RenderDecompose renders the decomposition prompt.
func RenderDecompose(in DecomposeInput) string { return mustRender("decompose.tmpl", in) }

// RenderCheck renders a check-loop step prompt.
func RenderCheck(in CheckInput) string { return mustRender("check.tmpl", in) }

// RenderJudge renders the judge prompt.
func RenderJudge(in JudgeInput) string { return mustRender("judge.tmpl", in) }

func mustRender(name string, data any) string {
	var b bytes.Buffer
	if err := prompts.ExecuteTemplate(&b, name, data); err != nil {
		panic("deepverify: prompt " + name + ": " + err.Error()) // templates are embedded and tested
	}
	return strings.TrimSpace(b.String())
}
