package deepverify

import (
	"os"
	"testing"

	"github.com/vera-run/vera/bus/bustest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "auditor" {
		os.Exit(helperAuditor())
	}
	goleak.VerifyTestMain(m, bustest.LeakIgnores...)
}
