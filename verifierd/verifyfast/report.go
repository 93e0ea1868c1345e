package verifyfast

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// CrossBandTarget is the spec's target: cross-band confusion below 5%.
const CrossBandTarget = 0.05

// Ratio is a count out of a total, with the rate N/Of (0 when Of is 0).
type Ratio struct {
	N    int     `json:"n"`
	Of   int     `json:"of"`
	Rate float64 `json:"rate"`
}

func ratio(n, of int) Ratio {
	r := Ratio{N: n, Of: of}
	if of > 0 {
		r.Rate = float64(n) / float64(of)
	}
	return r
}

// Percent formats the rate as "70%" or "66.7%", "n/a" for an empty total.
func (r Ratio) Percent() string {
	if r.Of == 0 {
		return "n/a"
	}
	return trimPct(r.Rate*100) + "%"
}

func trimPct(p float64) string {
	s := strconv.FormatFloat(p, 'f', 1, 64)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s
}

// String formats the ratio as "14/20 = 70%".
func (r Ratio) String() string { return fmt.Sprintf("%d/%d = %s", r.N, r.Of, r.Percent()) }

// ZoneMatrix is the 3×3 zone confusion matrix: Counts[expected][actual],
// rows and columns in the order of Zones (BAD, MID, GOOD).
type ZoneMatrix struct {
	Zones  [3]Zone   `json:"zones"`
	Counts [3][3]int `json:"counts"`
}

// Get returns the count of results expected in one zone and scored in
// another.
func (m ZoneMatrix) Get(expected, actual Zone) int {
	i, j := expected.Index(), actual.Index()
	if i < 0 || j < 0 {
		return 0
	}
	return m.Counts[i][j]
}

// Case is one scored result, as listed among the cross-band cases.
type Case struct {
	ID            ItemID `json:"id"`
	Tag           Tag    `json:"tag"`
	ExpectedScore int    `json:"expected_credit_score"`
	Score         int    `json:"credit_score"`
	ExpectedZone  Zone   `json:"expected_zone"`
	Zone          Zone   `json:"zone"`
}

// FailedItem is a result that could not be scored, with its reasons.
type FailedItem struct {
	ID     ItemID   `json:"id"`
	Tag    Tag      `json:"tag"`
	Errors []string `json:"errors"`
}

// TagReport is the results of one tag within a profile.
type TagReport struct {
	Tag Tag `json:"tag"`
	// ExpectedScore is the tag table's score; 0 for a tag outside it.
	ExpectedScore int   `json:"expected_score,omitempty"`
	Items         int   `json:"items"`  // results, failed included
	Failed        int   `json:"failed"` // results not scored
	ZoneAccuracy  Ratio `json:"zone_accuracy"`
	ExactMatch    Ratio `json:"exact_match"`
	WithinOne     Ratio `json:"within_one"`
	CrossBand     int   `json:"cross_band"`
	// Scores counts the actual credit scores: Scores[0] is score 1.
	Scores [5]int `json:"scores"`
}

// ProfileReport is the evaluation of one profile.
//
// The rates are over the scored results: failed results (with errors) are
// not guessed into the matrix; they are counted in Failed and listed in
// FailedItems.
type ProfileReport struct {
	Profile string `json:"profile"`
	Items   int    `json:"items"`  // results, failed included
	Scored  int    `json:"scored"` // results in the matrix
	Failed  int    `json:"failed"`

	Matrix       ZoneMatrix `json:"matrix"`
	ZoneAccuracy Ratio      `json:"zone_accuracy"`
	// CrossBand is (BAD→GOOD + GOOD→BAD) / scored.
	CrossBand Ratio `json:"cross_band"`
	// CrossBandTargetMet: CrossBand.Rate < CrossBandTarget (false with
	// nothing scored).
	CrossBandTargetMet bool  `json:"cross_band_target_met"`
	ExactMatch         Ratio `json:"exact_match"`
	WithinOne          Ratio `json:"within_one"` // |score − expected| ≤ 1

	Tags       []TagReport `json:"tags"`
	Tokens     Tokens      `json:"tokens"` // failed results included
	DurationMS int64       `json:"duration_ms"`

	CrossBandCases []Case       `json:"cross_band_cases"`
	FailedItems    []FailedItem `json:"failed_items"`
}

// Report is the evaluation of a results file, one ProfileReport per profile
// in name order. It marshals to JSON as is.
type Report struct {
	Profiles []ProfileReport `json:"profiles"`
	// SkippedLines are the results lines that could not be read; BuildReport
	// leaves it empty for the caller to fill from ReadResults.
	SkippedLines []LineError `json:"skipped_lines,omitempty"`
}

