package logic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Errors of LoadFile and ParseFile; the returned errors wrap one of them.
var (
	// ErrMalformed: the file is not a well-formed MIRAGE inference result.
	ErrMalformed = errors.New("malformed inference file")
	// ErrNoResult: the file is a snapshot without a result; run MIRAGE's
	// inference on it first.
	ErrNoResult = errors.New(`no "result"`)
	// ErrInferenceFailed: the result records a failed model call.
	ErrInferenceFailed = errors.New("inference failed")
)

// LoadFile reads one MIRAGE inference-result file. Errors name the file.
func LoadFile(path string) (InferenceFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return InferenceFile{}, err // "open PATH: no such file or directory"
		}
		return InferenceFile{}, fmt.Errorf("%s: %w", path, err)
	}
	f, err := ParseFile(data)
	if err != nil {
		return InferenceFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// fileJSON decodes a file with the result left raw, to tell a missing
// result from a malformed one.
type fileJSON struct {
	Snapshot
	Result json.RawMessage `json:"result"`
}

// ParseFile parses the bytes of a MIRAGE inference-result file: a JSON
// object with a task_name and a result object. It decodes only what the
// verifier reads (see scan.go): the snapshot's message contents and tool
// calls stay raw and refer to data, which the caller must not change
// afterwards. A snapshot without result
// is ErrNoResult; a result with "status": "error" (MIRAGE's record of a
// failed model call) is ErrInferenceFailed.
func ParseFile(data []byte) (InferenceFile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return InferenceFile{}, fmt.Errorf("%w: the file is empty", ErrMalformed)
	}
	raw, ok := fastParse(data)
	if !ok {
		raw = fileJSON{}
		if err := json.Unmarshal(data, &raw); err != nil {
			return InferenceFile{}, describeJSONError(data, err, "")
		}
	}
	if raw.TaskName == "" {
		return InferenceFile{}, fmt.Errorf("%w: no task_name", ErrMalformed)
	}
	res := bytes.TrimSpace(raw.Result)
	if len(res) == 0 || bytes.Equal(res, []byte("null")) {
		return InferenceFile{}, fmt.Errorf("%w: this is a MIRAGE snapshot, not an inference result (run MIRAGE's inference on it first)", ErrNoResult)
	}
	if res[0] != '{' {
		return InferenceFile{}, fmt.Errorf("%w: \"result\" is %s, want an object", ErrMalformed, jsonKind(res[0]))
	}
	var r struct {
		Result
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		if ok {
			// The fast path skipped the structure inside the result:
			// locate a syntax error in the whole file, as before.
			var whole fileJSON
			if werr := json.Unmarshal(data, &whole); werr != nil {
				return InferenceFile{}, describeJSONError(data, werr, "")
			}
		}
		return InferenceFile{}, describeJSONError(res, err, "result.")
	}
	if r.Status == "error" {
		return InferenceFile{}, fmt.Errorf("%w: the result records a failed model call: %s", ErrInferenceFailed, clip(r.Error, 200))
	}
	return InferenceFile{Snapshot: raw.Snapshot, Result: r.Result}, nil
}

// describeJSONError turns a decoding error into an ErrMalformed error with
// a line and column, or the field and types that disagree. prefix is put
// before field names.
func describeJSONError(data []byte, err error, prefix string) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(data, se.Offset)
		return fmt.Errorf("%w: invalid JSON at line %d, column %d: %s", ErrMalformed, line, col, se.Error())
	case errors.As(err, &te):
		field := strings.TrimPrefix(strings.TrimPrefix(te.Field, "Snapshot."), "Result.")
		if field == "" {
			return fmt.Errorf("%w: the top-level JSON value is %s, want an object", ErrMalformed, te.Value)
		}
		return fmt.Errorf("%w: field %q is %s, want %s", ErrMalformed, prefix+field, te.Value, kindName(te.Type))
	default:
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
}

func lineCol(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	if col == 0 {
		col = 1
	}
	return line, col
}

// kindName names the JSON kind a Go type decodes.
func kindName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	default:
		return t.String()
	}
}

func jsonKind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// Entry is one file found by Walk: its path as given (or as found under a
// folder given), and the loaded file or the error that stopped it.
type Entry struct {
	Path string
	File InferenceFile
	Err  error
}

// Workers is how many files Walk, Checked and Lines read, decode and
// verify at once: every core by default.
var Workers = runtime.GOMAXPROCS(0)

// readAhead is how many results, per worker, may wait for the consumer.
const readAhead = 4

// Walk yields the inference-result files named by paths, in order: a
// file is loaded whatever its name; a folder is searched recursively for
// files whose names end in .json, which are yielded in lexical order of
// their paths. A path that cannot be read, or a file that cannot be
// loaded, is yielded with its error and the walk goes on. Files are
// loaded by Workers goroutines, a bounded number ahead of the consumer,
// and yielded in that order all the same.
func Walk(paths []string) iter.Seq[Entry] {
	return ordered(walkJobs(paths), func(e Entry) Entry { return load(e) })
}

