package bus

import (
	"fmt"
	"strings"
)

// Names of the JetStream assets VERA uses.
const (
	StreamName       = "VERA"       // every run event
	DeadLetterStream = "VERA_DLQ"   // rejected messages with their reason
	BlobBucket       = "VERA_BLOBS" // object store for big payloads

	SubjectRoot       = "vera.run" // vera.run.<run_id>.<area>.<event>
	DeadLetterSubject = "vera.dlq" // vera.dlq.<consumer>.<run_id>
)

// Subject returns the NATS subject of an event of type typ about run runID:
// vera.tool.requested on run R is vera.run.R.tool.requested.
func Subject(runID, typ string) (string, error) {
	if err := ValidateRunID(runID); err != nil {
		return "", err
	}
	if err := ValidateType(typ); err != nil {
		return "", err
	}
	return SubjectRoot + "." + runID + "." + strings.TrimPrefix(typ, "vera."), nil
}

// ParseSubject splits a run subject into its run id and event type.
func ParseSubject(subject string) (runID, typ string, err error) {
	rest, ok := strings.CutPrefix(subject, SubjectRoot+".")
	if !ok {
		return "", "", fmt.Errorf("subject %q is not under %s", subject, SubjectRoot)
	}
	runID, area, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", fmt.Errorf("subject %q has no event type", subject)
	}
	typ = "vera." + area
	if err := ValidateRunID(runID); err != nil {
		return "", "", err
	}
	if err := ValidateType(typ); err != nil {
		return "", "", err
	}
	return runID, typ, nil
}

// FilterSubject builds a subject filter for a run ("" or "*" for all runs)
// and a type pattern ("" for all types). The pattern uses NATS wildcards on
// the type's tokens: "vera.tool.*", "vera.ext.>", "vera.*.finished".
func FilterSubject(runID, typePattern string) (string, error) {
	run := runID
	if run == "" {
		run = "*"
	} else if run != "*" {
		if err := ValidateRunID(run); err != nil {
			return "", err
		}
	}
	if typePattern == "" || typePattern == ">" || typePattern == "vera.>" {
		return SubjectRoot + "." + run + ".>", nil
	}
	rest, ok := strings.CutPrefix(typePattern, "vera.")
	if !ok || rest == "" {
		return "", fmt.Errorf("%w: type pattern %q must start with \"vera.\"", ErrInvalidType, typePattern)
	}
	if area, _, _ := strings.Cut(rest, "."); area == ExtArea {
		// Outside events are stored on vera.run.<run>.ext.<identity>,
		// whatever their type: every one of them, checked by type when read.
		return SubjectRoot + "." + run + "." + ExtArea + ".>", nil
	}
	toks := strings.Split(rest, ".")
	for i, t := range toks {
		switch {
		case t == ">" && i == len(toks)-1:
		case t == "*":
		case typePattern != "" && typeTokenOK(t):
		default:
			return "", fmt.Errorf("%w: bad token %q in type pattern %q", ErrInvalidType, t, typePattern)
		}
	}
	return SubjectRoot + "." + run + "." + rest, nil
}

func typeTokenOK(t string) bool {
	if t == "" || t[0] < 'a' || t[0] > 'z' {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func deadLetterSubject(consumer, runID string) string {
	if runID == "" || ValidateRunID(runID) != nil {
		runID = "_"
	}
	return DeadLetterSubject + "." + consumer + "." + runID
}
