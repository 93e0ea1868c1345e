package deepverify

import (
	"regexp"
	"unicode/utf8"
)

// Concreteness is how concrete one corrective instruction is: the
// instruction-concreteness counters (dra_verifier_instruction_*) derive
// from it.
type Concreteness struct {
	HasURL  bool `json:"has_url"`
	HasPath bool `json:"has_path"`
	HasCmd  bool `json:"has_cmd"`
	Chars   int  `json:"chars"`
}

var (
	pathRe = regexp.MustCompile(`(?:^|[\s"'(` + "`" + `])(?:/(?:work|input|tmp|etc|usr|home|var|opt|data)(?:/[^\s"'` + "`" + `)]*)?|\.{1,2}/[^\s"'` + "`" + `)]+|~/[^\s"'` + "`" + `)]+)|\bev_\d{4,}\b|\b[\w-]+\.(?:md|jsonl|json|csv|txt|html|pdf|py|sh|xml|yaml|yml)\b`)
	cmdRe  = regexp.MustCompile("`[^`]+`" + `|(?:^|[\s"'$;|&(])(?:curl|wget|grep|rg|egrep|sed|awk|jq|cat|head|tail|ls|find|python3?|pip3?|apt-get|sort|uniq|wc|diff|lynx|w3m|pdftotext|git|xmllint|cut|tr)\s+\S`)
)

// InstructionConcreteness measures one instruction: whether it names a URL,
// a path (sandbox paths, relative paths, files, evidence ids) or a command
// (backticked, or a common CLI tool with an argument), and its length in
// characters.
func InstructionConcreteness(s string) Concreteness {
	return Concreteness{
		HasURL:  len(URLs(s)) > 0,
		HasPath: pathRe.MatchString(s),
		HasCmd:  cmdRe.MatchString(s),
		Chars:   utf8.RuneCountInString(s),
	}
}
