// Package browsertest starts the headless Chromium of VERA's browser
// tests (the dashboard's, the eval report's). Test-only: production code
// never imports it.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium finds a Chromium to drive: $VERA_CHROMIUM, Debian's
// /usr/bin/chromium, or one on PATH. Without one the test skips, unless
// VERA_REQUIRE_CHROMIUM=1, which makes it fail; -short skips it too
// (unless required).
func Chromium(t testing.TB) string {
	t.Helper()
	if testing.Short() && os.Getenv("VERA_REQUIRE_CHROMIUM") != "1" {
		t.Skip("browser test skipped in -short mode")
	}
	cands := []string{os.Getenv("VERA_CHROMIUM"), "/usr/bin/chromium"}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			cands = append(cands, p)
		}
	}
	for _, p := range cands {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if os.Getenv("VERA_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("VERA_REQUIRE_CHROMIUM=1 but no Chromium found (install Debian's chromium, or set VERA_CHROMIUM)")
	}
	t.Skip("no Chromium found (apt-get install chromium, or set VERA_CHROMIUM): browser test skipped; VERA_REQUIRE_CHROMIUM=1 makes this a failure")
	return ""
}

// Browser starts the headless Chromium at path (1440×1400) and returns
// its first tab; both end with the test.
func Browser(t testing.TB, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1440, 1400),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}
