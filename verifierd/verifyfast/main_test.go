package verifyfast

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus/bustest"
)

// TestMain fails the package's tests if any leaves a goroutine behind (a
// consumer, a bus read, an HTTP connection to the scripted model). The
// batch tests share testTransport, whose idle keep-alive connections are
// closed first.
func TestMain(m *testing.M) {
	code := m.Run()
	testTransport.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(bustest.LeakIgnores...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
