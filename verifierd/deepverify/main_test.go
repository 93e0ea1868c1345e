package deepverify

import (
	"testing"

	"github.com/vera-run/vera/bus/bustest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }
