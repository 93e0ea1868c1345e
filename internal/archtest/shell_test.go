package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// shellReaders are the packages that read shell commands. They must read
// them through internal/shell, the one parser (mvdan.cc/sh/v3), so that
// the policy, the ledgers and the logic verifier cannot disagree about
// what a command runs.
var shellReaders = []string{"sandboxd/policy", "agents/ledger", "verifierd/logic"}

func TestShellReadersUseOneParser(t *testing.T) {
	for _, pkg := range shellReaders {
		out, err := exec.Command("go", "list", "-deps", module+"/"+pkg).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("go list %s: %v\n%s", pkg, err, ee.Stderr)
			}
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, want := range []string{module + "/internal/shell", "mvdan.cc/sh/v3/syntax"} {
			if !slices.Contains(deps, want) {
				t.Errorf("%s does not depend on %s", pkg, want)
			}
		}
	}
}
