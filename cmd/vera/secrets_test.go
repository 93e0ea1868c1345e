package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsAreRefusedBeforeAnythingIsPublished: a key pasted where the
// name of its variable belongs, or a password in a model URL, stops `vera
// run`, `vera up` and `vera dashboard` before a single event is published,
// and no output repeats it.
func TestSecretsAreRefusedBeforeAnythingIsPublished(t *testing.T) {
	t.Setenv("NATS_URL", "")
	const key = "sk-proj-PASTEDKEY0123456789abcdefXYZ"
	const pw = "s3cretpw-do-not-print"
	data := veraDataDir(t)
	cases := [][]string{
		{"run", "--task", "x", "--work-dir", t.TempDir(), "--data-dir", data, "--model-base-url", "http://127.0.0.1:9", "--model", "m", "--api-key-env", key},
		{"run", "--task", "x", "--work-dir", t.TempDir(), "--data-dir", data, "--model-base-url", "http://user:" + pw + "@127.0.0.1:9", "--model", "m"},
		{"run", "--task", "x", "--work-dir", t.TempDir(), "--data-dir", data, "--model-base-url", "http://127.0.0.1:9", "--model", "m", "--auditor",
			"--auditor-model-base-url", "https://admin:" + pw + "@models.example"},
		{"up", "--data-dir", data, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--no-sandboxd", "--api-key-env", key},
		{"dashboard", "--nats-url", "nats://127.0.0.1:9", "--data-dir", data, "--listen", "127.0.0.1:0", "--base-url", "http://u:" + pw + "@h:1"},
	}
	for _, args := range cases {
		out, errOut, code := runCLI(t, args...)
		all := out + errOut
		if code == 0 {
			t.Errorf("vera %s: exit 0", args[0])
		}
		if strings.Contains(all, key) || strings.Contains(all, pw) {
			t.Errorf("vera %s printed the secret:\n%s", args[0], all)
		}
		if !strings.Contains(all, "environment variable") {
			t.Errorf("vera %s does not say where the secret goes:\n%s", args[0], all)
		}
	}
	// Nothing was published anywhere: no command got as far as starting
	// the embedded bus.
	if _, err := os.Stat(filepath.Join(data, "nats")); err == nil {
		t.Error("a bus was started in the data dir")
	}
}
