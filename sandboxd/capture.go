package sandboxd

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"os"
	"unicode/utf8"

	"github.com/vera-run/vera/bus/catalog"
)

// capture records one output stream of a command with bounded memory: the
// first headCap bytes, a ring of the last tailCap bytes, the total count,
// and every byte (up to spoolMax) in a spool file on disk. The spool is what
// becomes the blob of a big output, and what a restarted daemon reports for
// a command that was interrupted by a crash.
type capture struct {
	headCap, tailCap int
	spoolMax         int64
	path             string // spool file, created on the first byte

	head  []byte
	ring  []byte
	rpos  int // next write position in ring
	rfull bool
	total int64
	spool *os.File
	hash  hash.Hash // of the spooled bytes, so the blob needs no second read
	err   error     // first spool error; capture goes on in memory
}

func newCapture(path string, headCap, tailCap int, spoolMax int64) *capture {
	return &capture{headCap: headCap, tailCap: tailCap, spoolMax: spoolMax, path: path}
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	if c.path != "" && c.err == nil && c.total < c.spoolMax {
		if c.spool == nil {
			c.spool, c.err = os.OpenFile(c.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			c.hash = sha256.New()
		}
		if c.err == nil {
			w := p
			if rest := c.spoolMax - c.total; int64(len(w)) > rest {
				w = w[:rest]
			}
			_, c.err = c.spool.Write(w)
			c.hash.Write(w)
		}
	}
	c.total += int64(n)
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailCap == 0 {
		return n, nil
	}
	if c.ring == nil {
		c.ring = make([]byte, c.tailCap)
	}
	if len(p) >= c.tailCap {
		copy(c.ring, p[len(p)-c.tailCap:])
		c.rpos, c.rfull = 0, true
		return n, nil
	}
	k := copy(c.ring[c.rpos:], p)
	if k < len(p) {
		copy(c.ring, p[k:])
		c.rfull = true
	}
	c.rpos = (c.rpos + len(p)) % c.tailCap
	if c.rpos == 0 && len(p) > 0 {
		c.rfull = true
	}
	return n, nil
}

// tail returns the bytes after the head, at most tailCap of them.
func (c *capture) tail() []byte {
	if !c.rfull {
		return append([]byte(nil), c.ring[:c.rpos]...)
	}
	out := make([]byte, 0, c.tailCap)
	out = append(out, c.ring[c.rpos:]...)
	return append(out, c.ring[:c.rpos]...)
}

// truncated reports whether head and tail miss part of the stream.
func (c *capture) truncated() bool { return c.total > int64(len(c.head))+int64(len(c.tail())) }

// close closes the spool file. It is not synced: a finished command's
// spool becomes a blob and is deleted; only a crash mid-command reads it
// back, and the page cache survives a daemon crash.
func (c *capture) close() error {
	if c.spool == nil {
		return c.err
	}
	err := c.spool.Close()
	c.spool = nil
	if c.err == nil {
		c.err = err
	}
	return c.err
}

// spooledDigest is the sha256 digest of the spool file's content, when the
// spool is complete (every byte written), else "".
func (c *capture) spooledDigest() string {
	if c.hash == nil || c.err != nil || c.total > c.spoolMax {
		return ""
	}
	return "sha256:" + hex.EncodeToString(c.hash.Sum(nil))
}

// output builds the event's view of the stream. blob is the reference to
// the whole spooled stream (nil when everything fits inline).
func (c *capture) output(blob *catalog.BlobRef) catalog.Output {
	out := catalog.Output{Bytes: c.total, Blob: blob}
	head, tail := c.head, c.tail()
	if !c.truncated() {
		whole := append(append([]byte(nil), head...), tail...)
		setText(&out, whole, nil)
		return out
	}
	out.Truncated = true
	// Cut at rune boundaries so text stays text.
	head = head[:validPrefix(head)]
	tail = tail[validSuffixStart(tail):]
	setText(&out, head, tail)
	return out
}

func setText(out *catalog.Output, head, tail []byte) {
	if utf8.Valid(head) && utf8.Valid(tail) {
		out.Head, out.Tail = string(head), string(tail)
		return
	}
	out.Encoding = "base64"
	out.Head = base64.StdEncoding.EncodeToString(head)
	if tail != nil {
		out.Tail = base64.StdEncoding.EncodeToString(tail)
	}
}

// validPrefix is the length of b without a rune cut at its end (up to 3
// bytes dropped).
func validPrefix(b []byte) int {
	for cut := 0; cut < 4 && cut <= len(b); cut++ {
		if utf8.Valid(b[len(b)-cut:]) || cut == 3 {
			if r, size := utf8.DecodeLastRune(b[:len(b)-cut]); r != utf8.RuneError || size != 1 || cut == 3 {
				return len(b) - cut
			}
		}
	}
	return len(b)
}

// validSuffixStart skips continuation bytes at the start of b (at most 3).
func validSuffixStart(b []byte) int {
	i := 0
	for i < len(b) && i < 3 && b[i]&0xC0 == 0x80 {
		i++
	}
	return i
}

// headString is the captured head and tail as text, for a quick look at
// what a command printed.
func (c *capture) headString() string { return string(c.head) + string(c.tail()) }
