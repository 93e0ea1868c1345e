package jsontext

import "testing"

func TestScanner(t *testing.T) {
	src := `{"a":"x{]\"\\","b":[1,{}]}`
	want := "SQCQSQCCCEEEEQSQCQSSSSSSSS"
	var s Scanner
	depths := []int{}
	got := make([]byte, len(src))
	for i := 0; i < len(src); i++ {
		got[i] = "SQCE"[s.Step(src[i])]
		depths = append(depths, s.Depth())
	}
	if string(got) != want {
		t.Errorf("classes\n got %s\nwant %s\n     %s", got, want, src)
	}
	if d := depths[len(depths)-1]; d != 0 {
		t.Errorf("final depth %d", d)
	}
	if max := maxOf(depths); max != 3 {
		t.Errorf("max depth %d, want 3", max)
	}
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
