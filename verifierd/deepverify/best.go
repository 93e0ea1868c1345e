package deepverify

import "github.com/vera-run/vera/bus/catalog"

// Best is the best-scored round so far: the highest score, the earliest
// round on ties.
type Best struct {
	Round int
	Score int
}

// Update returns the best of b and round/score.
func (b Best) Update(round, score int) Best {
	if b.Round == 0 || score > b.Score || (score == b.Score && round < b.Round) {
		return Best{Round: round, Score: score}
	}
	return b
}

// BestOf returns the best round among judged rounds (zero when none).
func BestOf(judged []catalog.AuditJudged) Best {
	var b Best
	for _, j := range judged {
		b = b.Update(j.Round, j.Score)
	}
	return b
}
