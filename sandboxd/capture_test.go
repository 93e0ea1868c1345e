package sandboxd

import (
	"bytes"
	"encoding/base64"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCaptureSmallIsInline(t *testing.T) {
	c := newCapture(filepath.Join(t.TempDir(), "s"), 16, 16, 1<<20)
	c.Write([]byte("hello "))
	c.Write([]byte("world"))
	c.close()
	out := c.output(nil)
	if out.Head != "hello world" || out.Tail != "" || out.Truncated || out.Bytes != 11 || out.Encoding != "" {
		t.Fatalf("%+v", out)
	}
}

func TestCaptureKeepsHeadAndTailWithBoundedMemory(t *testing.T) {
	dir := t.TempDir()
	c := newCapture(filepath.Join(dir, "s"), 100, 100, 1<<30)
	rng := rand.New(rand.NewSource(1))
	var all bytes.Buffer
	for i := 0; i < 5000; i++ {
		chunk := make([]byte, rng.Intn(700))
		for j := range chunk {
			chunk[j] = 'a' + byte(rng.Intn(26))
		}
		c.Write(chunk)
		all.Write(chunk)
	}
	c.close()
	out := c.output(nil)
	if !out.Truncated || out.Bytes != int64(all.Len()) {
		t.Fatalf("truncated=%v bytes=%d want %d", out.Truncated, out.Bytes, all.Len())
	}
	if out.Head != string(all.Bytes()[:100]) || out.Tail != string(all.Bytes()[all.Len()-100:]) {
		t.Fatal("head or tail wrong")
	}
	spooled, _ := os.ReadFile(filepath.Join(dir, "s"))
	if !bytes.Equal(spooled, all.Bytes()) {
		t.Fatal("spool differs from the stream")
	}
	if cap(c.ring) != 100 || cap(c.head) > 200 {
		t.Fatalf("memory not bounded: ring %d head %d", cap(c.ring), cap(c.head))
	}
}

func TestCaptureTailExactFitAndWrap(t *testing.T) {
	for _, sizes := range [][]int{{10, 10}, {10, 5, 5}, {25}, {3, 3, 3, 3, 3, 3, 3}, {10, 30}} {
		c := newCapture("", 10, 10, 0)
		var all []byte
		k := byte(0)
		for _, n := range sizes {
			chunk := make([]byte, n)
			for i := range chunk {
				chunk[i] = 'A' + k%26
				k++
			}
			c.Write(chunk)
			all = append(all, chunk...)
		}
		wantTail := all[10:]
		if len(wantTail) > 10 {
			wantTail = wantTail[len(wantTail)-10:]
		}
		if got := c.tail(); !bytes.Equal(got, wantTail) {
			t.Errorf("sizes %v: tail %q want %q", sizes, got, wantTail)
		}
	}
}

func TestCaptureSpoolLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	c := newCapture(path, 4, 4, 10)
	c.Write(bytes.Repeat([]byte("x"), 25))
	c.close()
	if st, _ := os.Stat(path); st.Size() != 10 {
		t.Fatalf("spool %d bytes, limit 10", st.Size())
	}
	if c.output(nil).Bytes != 25 {
		t.Fatal("total must count every byte")
	}
}

func TestCaptureBinaryIsBase64AndRunesAreNotCut(t *testing.T) {
	c := newCapture("", 8, 8, 0)
	c.Write([]byte{0xff, 0xfe, 0, 1})
	if out := c.output(nil); out.Encoding != "base64" || out.Head != base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 0, 1}) {
		t.Fatalf("%+v", out)
	}
	c = newCapture("", 8, 8, 0)
	c.Write([]byte(strings.Repeat("é", 20))) // 2 bytes each: cuts fall inside runes
	out := c.output(nil)
	if out.Encoding != "" || !out.Truncated || strings.ContainsRune(out.Head+out.Tail, '\uFFFD') {
		t.Fatalf("text became %+v", out)
	}
}
