package deepverify

import (
	"bytes"
	"embed"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/vera-run/vera/bus/catalog"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

var prompts = template.Must(template.New("").Funcs(template.FuncMap{
	"join": strings.Join,
}).ParseFS(promptFS, "prompts/*.tmpl"))

// SystemPrompt is the Auditor persona's system prompt.
func SystemPrompt() string { return mustRender("system.tmpl", nil) }

// MaxFileAnswerBytes caps how much of an answer submitted as a file the
// prompts carry; the check loop can read the rest from the file.
const MaxFileAnswerBytes = 64 << 10

// AnswerFile describes a candidate answer submitted as a file; the zero
// value is an answer given inline.
type AnswerFile struct {
	Path   string // the file under /work/output/
	SHA256 string // digest of its content at submit time
	Bytes  int    // size of the whole content
	Shown  int    // bytes of it the prompt carries
	Cut    bool   // the prompt carries only the first Shown bytes
}

// PromptAnswer returns the answer text the prompts carry and the file it
// was submitted as: for an answer given inline, the text itself; for an
// answer file, its content cut to MaxFileAnswerBytes (on a rune boundary).
func PromptAnswer(req catalog.AuditRequested, content string) (string, AnswerFile) {
	if req.AnswerFile == "" {
		return content, AnswerFile{}
	}
	f := AnswerFile{Path: req.AnswerFile, SHA256: req.AnswerSHA256, Bytes: len(content), Shown: len(content)}
	if len(content) > MaxFileAnswerBytes {
		n := MaxFileAnswerBytes
		for n > 0 && !utf8.RuneStart(content[n]) {
			n--
		}
		content, f.Shown, f.Cut = content[:n], n, true
	}
	return content, f
}

// DecomposeInput is the data of the decomposition prompt.
type DecomposeInput struct {
	Round         int
	Task          string
	Answer        string
	File          AnswerFile
	CandidateStep int
	Notes         string
	Evidence      []catalog.EvidenceRecorded
	// Edits holds the request ids of evidence from the file tool (edit),
	// shown as file operations rather than shell commands.
	Edits map[string]bool
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
	File       AnswerFile
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
	File         AnswerFile
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