// Checked is Walk with each entry's output line (Check), computed by the
// workers too.
func Checked(paths []string) iter.Seq2[Entry, Line] {
	type pair struct {
		e Entry
		l Line
	}
	seq := ordered(walkJobs(paths), func(e Entry) pair {
		e = load(e)
		return pair{e, Check(e)}
	})
	return func(yield func(Entry, Line) bool) {
		for p := range seq {
			if !yield(p.e, p.l) {
				return
			}
		}
	}
}

// load loads the file of a job that has no error yet.
func load(e Entry) Entry {
	if e.Err == nil {
		e.File, e.Err = LoadFile(e.Path)
	}
	return e
}

// walkJobs lists, in output order, the files to load and the paths that
// failed already (with their error).
func walkJobs(paths []string) []Entry {
	var jobs []Entry
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			jobs = append(jobs, Entry{Path: p, Err: err})
			continue
		}
		if !info.IsDir() {
			jobs = append(jobs, Entry{Path: p})
			continue
		}
		files, errs := jsonFilesUnder(p)
		jobs = append(jobs, errs...)
		for _, f := range files {
			jobs = append(jobs, Entry{Path: f})
		}
	}
	return jobs
}

// ordered maps f over jobs with Workers goroutines and yields the results
// in the order of jobs. At most Workers*readAhead results wait for the
// consumer; when the consumer stops, no new job starts.
func ordered[T any](jobs []Entry, f func(Entry) T) iter.Seq[T] {
	return func(yield func(T) bool) {
		workers := max(1, Workers)
		if workers == 1 || len(jobs) < 2 {
			for _, j := range jobs {
				if !yield(f(j)) {
					return
				}
			}
			return
		}
		done := make(chan struct{})
		defer close(done)
		slots := make(chan chan T, workers*readAhead)
		go func() {
			defer close(slots)
			sem := make(chan struct{}, workers)
			for _, j := range jobs {
				ch := make(chan T, 1)
				select {
				case slots <- ch:
				case <-done:
					return
				}
				select {
				case sem <- struct{}{}:
				case <-done:
					return
				}
				go func() {
					defer func() { <-sem }()
					ch <- f(j)
				}()
			}
		}()
		for ch := range slots {
			if !yield(<-ch) {
				return
			}
		}
	}
}

// jsonFilesUnder lists the .json files under root, sorted, and the
// entries that could not be read.
func jsonFilesUnder(root string) ([]string, []Entry) {
	var files []string
	var errs []Entry
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, Entry{Path: path, Err: err})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(path), ".json") {
			files = append(files, path)
		}
		return nil
	})
	slices.Sort(files)
	return files, errs
}

// Line is one line of the offline verifier's output: the file as given,
// and either its task name and verdict or an error.
type Line struct {
	File           string   `json:"file"`
	TaskName       string   `json:"task_name,omitempty"`
	VerifiedResult *Verdict `json:"verified_result,omitempty"`
	Error          string   `json:"error,omitempty"`
}

// Check verifies one walked entry into an output line.
func Check(e Entry) Line {
	if e.Err != nil {
		return Line{File: e.Path, Error: e.Err.Error()}
	}
	v := Verify(e.File)
	return Line{File: e.Path, TaskName: e.File.TaskName, VerifiedResult: &v}
}

// Lines walks paths and verifies each file: the offline verifier's
// output, one Line per file, in Walk's order, computed by Workers
// goroutines. Unlike Checked it keeps no file: each is read into a
// reused buffer, verified, and the buffer goes back to the pool (a Line
// holds no reference to the file's bytes), so the run allocates little
// beyond its output.
func Lines(paths []string) iter.Seq[Line] {
	return ordered(walkJobs(paths), func(e Entry) Line {
		if e.Err != nil {
			return Check(e)
		}
		buf := bufPool.Get().(*[]byte)
		defer bufPool.Put(buf)
		var err error
		*buf, err = readInto(e.Path, (*buf)[:0])
		if err != nil {
			return Check(Entry{Path: e.Path, Err: err})
		}
		f, err := ParseFile(*buf)
		if err != nil {
			err = fmt.Errorf("%s: %w", e.Path, err)
		}
		return Check(Entry{Path: e.Path, File: f, Err: err})
	})
}

// bufPool holds the read buffers of Lines.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 128<<10); return &b }}

// readInto reads the file at path into buf (grown as needed), with the
// errors of os.ReadFile.
func readInto(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && int(info.Size())+1 > cap(buf) {
		buf = make([]byte, 0, int(info.Size())+512)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err // a *fs.PathError, as from os.ReadFile
		}
	}
}
