package eval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// LineError is one problem of an input file, at a line (0 when it
// concerns the whole file). It prints like a compiler's message:
//
//	tasks.jsonl:12: scorer "exactt": want exact, contains, regex, numeric or judge
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// LineErrors is every problem found in a file, in line order, one per
// line of the message. The parsers return it as their error; errors.As
// finds it.
type LineErrors []*LineError

func (es LineErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As and errors.Is see each LineError.
func (es LineErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// maxTaskLine bounds one line of a task set (a task with a long reference).
const maxTaskLine = 16 << 20

// taskIDRE is what a task id may be.
var taskIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// scorerKinds are the scorer kinds, in the order messages list them.
var scorerKinds = []string{ScorerExact, ScorerContains, ScorerRegex, ScorerNumeric, ScorerJudge}

const scorerKindsText = "exact, contains, regex, numeric or judge"

// taskLine is a task line as written; every member is checked.
type taskLine struct {
	ID       *string         `json:"id"`
	Task     *string         `json:"task"`
	InputDir *string         `json:"input_dir"`
	Answer   *string         `json:"answer"`
	Scorer   json.RawMessage `json:"scorer"`
	Tags     []string        `json:"tags"`
}

// scorerObject is the object form of a task line's scorer.
type scorerObject struct {
	Type          *string  `json:"type"`
	CaseSensitive *bool    `json:"case_sensitive"`
	Tolerance     *float64 `json:"tolerance"`
	RelTolerance  *float64 `json:"rel_tolerance"`
	Rubric        *string  `json:"rubric"`
}

// ParseTasks reads a task set: JSONL, one task per line; blank lines and
// lines whose first non-blank character is # are skipped. name prefixes
// the messages ("tasks.jsonl:12: …").
//
// Each line is a JSON object with the members:
//
//   - id (required): unique in the set, 1-64 of A-Z a-z 0-9 . _ -;
//   - task (required): the task text given to the agent;
//   - input_dir (optional): a directory mounted read-only at /input, kept
//     as written (ParseTaskFile resolves a relative one);
//   - answer (required): the reference answer — for the regex scorer an
//     RE2 pattern, for the numeric scorer a number (1,234.5, 12%, -3e2,
//     $40: thousands separators, a leading $ and a trailing % are
//     stripped);
//   - scorer (optional): a kind ("exact", "contains", "regex", "numeric",
//     "judge") or an object {"type", "case_sensitive", "tolerance",
//     "rel_tolerance", "rubric"}; absent means "exact";
//   - tags (optional): a list of non-empty strings.
//
// Unknown members are errors (a misspelt member would silently do
// nothing). Every line is checked before ParseTasks returns: the error is
// a LineErrors listing every bad line. A set without any task is an error.
func ParseTasks(r io.Reader, name string) ([]Task, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		tasks []Task
		errs  LineErrors
		seen  = map[string]int{}
	)
	fail := func(line int, format string, args ...any) {
		errs = append(errs, &LineError{File: name, Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	for lineNo := 1; ; lineNo++ {
		raw, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				fail(lineNo, "line longer than %d MiB", maxTaskLine>>20)
				// The rest of the file cannot be numbered reliably.
				return nil, errs
			}
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if len(raw) > 0 || err == nil {
			trimmed := bytes.TrimSpace(raw)
			if len(trimmed) > 0 && trimmed[0] != '#' {
				t, problems := parseTaskLine(trimmed)
				for _, p := range problems {
					fail(lineNo, "%s", p)
				}
				if len(problems) == 0 {
					t.Line = lineNo
					if first, dup := seen[t.ID]; dup {
						fail(lineNo, "id %q is already used on line %d", t.ID, first)
					} else {
						seen[t.ID] = lineNo
						tasks = append(tasks, t)
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(tasks) == 0 {
		return nil, LineErrors{{File: name, Msg: "no tasks (every line is blank or a # comment)"}}
	}
	return tasks, nil
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its line ending; at the end of
// the input it returns the last (unterminated) line with io.EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxTaskLine {
			return nil, errLineTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, err
	}
}

// parseTaskLine decodes and checks one task line; problems lists every
// fault found.
func parseTaskLine(line []byte) (Task, []string) {
	var (
		tl       taskLine
		problems []string
	)
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tl); err != nil {
		return Task{}, []string{jsonProblem(err, "task")}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Task{}, []string{"more after the JSON object (one task per line)"}
	}
	var t Task
	switch {
	case tl.ID == nil:
		problems = append(problems, "id missing")
	case !taskIDRE.MatchString(*tl.ID):
		problems = append(problems, fmt.Sprintf("id %q: want 1-64 letters, digits, '.', '_' or '-'", *tl.ID))
	default:
		t.ID = *tl.ID
	}
	if tl.Task == nil || strings.TrimSpace(*tl.Task) == "" {
		problems = append(problems, "task missing or empty")
	} else {
		t.Task = *tl.Task
	}
	if tl.InputDir != nil {
		if strings.TrimSpace(*tl.InputDir) == "" {
			problems = append(problems, "input_dir is empty (leave it out for no input)")
		} else if strings.ContainsRune(*tl.InputDir, 0) {
			problems = append(problems, "input_dir holds a NUL byte")
		} else {
			t.InputDir = *tl.InputDir
		}
	}
	spec, sp := parseScorerSpec(tl.Scorer)
	problems = append(problems, sp...)
	t.Scorer = spec
	if tl.Answer == nil {
		problems = append(problems, "answer missing (the reference answer)")
	} else if strings.TrimSpace(*tl.Answer) == "" {
		problems = append(problems, "answer is empty")
	} else {
		t.Answer = *tl.Answer
		if len(sp) == 0 {
			if p := checkReference(spec, t.Answer); p != "" {
				problems = append(problems, p)
			}
		}
	}
	for i, tag := range tl.Tags {
		if strings.TrimSpace(tag) == "" {
			problems = append(problems, fmt.Sprintf("tags[%d] is empty", i))
		}
	}
	t.Tags = tl.Tags
	return t, problems
}

// jsonProblem words a decoding error of a line.
func jsonProblem(err error, what string) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not a JSON object: %v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("%s: want %s, got a JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want a JSON object (one %s per line), got a JSON %s", what, te.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return "unknown member " + f
	}
	return msg
}

// parseScorerSpec reads a scorer member: absent (exact), a kind, or an
// object.
func parseScorerSpec(raw json.RawMessage) (ScorerSpec, []string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ScorerSpec{Type: ScorerExact}, nil
	}
	if raw[0] == '"' {
		var kind string
		if err := json.Unmarshal(raw, &kind); err != nil {
			return ScorerSpec{}, []string{"scorer: " + jsonProblem(err, "scorer")}
		}
		if !validKind(kind) {
			return ScorerSpec{}, []string{fmt.Sprintf("scorer %q: want %s", kind, scorerKindsText)}
		}
		return ScorerSpec{Type: kind}, nil
	}
	if raw[0] != '{' {
		return ScorerSpec{}, []string{fmt.Sprintf("scorer: want a kind (%s) or an object {\"type\": …}", scorerKindsText)}
	}
	var so scorerObject
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&so); err != nil {
		return ScorerSpec{}, []string{"scorer: " + jsonProblem(err, "scorer")}
	}
	var problems []string
	var spec ScorerSpec
	switch {
	case so.Type == nil:
		problems = append(problems, fmt.Sprintf("scorer: type missing (%s)", scorerKindsText))
	case !validKind(*so.Type):
		problems = append(problems, fmt.Sprintf("scorer %q: want %s", *so.Type, scorerKindsText))
	default:
		spec.Type = *so.Type
	}
	if so.CaseSensitive != nil {
		spec.CaseSensitive = *so.CaseSensitive
		if spec.Type != "" && spec.Type != ScorerExact && spec.Type != ScorerContains {
			problems = append(problems, fmt.Sprintf("scorer: case_sensitive applies to exact and contains, not %s", spec.Type))
		}
	}
	for _, tol := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"tolerance", so.Tolerance, &spec.Tolerance}, {"rel_tolerance", so.RelTolerance, &spec.RelTolerance}} {
		if tol.v == nil {
			continue
		}
		switch {
		case spec.Type != "" && spec.Type != ScorerNumeric:
			problems = append(problems, fmt.Sprintf("scorer: %s applies to numeric, not %s", tol.name, spec.Type))
		case *tol.v < 0 || math.IsInf(*tol.v, 0):
			problems = append(problems, fmt.Sprintf("scorer: %s %v: want 0 or more", tol.name, *tol.v))
		default:
			*tol.dst = *tol.v
		}
	}
	if so.Rubric != nil {
		switch {
		case spec.Type != "" && spec.Type != ScorerJudge:
			problems = append(problems, fmt.Sprintf("scorer: rubric applies to judge, not %s", spec.Type))
		case strings.TrimSpace(*so.Rubric) == "":
			problems = append(problems, "scorer: rubric is empty (leave it out for the default)")
		default:
			spec.Rubric = *so.Rubric
		}
	}
	return spec, problems
}

func validKind(k string) bool {
	for _, s := range scorerKinds {
		if k == s {
			return true
		}
	}
	return false
}

// checkReference checks that a reference answer suits its scorer.
func checkReference(spec ScorerSpec, answer string) string {
	switch spec.Type {
	case ScorerRegex:
		if _, err := regexp.Compile(answer); err != nil {
			return fmt.Sprintf("answer: not a valid regular expression (RE2) for the regex scorer: %v", err)
		}
	case ScorerNumeric:
		if _, err := ParseNumber(answer); err != nil {
			return fmt.Sprintf("answer %q: the numeric scorer needs a number: %v", answer, err)
		}
	}
	return ""
}

// ParseNumber parses a numeric reference: an optional sign, an optional
// leading $, digits with optional thousands separators (1,234.5), an
// optional exponent (-3e2) and an optional trailing %, which is dropped
// (12% is 12). Surrounding blanks are ignored.
func ParseNumber(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(t, "%")
	t = strings.TrimSpace(t)
	sign := ""
	if strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
		sign, t = t[:1], t[1:]
	} else if strings.HasPrefix(t, "\u2212") { // minus sign
		sign, t = "-", t[len("\u2212"):]
	}
	t = strings.TrimPrefix(t, "$")
	if strings.Contains(t, ",") {
		if !thousandsRE.MatchString(t) {
			return 0, errors.New("commas must separate thousands (1,234.5)")
		}
		t = strings.ReplaceAll(t, ",", "")
	}
	if t == "" || strings.ContainsAny(t, " \t_") || strings.HasPrefix(t, "+") || strings.HasPrefix(t, "-") {
		return 0, errors.New("not a number")
	}
	lower := strings.ToLower(t)
	if strings.Contains(lower, "inf") || strings.Contains(lower, "nan") || strings.HasPrefix(lower, "0x") {
		return 0, errors.New("not a finite decimal number")
	}
	v, err := strconv.ParseFloat(sign+t, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errors.New("not a number")
	}
	return v, nil
}

