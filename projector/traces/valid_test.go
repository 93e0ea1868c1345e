package traces_test

import (
	"testing"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// TestBenchRunIsValid: the benchmark's run passes the schemas, so that it
// measures projection and not dead-lettering.
func TestBenchRunIsValid(t *testing.T) {
	_, bb := bustest.New(t)
	for _, ev := range benchRun(bb, "valid", 2) {
		if err := catalog.Validate(ev.Type, ev.Data); err != nil {
			t.Errorf("%s: %v", ev.Type, err)
		}
	}
}
