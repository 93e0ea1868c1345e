package llm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a
// response body not closed, a stream not drained, a timer not stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
