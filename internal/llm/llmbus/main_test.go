package llmbus_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus/bustest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }
