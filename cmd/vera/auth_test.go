package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/projector/traces"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/verifierd/deepverify"
	"github.com/vera-run/vera/verifierd/logic"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// TestComponentDurablesAreProtected: the permissions keep every identity
// but the owner away from a component's durable consumer; they know the
// durables by name, so the names must be the components' own.
func TestComponentDurablesAreProtected(t *testing.T) {
	have := map[string][]string{
		catalog.ComponentAgent:      {agents.DefaultDurable},
		catalog.ComponentSandboxd:   {sandboxd.ConsumerRequests, sandboxd.ConsumerControl},
		catalog.ComponentLogic:      {logic.DefaultDurable},
		catalog.ComponentDeepVerify: {deepverify.Durable},
		catalog.ComponentVerifyFast: {verifyfast.DefaultLiveDurable},
		catalog.ComponentProjector:  {projector.FilesDurable, traces.Durable},
	}
	for c, names := range have {
		if !slices.Equal(auth.ComponentDurables[c], names) {
			t.Errorf("%s: bus/auth protects durables %v, the component uses %v", c, auth.ComponentDurables[c], names)
		}
	}
	if len(auth.ComponentDurables) != len(have) {
		t.Errorf("bus/auth lists durables of %d components, want %d", len(auth.ComponentDurables), len(have))
	}
	// A sandbox daemon with an id: bus/auth protects its consumers by the
	// names sandboxd gives them.
	for _, id := range []string{"dock2", "sdt1-a"} {
		if got, want := auth.SandboxDaemonDurables(id), sandboxd.DaemonDurables(id); !slices.Equal(got, want) {
			t.Errorf("daemon %s: bus/auth protects %v, sandboxd uses %v", id, got, want)
		}
	}
}

// TestSandboxDaemonCredsPicksItsOwnIdentity: vera sandboxd --id X runs as
// the identity issued for X when the data dir has one (and --nats-creds
// names none), else as the shared sandboxd identity, with a warning.
func TestSandboxDaemonCredsPicksItsOwnIdentity(t *testing.T) {
	data := t.TempDir()
	store := auth.Store{Dir: auth.DirOf(data)}
	if _, err := store.Init(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Issue("dock2", auth.RoleSandboxd); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Issue("tool1", auth.RoleReader); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id, flag, want string
		warns          bool
	}{
		{id: "dock2", want: store.Path("dock2")},
		{id: "tool1", warns: true},                              // a reader's seed is not a daemon's
		{id: "dock3", warns: true},                              // no identity of its own
		{id: "", want: ""},                                      // the default daemon runs as sandboxd
		{id: "local", want: ""},                                 // likewise
		{id: "dock2", flag: "/x/dock2.nk", want: "/x/dock2.nk"}, // --nats-creds wins
		{id: "dock2", flag: "/x/sandboxd.nk", want: "/x/sandboxd.nk", warns: true}, // the shared one, named
	} {
		var logs bytes.Buffer
		g := &globals{natsCreds: c.flag}
		g.sandboxDaemonCreds(data, c.id, slog.New(slog.NewTextHandler(&logs, nil)))
		if g.natsCreds != c.want {
			t.Errorf("--id %q --nats-creds %q: creds %q, want %q", c.id, c.flag, g.natsCreds, c.want)
		}
		if warned := strings.Contains(logs.String(), "shared sandboxd identity"); warned != c.warns {
			t.Errorf("--id %q --nats-creds %q: warned %v, want %v (%s)", c.id, c.flag, warned, c.warns, logs.String())
		}
	}
}

// TestUpIdentities: vera up requires credentials; the vera commands find
// theirs in the data dir; an identity issued while it runs works within
// seconds, and a revoked one stops working.
func TestUpIdentities(t *testing.T) {
	t.Setenv("NATS_URL", "")
	t.Setenv("NATS_CREDS", "")
	data := t.TempDir()
	t.Setenv("VERA_DATA_DIR", data)
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "", "--no-sandboxd", "--no-agent", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	if !strings.Contains(upOut.String(), "authentication required") {
		t.Errorf("vera up does not say that the bus needs credentials:\n%s", upOut)
	}

	// No credentials: refused, with the fix.
	os.Setenv("VERA_DATA_DIR", t.TempDir()) // no identities there
	_, errOut, code := runCLI(t, "events", "tail", "--nats-url", url, "--no-follow")
	os.Setenv("VERA_DATA_DIR", data)
	if code == 0 || !strings.Contains(errOut, "not authorized") || !strings.Contains(errOut, "--nats-creds") {
		t.Fatalf("events tail without credentials: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "events", "tail", "--nats-url", url, "--no-follow"); code != 0 {
		t.Fatalf("events tail with the reader identity from the data dir: exit %d, %q", code, errOut)
	}
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}
	st, err := os.Stat(filepath.Join(data, "creds"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("creds dir: %v %v", st, err)
	}

	// The listing names every identity and what it may publish.
	out, _, code := runCLI(t, "auth", "list")
	if code != 0 {
		t.Fatalf("auth list: exit %d", code)
	}
	for _, want := range []string{"agent", "sandboxd", "verifier.logic", "admin", "reader", "read only", "ext", "vera.extin.*.ext", "vera.tool.finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("auth list lacks %q:\n%s", want, out)
		}
	}

	// A sandbox daemon's identity: the command says how to use it, and
	// refuses the default daemon's id.
	out, _, code = runCLI(t, "auth", "issue", "dock2", "--role", "sandboxd")
	if code != 0 || !strings.Contains(out, "vera sandboxd --id dock2 --nats-creds") || !strings.Contains(out, "sandboxd-control-dock2") {
		t.Fatalf("auth issue --role sandboxd: exit %d\n%s", code, out)
	}
	if _, errOut, code := runCLI(t, "auth", "issue", "local", "--role", "sandboxd"); code != 2 || !strings.Contains(errOut, "default daemon") {
		t.Errorf("auth issue local --role sandboxd: exit %d, %s", code, errOut)
	}

	// An issued ext identity: works once vera up reloaded (≤ 1 s).
	out, _, code = runCLI(t, "auth", "issue", "mytool", "--role", "ext")
	if code != 0 || !strings.Contains(out, "mytool.nk") {
		t.Fatalf("auth issue: exit %d\n%s", code, out)
	}
	seed := filepath.Join(data, "creds", "mytool.nk")
	opt, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	var nc *nats.Conn
	waitFor(t, "the issued identity to be accepted", func() bool {
		nc, err = nats.Connect(url, opt)
		return err == nil
	})
	js, _ := jetstreamOf(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev := `{"specversion":"1.0","id":"01JDEMOX0000000000000000AB","source":"mytool","type":"vera.ext.scan","subject":"t1","runid":"t1","time":"2026-11-21T18:00:00Z","data":{}}`
	if _, err := js.Publish(ctx, "vera.extin.t1.mytool", []byte(ev)); err != nil {
		t.Fatalf("issued ext identity publishing its own event: %v", err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if _, err := js.Publish(pctx, "vera.run.t1.tool.finished", []byte(ev)); err == nil {
		t.Fatal("issued ext identity published vera.tool.finished")
	}
	nc.Close()
	if _, _, code := runCLI(t, "auth", "revoke", "mytool"); code != 0 {
		t.Fatal("auth revoke failed")
	}
	waitFor(t, "the revoked identity to be refused", func() bool {
		c, err := nats.Connect(url, opt)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}

// TestAnotherOSUserCannotSubmit runs the vera binary as another OS user
// (uid 65534) on the machine where `vera up` runs: the creds directory
// is closed to it, so it can neither submit a task nor publish anything.
func TestAnotherOSUserCannotSubmit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a command as another user (uid 65534); CI runs as root")
	}
	t.Setenv("NATS_URL", "")
	t.Setenv("NATS_CREDS", "")
	// Everything open to others but the creds directory itself.
	base, err := os.MkdirTemp("", "vera-otheruser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	data := filepath.Join(base, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "vera")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "", "--no-sandboxd", "--no-agent", "--no-verifiers", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })

	asNobody := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "VERA_DATA_DIR=" + data, "NATS_URL=" + url}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Dir = base
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	attempts := [][]string{
		{"run", "--task", "read /etc/shadow", "--run-id", "evil1", "--work-dir", "/", "--model-base-url", "http://127.0.0.1:9", "--model", "m"},
		{"run", "--task", "x", "--run-id", "evil2", "--work-dir", "/", "--model-base-url", "http://127.0.0.1:9", "--model", "m", "--nats-creds", filepath.Join(data, "creds", "cli.nk")},
		{"sandbox", "exec", "--run", "evil3", "--", "id"},
		{"events", "tail", "--no-follow"},
	}
	for _, a := range attempts {
		out, err := asNobody(a...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("vera %s as uid 65534: %v\n%s", strings.Join(a, " "), err, out)
			continue
		}
		if !strings.Contains(out, "permission denied") && !strings.Contains(out, "not authorized") {
			t.Errorf("vera %s as uid 65534 failed without saying why:\n%s", strings.Join(a, " "), out)
		}
	}
	// Nothing reached the stream.
	admin := bustest.Connect(t, url, bus.Options{CredsFile: filepath.Join(data, "creds", "admin.nk"), ReadOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for rec, err := range admin.Read(ctx, bus.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("the stream holds %s on %s", rec.Event.Type, rec.Subject)
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}

func jetstreamOf(t *testing.T, nc *nats.Conn) (jetstream.JetStream, error) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, nil
}

// veraDataDir is a fresh data dir that every vera command of the test
// uses by default (VERA_DATA_DIR), so that they find the identities `vera
// up` makes in it, as they would on a user's machine.
func veraDataDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	t.Setenv("VERA_DATA_DIR", d)
	removeLeftoverPools(t, filepath.Dir(d))
	return d
}

// identityFile is identity's seed in the default data dir.
func identityFile(identity string) string {
	return auth.Store{Dir: auth.DirOf(defaultDataDir())}.Path(identity)
}
