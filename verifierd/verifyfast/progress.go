package verifyfast

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// ProgressBar returns a BatchConfig.Progress that draws a one-line bar on
// w (a terminal, usually stderr), redrawn in place with a carriage return:
//
//	[##########--------------------]  14/40  35%  1 failed
//
// and ends the line once done reaches total.
func ProgressBar(w io.Writer) func(done, total, failed int) {
	const width = 30
	var mu sync.Mutex
	ended := false
	return func(done, total, failed int) {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		filled, pct := width, 100
		if total > 0 {
			filled = min(width, done*width/total)
			pct = done * 100 / total
		}
		line := fmt.Sprintf("\r[%s%s] %*d/%d %3d%%", strings.Repeat("#", filled), strings.Repeat("-", width-filled), len(fmt.Sprint(total)), done, total, pct)
		if failed > 0 {
			line += fmt.Sprintf("  %d failed", failed)
		}
		if done >= total {
			line += "\n"
			ended = true
		}
		io.WriteString(w, line)
	}
}
