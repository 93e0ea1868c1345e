// Package modelchecktest serves `vera model check`'s requests from the
// server-family fixtures of package scriptedmodel, for the tests of
// package modelcheck and of the command. It is for tests only.
package modelchecktest

import (
	"strings"
	"testing"

	"github.com/vera-run/vera/internal/modelcheck"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// FixtureServer answers each check's request with a fixture of one server
// family: cases maps a check name to the fixture case. A check without a
// case gets no answer (a miss).
func FixtureServer(t *testing.T, family string, cases map[string]string) *scriptedmodel.Server {
	t.Helper()
	replies := map[string]scriptedmodel.Reply{}
	for check, name := range cases {
		replies[check] = scriptedmodel.MustFixture(family, name).Reply()
	}
	return scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(r scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		reply, ok := replies[CheckOf(r)]
		return reply, ok
	})))
}

// CheckOf tells which check sent r, from what each check's request holds.
func CheckOf(r scriptedmodel.Request) string {
	switch {
	case r.Stream:
		return modelcheck.CheckStreaming
	case len(r.Tools) > 0:
		return modelcheck.CheckTools
	case r.ResponseFormat != nil:
		return modelcheck.CheckStructured
	case r.Temperature != nil:
		return modelcheck.CheckSampling
	case strings.Contains(r.LastUserMessage(), modelcheck.ReasoningQuestion):
		return modelcheck.CheckReasoning
	}
	return modelcheck.CheckCompletion
}
