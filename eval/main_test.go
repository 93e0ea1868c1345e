package eval

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any leaves a goroutine behind
// (an HTTP connection of the judge's model client to the scripted
// server).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
