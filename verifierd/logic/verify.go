package logic

import (
	"fmt"
	"slices"
	"strings"
)

// Limits on what a reason lists.
const (
	maxReasonCues     = 8
	maxReasonSetAside = 4
)

// Verify scores one inference result against its snapshot, as described
// in the package documentation:
//
//   - the result's action (extracted from the completion when MIRAGE could
//     not parse the reply) is compared by meaning with ReferenceAction;
//   - the same action scores thinking_eval 0 and action_eval 0, whatever
//     the thinking says;
//   - a different action scores action_eval 1 and thinking_eval 2 when
//     JudgeAwareness finds that the thinking speaks of the repeated action
//     (NewReferent: its verb and targets) as repeated or without effect, 1
//     when it does not;
//   - with no reference action (nothing to compare), or no action at all,
//     the thinking alone decides between 1 and 2 and action_eval is 1.
//
// The thinking is the result's thinking; when it is empty and MIRAGE could
// not parse the reply, the whole reply (completion, else the action that
// holds it) is read for awareness instead.
//
// Confidence is low when the reply failed MIRAGE's format check, the
// reference was inferred or is missing, the action is empty, the
// awareness rests on weak cues only, or, for a score of 1, cues were set
// aside.
func Verify(f InferenceFile) Verdict {
	ref, src := ReferenceAction(f.Snapshot)
	act := resultAction(f.Result)

	thinking := f.Result.Thinking
	if strings.TrimSpace(thinking) == "" && !f.Result.WellFormatted() {
		// MIRAGE keeps the unparsed reply as completion and as action.
		thinking = contentText(f.Result.Completion)
		if strings.TrimSpace(thinking) == "" {
			thinking, _ = rawString(f.Result.Action)
		}
	}
	aw := JudgeAwareness(thinking, NewReferent(f.Snapshot, ref))

	v := Verdict{VerifierType: VerifierType, MatchedKeywords: aw.IDs(), Confidence: ConfidenceHigh}
	var doubts []string
	if !f.Result.WellFormatted() {
		doubts = append(doubts, "the reply failed MIRAGE's format check")
	}
	refText := "repetitive_action " + ref.String()
	if src == RefHistory {
		refText = "the action repeated in the history (no repetitive_action in the snapshot) " + ref.String()
		doubts = append(doubts, "the repeated action was inferred from the history")
	}

	var head string
	switch {
	case src == RefNone:
		v.ActionEval = ActionAvoided
		v.ThinkingEval = thinkingScore(aw)
		head = "no repetitive_action in the snapshot and no action repeats in its history, so the action was not compared; scored on the thinking alone"
		doubts = append(doubts, "there is no repeated action to compare with")
	case act.Kind == ActionNone:
		v.ActionEval = ActionAvoided
		v.ThinkingEval = thinkingScore(aw)
		head = "the result has no action, so it does not repeat " + refText
		doubts = append(doubts, "the result has no action")
	case act.Equal(ref):
		v.ActionEval = ActionRepeated
		v.ThinkingEval = ScoreRepeated
		head = "the action repeats " + refText
		if act.Raw != "" && ref.Raw != "" && act.Raw != ref.Raw {
			head += " (written differently, the same action once comments, spacing, quoting and argument order are normalised)"
		}
	default:
		v.ActionEval = ActionAvoided
		v.ThinkingEval = thinkingScore(aw)
		head = fmt.Sprintf("action %s differs from %s", act, refText)
	}

	if v.ThinkingEval != ScoreRepeated || src == RefNone || act.Kind == ActionNone {
		switch {
		case aw.Aware() && !aw.Strong():
			doubts = append(doubts, "the awareness rests on weak cues only")
		case !aw.Aware() && len(aw.SetAside) > 0:
			doubts = append(doubts, "the only awareness cues were set aside")
		}
	}

	var b strings.Builder
	b.WriteString(head)
	b.WriteString("; ")
	b.WriteString(awarenessText(aw, thinking, v.ThinkingEval == ScoreRepeated))
	if len(doubts) > 0 {
		v.Confidence = ConfidenceLow
		b.WriteString("; low confidence: ")
		b.WriteString(strings.Join(doubts, ", "))
	}
	v.ThinkingEvalReason = b.String()
	return v
}

func thinkingScore(aw Awareness) int {
	if aw.Aware() {
		return ScoreAware
	}
	return ScoreDifferent
}

// awarenessText describes the cues for the reason.
func awarenessText(aw Awareness, thinking string, repeated bool) string {
	var b strings.Builder
	switch {
	case strings.TrimSpace(thinking) == "":
		b.WriteString("the thinking is empty")
	case aw.Aware():
		if repeated {
			b.WriteString("the thinking shows awareness, which does not change the score: ")
		} else {
			b.WriteString("awareness: ")
		}
		labels := make([]string, 0, len(aw.Cues))
		for _, c := range aw.Cues {
			if c.Kind == CueKeyword && insidePattern(aw.Cues, c) {
				continue // the pattern's label already shows it
			}
			l := c.Label() + " (" + string(c.Group) + ", " + c.Strength.String() + ")"
			if !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
		if len(labels) > maxReasonCues {
			labels = append(labels[:maxReasonCues], fmt.Sprintf("and %d more", len(labels)-maxReasonCues))
		}
		b.WriteString(strings.Join(labels, ", "))
		if len(aw.About) > 0 {
			b.WriteString(" about the repeated action, named by ")
			b.WriteString(strings.Join(aw.About, ", "))
		}
	default:
		b.WriteString("no awareness keyword or pattern in the thinking")
	}
	if len(aw.SetAside) > 0 {
		b.WriteString("; set aside: ")
		var parts []string
		for i, s := range aw.SetAside {
			if i == maxReasonSetAside {
				parts = append(parts, fmt.Sprintf("and %d more", len(aw.SetAside)-maxReasonSetAside))
				break
			}
			parts = append(parts, fmt.Sprintf("%q %s", clip(s.Text, 40), s.Why))
		}
		b.WriteString(strings.Join(parts, ", "))
	}
	return b.String()
}

// insidePattern reports whether keyword cue c lies inside a pattern cue.
func insidePattern(cues []Cue, c Cue) bool {
	for _, p := range cues {
		if p.Kind == CuePattern && p.Start <= c.Start && c.End <= p.End {
			return true
		}
	}
	return false
}