// BuildReport evaluates results per profile. A result that claims no errors
// but whose credit_score or expected_credit_score is outside 1..5 is treated
// as failed, with that reason.
func BuildReport(results []Result) Report {
	byProfile := map[string][]Result{}
	for _, r := range results {
		byProfile[r.Profile] = append(byProfile[r.Profile], r)
	}
	names := make([]string, 0, len(byProfile))
	for n := range byProfile {
		names = append(names, n)
	}
	slices.Sort(names)
	rep := Report{Profiles: make([]ProfileReport, 0, len(names))}
	for _, n := range names {
		rep.Profiles = append(rep.Profiles, buildProfile(n, byProfile[n]))
	}
	return rep
}

type tally struct{ scored, zoneOK, exact, within, cross int }

func (t *tally) add(expected, score int) {
	t.scored++
	ez, az := ZoneOf(expected), ZoneOf(score)
	if ez == az {
		t.zoneOK++
	}
	if expected == score {
		t.exact++
	}
	if d := expected - score; d >= -1 && d <= 1 {
		t.within++
	}
	if CrossBand(ez, az) {
		t.cross++
	}
}

func buildProfile(name string, results []Result) ProfileReport {
	p := ProfileReport{
		Profile:        name,
		Matrix:         ZoneMatrix{Zones: [3]Zone{ZoneBad, ZoneMid, ZoneGood}},
		CrossBandCases: []Case{},
		FailedItems:    []FailedItem{},
	}
	var all tally
	tags := map[Tag]*TagReport{}
	tagTally := map[Tag]*tally{}
	var tagOrder []Tag
	for _, r := range results {
		p.Items++
		p.Tokens = p.Tokens.Add(r.Tokens)
		p.DurationMS += r.DurationMS
		tr := tags[r.Tag]
		if tr == nil {
			tr = &TagReport{Tag: r.Tag}
			tr.ExpectedScore, _ = r.Tag.ExpectedScore()
			tags[r.Tag] = tr
			tagTally[r.Tag] = &tally{}
			tagOrder = append(tagOrder, r.Tag)
		}
		tr.Items++

		errs := r.Errors
		if len(errs) == 0 {
			if ZoneOf(r.CreditScore) == ZoneNone {
				errs = []string{fmt.Sprintf("credit_score %d is outside 1..5", r.CreditScore)}
			} else if ZoneOf(r.ExpectedCreditScore) == ZoneNone {
				errs = []string{fmt.Sprintf("expected_credit_score %d is outside 1..5", r.ExpectedCreditScore)}
			}
		}
		if len(errs) > 0 {
			p.Failed++
			tr.Failed++
			p.FailedItems = append(p.FailedItems, FailedItem{ID: r.ID, Tag: r.Tag, Errors: slices.Clone(errs)})
			continue
		}
		ez, az := ZoneOf(r.ExpectedCreditScore), ZoneOf(r.CreditScore)
		p.Matrix.Counts[ez.Index()][az.Index()]++
		all.add(r.ExpectedCreditScore, r.CreditScore)
		tagTally[r.Tag].add(r.ExpectedCreditScore, r.CreditScore)
		tr.Scores[r.CreditScore-1]++
		if CrossBand(ez, az) {
			tr.CrossBand++
			p.CrossBandCases = append(p.CrossBandCases, Case{
				ID: r.ID, Tag: r.Tag, ExpectedScore: r.ExpectedCreditScore, Score: r.CreditScore,
				ExpectedZone: ez, Zone: az,
			})
		}
	}
	p.Scored = all.scored
	p.ZoneAccuracy = ratio(all.zoneOK, all.scored)
	p.CrossBand = ratio(all.cross, all.scored)
	p.CrossBandTargetMet = all.scored > 0 && p.CrossBand.Rate < CrossBandTarget
	p.ExactMatch = ratio(all.exact, all.scored)
	p.WithinOne = ratio(all.within, all.scored)

	// Tags in the spec's table order, then any others by name.
	rank := func(t Tag) int {
		if i := slices.Index(Tags(), t); i >= 0 {
			return i
		}
		return len(tagTable)
	}
	slices.SortFunc(tagOrder, func(a, b Tag) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return cmp.Compare(a, b)
	})
	p.Tags = make([]TagReport, 0, len(tagOrder))
	for _, t := range tagOrder {
		tr, tt := tags[t], tagTally[t]
		tr.ZoneAccuracy = ratio(tt.zoneOK, tt.scored)
		tr.ExactMatch = ratio(tt.exact, tt.scored)
		tr.WithinOne = ratio(tt.within, tt.scored)
		p.Tags = append(p.Tags, *tr)
	}
	return p
}

// Profile returns the report of the named profile.
func (r Report) Profile(name string) (ProfileReport, bool) {
	for _, p := range r.Profiles {
		if p.Profile == name {
			return p, true
		}
	}
	return ProfileReport{}, false
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
