package sandboxd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckMount(t *testing.T) {
	base, err := resolvePath(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "work")
	sibling := filepath.Join(base, "work2")
	outside := filepath.Join(base, "elsewhere")
	protected := filepath.Join(root, "vera", "creds")
	for _, d := range []string{root, sibling, outside, protected, filepath.Join(root, "inside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink inside the root that leads out of it, and one that stays.
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "inside"), filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	roots, prot := []string{root}, []string{protected}
	for _, c := range []struct {
		name, dir string
		ok        bool
	}{
		{"the root itself", root, false}, // it contains the protected creds
		{"a dir below it", filepath.Join(root, "inside"), true},
		{"a dir to be created below it", filepath.Join(root, "new", "deeper"), true},
		{"a sibling whose name starts like the root", sibling, false},
		{"outside", outside, false},
		{"a symlink leading out", filepath.Join(root, "escape"), false},
		{"a dir to be created under a symlink leading out", filepath.Join(root, "escape", "new"), false},
		{"dot-dot out of the root", filepath.Join(root, "inside", "..", "..", "elsewhere"), false},
		{"a symlink that stays inside", filepath.Join(root, "alias"), true},
		{"the protected dir", protected, false},
		{"inside the protected dir", filepath.Join(protected, "x"), false},
		{"/etc", "/etc", false},
		{"/", "/", false},
	} {
		_, err := checkMount("work", c.dir, roots, prot, "--work-root")
		if c.ok && err != nil {
			t.Errorf("%s (%s): refused: %v", c.name, c.dir, err)
		}
		if !c.ok && (err == nil || !errors.Is(err, ErrRefused)) {
			t.Errorf("%s (%s): %v, want refused", c.name, c.dir, err)
		}
	}
	if _, err := checkMount("input", outside, nil, nil, "--input-root"); err == nil {
		t.Error("no input roots: an input dir was allowed")
	}
	// A relative path is judged where it really is.
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(root); err != nil {
		t.Fatal(err)
	}
	if _, err := checkMount("work", "inside", roots, prot, "--work-root"); err != nil {
		t.Errorf("relative path inside: %v", err)
	}
	if _, err := checkMount("work", "../elsewhere", roots, prot, "--work-root"); err == nil {
		t.Error("relative path leading out: allowed")
	}
}
