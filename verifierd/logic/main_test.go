package logic

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus/bustest"
)

// TestMain fails the package's tests if any leaves a goroutine behind
// (a consumer, a bus read, an HTTP connection to the scripted model).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
