package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// readAnswerFile completes step st, a submit that names an answer file,
// from the file's content: the answer is what the file holds when the
// model submits it, read through sandboxd like any command, so that the
// read is on the stream (and recorded as evidence) and every worker
// derives the same answer from it.
//
// It publishes the read, a shell vera.tool.requested (request id
// AnswerRequestID, command cat -- 'FILE', in a fresh shell at /work),
// when the run does not hold it yet, and then waits (wait true) for its
// vera.tool.finished. With the result, st gets RequestID, and either the
// answer (Answer inline when small, else AnswerBlob) with its
// AnswerSHA256, or, when the file could not be read (a failed cat, an
// empty file, content that is not UTF-8 text), no digest: the submit
// failed, and the step's observation says why.
func (a *Agent) readAnswerFile(ctx context.Context, v *runView, st *catalog.AgentStep, cause string) (wait bool, err error) {
	reqID := AnswerRequestID(st.Step)
	st.RequestID = reqID
	if _, ok := v.requests[reqID]; !ok {
		timeout := v.config().Sandbox.ToolTimeoutMS
		if timeout <= 0 {
			timeout = DefaultToolTimeoutMS
		}
		req := catalog.ToolRequested{
			RequestID: reqID,
			Requester: catalog.RequesterAgent,
			Tool:      catalog.ToolShell,
			Command:   "cat -- " + shellQuote(st.AnswerFile),
			TimeoutMS: timeout,
			Step:      st.Step,
		}
		id := bus.DeriveID(v.runID, cause, fmt.Sprintf("agent/answer.read/%d", st.Step))
		return true, a.publish(ctx, v, req, id, cause)
	}
	r, ok := v.results[reqID]
	if !ok {
		return true, nil // waiting for sandboxd
	}
	content, ok, err := a.answerContent(ctx, st.AnswerFile, r.data)
	if err != nil || !ok {
		return false, err
	}
	sum := sha256.Sum256([]byte(content))
	st.AnswerSHA256 = hex.EncodeToString(sum[:])
	if len(content) > answerInlineMax {
		ref, err := a.Bus.PutBlob(ctx, []byte(content), "text/plain; charset=utf-8")
		if err != nil {
			return false, fmt.Errorf("store the answer file of step %d: %w", st.Step, err)
		}
		ref.Name = "answer.txt"
		st.AnswerBlob = &ref
	} else {
		st.Answer = content
	}
	return false, nil
}

// answerContent returns the whole content of the answer file a read
// returned (its stdout, from the blob when it was too big to be inline);
// ok is false when the read says there is no answer (see answerProblem,
// and content that is incomplete or not UTF-8). An error is one of the
// object store: the delivery is retried.
func (a *Agent) answerContent(ctx context.Context, file string, f catalog.ToolFinished) (content string, ok bool, err error) {
	if answerProblem(file, f) != "" {
		return "", false, nil
	}
	if f.Stdout.Blob == nil {
		return f.Stdout.Head, true, nil
	}
	data, err := a.Bus.GetBlob(ctx, f.Stdout.Blob.Digest)
	if errors.Is(err, bus.ErrBlobNotFound) {
		return "", false, nil // never stored: it will not appear
	}
	if err != nil {
		return "", false, fmt.Errorf("read the answer file %s: %w", file, err)
	}
	if int64(len(data)) != f.Stdout.Bytes || !utf8.Valid(data) || strings.TrimSpace(string(data)) == "" {
		return "", false, nil
	}
	return string(data), true, nil
}

// answerProblem says why the read of an answer file gives no answer, from
// the result alone: the read was refused, timed out, interrupted or
// failed (a missing file), the content is not text, was cut without its
// whole stream stored, or is empty. "" when the content is to be read.
func answerProblem(file string, f catalog.ToolFinished) string {
	stderr := strings.TrimSpace(f.Stderr.Head)
	switch {
	case f.Denied:
		return "reading " + file + " was refused (" + f.DenyRule + ")"
	case f.TimedOut:
		return "reading " + file + " timed out"
	case f.Interrupted:
		return "reading " + file + " was interrupted"
	case f.Error != "":
		return "reading " + file + " failed: " + protocol.CapText(f.Error, 200)
	case f.ExitCode != 0:
		msg := fmt.Sprintf("reading %s failed (exit code %d)", file, f.ExitCode)
		if stderr != "" {
			msg += ": " + protocol.CapText(stderr, 200)
		}
		return msg
	case f.Stdout.Encoding != "":
		return file + " is not UTF-8 text"
	case f.Stdout.Blob == nil && f.Stdout.Truncated:
		return file + " is too big: its whole content was not stored"
	case f.Stdout.Bytes == 0 || (f.Stdout.Blob == nil && strings.TrimSpace(f.Stdout.Head) == ""):
		return file + " is empty"
	}
	return ""
}

// shellQuote quotes s as one word for sh: inside single quotes, with
// each single quote of s closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