var thousandsRE = regexp.MustCompile(`^\d{1,3}(,\d{3})+(\.\d+)?([eE][-+]?\d+)?$`)

// ParseTaskFile reads a task set file with ParseTasks (messages are
// prefixed with path as given) and returns its tasks and the SHA-256 of
// its bytes in lowercase hex (EvalStarted.TaskSetSHA256). A relative
// input_dir is resolved against the file's directory and made absolute;
// every input_dir must be an existing directory (a missing one is
// reported at its line, with the others).
func ParseTaskFile(path string) ([]Task, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read the task set: %w", err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	tasks, err := ParseTasks(bytes.NewReader(data), path)
	if err != nil {
		return nil, "", err
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, "", fmt.Errorf("task set %s: %w", path, err)
	}
	var errs LineErrors
	for i := range tasks {
		t := &tasks[i]
		if t.InputDir == "" {
			continue
		}
		dir := t.InputDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(base, dir)
		}
		dir = filepath.Clean(dir)
		fi, err := os.Stat(dir)
		switch {
		case err != nil:
			errs = append(errs, &LineError{File: path, Line: t.Line, Msg: fmt.Sprintf("input_dir %q: %v", t.InputDir, statProblem(err))})
		case !fi.IsDir():
			errs = append(errs, &LineError{File: path, Line: t.Line, Msg: fmt.Sprintf("input_dir %q: %s is not a directory", t.InputDir, dir)})
		default:
			t.InputDir = dir
		}
	}
	if len(errs) > 0 {
		return nil, "", errs
	}
	return tasks, digest, nil
}

func statProblem(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		if errors.Is(err, os.ErrNotExist) {
			return pe.Path + " does not exist"
		}
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}
