package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/bus/embedded"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// exampleEvent is a valid event of typ on run.
func exampleEvent(t *testing.T, b *bus.Bus, run, typ string) bus.Event {
	t.Helper()
	e, ok := catalog.Lookup(typ)
	if !ok {
		t.Fatalf("no type %s", typ)
	}
	ev, err := b.Events.New(run, e.Example)
	if err != nil {
		t.Fatalf("event %s: %v", typ, err)
	}
	return ev
}

func TestConnectWithoutCredentialsIsRefused(t *testing.T) {
	s, store := bustest.StartSecureServer(t)
	_, err := bus.Connect(ctxT(t, 10*time.Second), bus.Options{URL: s.ClientURL(), Logger: bustest.Logger(t)})
	if !errors.Is(err, bus.ErrNotAuthorized) || !strings.Contains(err.Error(), "--nats-creds") {
		t.Fatalf("connect without credentials: %v, want ErrNotAuthorized with the fix", err)
	}
	// A raw client too: the server, not VERA's client, refuses.
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("raw connect without credentials succeeded")
	}
	// A key the server does not know.
	other := auth.Store{Dir: filepath.Join(t.TempDir(), "creds")}
	if _, err := other.Init(); err != nil {
		t.Fatal(err)
	}
	_, err = bus.Connect(ctxT(t, 10*time.Second), bus.Options{URL: s.ClientURL(), CredsFile: other.Path(auth.Admin), Logger: bustest.Logger(t)})
	if !errors.Is(err, bus.ErrNotAuthorized) {
		t.Fatalf("connect with an unknown key: %v", err)
	}
	_ = store
}

func TestStoreFilesArePrivate(t *testing.T) {
	store := auth.Store{Dir: filepath.Join(t.TempDir(), "creds")}
	ids, err := store.Init()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(auth.BuiltIn()) {
		t.Fatalf("%d identities, want %d", len(ids), len(auth.BuiltIn()))
	}
	st, err := os.Stat(store.Dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("creds dir mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(store.Dir)
	for _, e := range entries {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
	// Init again keeps the keys.
	again, err := store.Init()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, again) {
		t.Fatal("a second Init changed the identities")
	}
	// Seeds are usable as-is by nats.go (and so by `nats --nkey`).
	if _, err := nats.NkeyOptionFromSeed(store.Path(catalog.ComponentAgent)); err != nil {
		t.Fatal(err)
	}
}

// TestComponentsPublishExactlyTheirTypes is the whole catalogue against
// every identity: a publish is stored if and only if the catalogue lists
// the identity as a producer of the type; every other one is refused by
// the server, promptly.
func TestComponentsPublishExactlyTheirTypes(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t, 3*time.Minute)
	identities := append(catalog.Components(), auth.Reader, auth.Ext)
	want := map[string]int{} // subject count expected in the stream per run
	for _, name := range identities {
		b := bustest.ConnectAs(t, s.ClientURL(), store, name, bus.Options{PublishBudget: time.Second, PublishTimeout: 3 * time.Second})
		produces := catalog.ProducedBy(name)
		run := "perm-" + strings.ReplaceAll(name, ".", "-")
		for _, typ := range catalog.Types() {
			ev := exampleEvent(t, b, run, typ)
			start := time.Now()
			_, err := b.Publish(ctx, ev)
			allowed := slices.Contains(produces, typ)
			switch {
			case allowed && err != nil:
				t.Errorf("%s publishing %s (a type it produces): %v", name, typ, err)
			case !allowed && err == nil:
				t.Errorf("%s published %s, which the catalogue does not let it produce", name, typ)
			case !allowed && !errors.Is(err, bus.ErrPermissionDenied):
				t.Errorf("%s publishing %s: %v, want ErrPermissionDenied", name, typ, err)
			case !allowed && time.Since(start) > 2*time.Second:
				t.Errorf("%s publishing %s: refused only after %s", name, typ, time.Since(start))
			case !allowed && !bus.IsPermanent(err):
				t.Errorf("%s publishing %s: refusal is not permanent: %v", name, typ, err)
			}
			if allowed {
				want[run]++
			}
		}
	}
	// The stream holds exactly the allowed ones.
	for _, name := range identities {
		run := "perm-" + strings.ReplaceAll(name, ".", "-")
		evs, err := admin.ReadRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != want[run] {
			t.Errorf("run of %s holds %d events, want %d", name, len(evs), want[run])
		}
		for _, ev := range evs {
			if !slices.Contains(catalog.ProducedBy(name), ev.Type) {
				t.Errorf("stored %s from %s", ev.Type, name)
			}
		}
	}
}

func TestReaderReadsAndCannotPublish(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t, time.Minute)
	ev := exampleEvent(t, admin, "r1", catalog.TypeTaskSubmitted)
	if _, err := admin.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	reader := bustest.ConnectAs(t, s.ClientURL(), store, auth.Reader, bus.Options{ReadOnly: true, PublishBudget: time.Second})
	evs, err := reader.ReadRun(ctx, "r1")
	if err != nil || len(evs) != 1 || evs[0].ID != ev.ID {
		t.Fatalf("reader reads run r1: %v %v", evs, err)
	}
	// Core NATS subscribe works.
	sub, err := reader.Conn().SubscribeSync("vera.run.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Publish(ctx, exampleEvent(t, admin, "r1", catalog.TypeRunStarted)); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("reader's subscription got nothing: %v", err)
	}
	// Publishing anything under vera.run is refused by the server, and
	// no raw publish lands in the stream either.
	for _, subj := range []string{"vera.run.r1.tool.finished", "vera.run.r1.ext.demo", "vera.run.r1.run.finished"} {
		_, err := reader.PublishRaw(ctx, subj, "01JDEMO0000000000000000001", []byte(`{}`))
		if !errors.Is(err, bus.ErrPermissionDenied) {
			t.Errorf("reader publishing %s: %v, want ErrPermissionDenied", subj, err)
		}
	}
	if err := reader.Conn().Publish("vera.run.r1.tool.finished", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	_ = reader.Conn().Flush()
	time.Sleep(200 * time.Millisecond)
	if evs, _ := admin.ReadRun(ctx, "r1"); len(evs) != 2 {
		t.Fatalf("run r1 holds %d events after the reader's attempts, want 2", len(evs))
	}
	// The reader may not touch a component's durable consumer: not
	// create it, not pull from it (which would take events away from the
	// component), not delete it.
	js := reader.JetStream()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateConsumer(cctx, bus.StreamName, jetstream.ConsumerConfig{Durable: "agent", AckPolicy: jetstream.AckExplicitPolicy}); err == nil {
		t.Error("reader created the agent's durable consumer")
	}
	if _, err := admin.JetStream().CreateOrUpdateConsumer(ctx, bus.StreamName, jetstream.ConsumerConfig{Durable: "agent", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel = context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := js.DeleteConsumer(cctx, bus.StreamName, "agent"); err == nil {
		t.Error("reader deleted the agent's durable consumer")
	}
	res, err := reader.Conn().Request("$JS.API.CONSUMER.MSG.NEXT.VERA.agent", []byte(`{"batch":1,"no_wait":true}`), time.Second)
	if err == nil {
		t.Errorf("reader pulled from the agent's consumer: %s", res.Data)
	}
	ci, err := admin.JetStream().Consumer(ctx, bus.StreamName, "agent")
	if err != nil {
		t.Fatalf("the agent's consumer is gone: %v", err)
	}
	if info := ci.CachedInfo(); info.Delivered.Consumer != 0 {
		t.Fatalf("the agent's consumer delivered %d messages to someone", info.Delivered.Consumer)
	}
	// Nor manage streams.
	if err := js.DeleteStream(cctx, bus.StreamName); err == nil {
		t.Error("reader deleted the stream")
	}
}

func TestExtPublishesOnlyUnderExt(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t, time.Minute)
	ext := bustest.ConnectAs(t, s.ClientURL(), store, auth.Ext, bus.Options{PublishBudget: time.Second, ExtInbound: true})
	ev, err := ext.Events.NewRaw("x", "vera.ext.demo", json.RawMessage(`{"hello":"world"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext.Publish(ctx, ev); err != nil {
		t.Fatalf("ext publishing its vera.ext.demo (on vera.extin.x.ext): %v", err)
	}
	if _, err := ext.Publish(ctx, exampleEvent(t, ext, "x", catalog.TypeToolFinished)); !errors.Is(err, bus.ErrPermissionDenied) {
		t.Fatalf("ext publishing vera.run.x.tool.finished: %v, want ErrPermissionDenied", err)
	}
	// Neither straight into VERA, nor on another identity's subject.
	for _, subj := range []string{"vera.run.x.ext.demo", "vera.extin.x.reader", "vera.extin.x.agent"} {
		if _, err := ext.PublishRaw(ctx, subj, ev.ID, []byte(`{}`)); !errors.Is(err, bus.ErrPermissionDenied) {
			t.Errorf("ext publishing %s: %v, want ErrPermissionDenied", subj, err)
		}
	}
	evs := waitRunEvents(t, admin, "x", 1)
	if len(evs) != 1 || evs[0].Type != "vera.ext.demo" {
		t.Fatalf("run x: %v", evs)
	}
	if subj, _ := bustest.RawSubjects(t, admin, "vera.run.x.>"); len(subj) != 1 || subj[0] != "vera.run.x.ext.ext" {
		t.Fatalf("run x is stored on %v, want the publisher's name in the subject", subj)
	}
	if got, err := ext.ReadRun(ctx, "x"); err != nil || len(got) != 1 {
		t.Fatalf("ext reads run x: %v %v", got, err)
	}
}

func TestIssuedIdentityTakesEffectOnReload(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t, time.Minute)
	id, path, err := store.Issue("mytool", auth.RoleExt)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "mytool.nk" || id.Role != auth.RoleExt {
		t.Fatalf("issued %+v at %s", id, path)
	}
	if _, err := bus.Connect(ctx, bus.Options{URL: s.ClientURL(), CredsFile: path, ReadOnly: true, Logger: bustest.Logger(t)}); !errors.Is(err, bus.ErrNotAuthorized) {
		t.Fatalf("a new identity before the reload: %v", err)
	}
	bustest.ReloadUsers(t, s, store)
	tool := bustest.Connect(t, s.ClientURL(), bus.Options{CredsFile: path, Source: "mytool", ReadOnly: true, PublishBudget: time.Second, ExtInbound: true})
	ev, _ := tool.Events.NewRaw("t1", "vera.ext.scan", json.RawMessage(`{}`))
	if _, err := tool.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Publish(ctx, exampleEvent(t, tool, "t1", catalog.TypeRunFinished)); !errors.Is(err, bus.ErrPermissionDenied) {
		t.Fatalf("issued ext identity publishing run.finished: %v", err)
	}
	// Revoked: the server disconnects it and refuses it from then on.
	if err := store.Revoke("mytool"); err != nil {
		t.Fatal(err)
	}
	bustest.ReloadUsers(t, s, store)
	if _, err := bus.Connect(ctx, bus.Options{URL: s.ClientURL(), CredsFile: path, ReadOnly: true, Logger: bustest.Logger(t)}); err == nil {
		t.Fatal("a revoked identity connected")
	}
	if _, _, err := store.Issue("agent", auth.RoleExt); err == nil {
		t.Fatal("issued an identity with a built-in name")
	}
	if _, _, err := store.Issue("Bad Name", auth.RoleReader); err == nil {
		t.Fatal("issued an identity with a bad name")
	}
	_ = admin
}

// TestConfigBlockIsTheSamePermissions loads the generated nats.conf
// block into a real server and checks it grants what the embedded server
// grants.
func TestConfigBlockIsTheSamePermissions(t *testing.T) {
	store := auth.Store{Dir: filepath.Join(t.TempDir(), "creds")}
	ids, err := store.Init()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(filepath.Dir(store.Dir), "nats.conf")
	body := "listen: 127.0.0.1:-1\njetstream { store_dir: " + `"` + filepath.Join(t.TempDir(), "js") + `"` + " }\ninclude creds/" + filepath.Base(store.ConfPath()) + "\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("generated config does not load: %v", err)
	}
	users, err := auth.NkeyUsers(ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Nkeys) != len(users) {
		t.Fatalf("config has %d users, want %d", len(opts.Nkeys), len(users))
	}
	for i, u := range users {
		got := opts.Nkeys[i]
		if got.Nkey != u.Nkey {
			t.Fatalf("user %d: %s, want %s", i, got.Nkey, u.Nkey)
		}
		if (got.Permissions == nil) != (u.Permissions == nil) {
			t.Fatalf("user %s: permissions %v, want %v", ids[i].Name, got.Permissions, u.Permissions)
		}
		if u.Permissions == nil {
			continue
		}
		for _, pair := range [][2][]string{
			{got.Permissions.Publish.Allow, u.Permissions.Publish.Allow},
			{got.Permissions.Publish.Deny, u.Permissions.Publish.Deny},
			{got.Permissions.Subscribe.Allow, u.Permissions.Subscribe.Allow},
		} {
			if !slices.Equal(pair[0], pair[1]) {
				t.Fatalf("user %s: config grants %v, embedded grants %v", ids[i].Name, pair[0], pair[1])
			}
		}
	}
	s, err := embedded.StartWithOptions(opts, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx := ctxT(t, time.Minute)
	admin := bustest.ConnectAs(t, s.ClientURL(), store, auth.Admin, bus.Options{})
	agent := bustest.ConnectAs(t, s.ClientURL(), store, catalog.ComponentAgent, bus.Options{PublishBudget: time.Second})
	if _, err := agent.Publish(ctx, exampleEvent(t, agent, "c1", catalog.TypeToolRequested)); err != nil {
		t.Fatalf("agent publishing tool.requested on a server run from the config: %v", err)
	}
	if _, err := agent.Publish(ctx, exampleEvent(t, agent, "c1", catalog.TypeToolFinished)); !errors.Is(err, bus.ErrPermissionDenied) {
		t.Fatalf("agent publishing tool.finished on a server run from the config: %v", err)
	}
	_ = admin
}

// TestExtCannotForgeATypeInTheEnvelope: ext may publish on
// vera.extin.*.ext (stored as vera.run.*.ext.ext), so it could store an
// envelope that claims to be a vera.tool.finished there; no reader of the
// run takes it for one.
func TestExtCannotForgeATypeInTheEnvelope(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t, time.Minute)
	ext := bustest.ConnectAs(t, s.ClientURL(), store, auth.Ext, bus.Options{PublishBudget: time.Second})
	forged := exampleEvent(t, ext, "x", catalog.TypeToolFinished)
	raw, err := forged.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext.PublishRaw(ctx, "vera.extin.x.ext", forged.ID, raw); err != nil {
		t.Fatalf("ext publishing on its own subject: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		subj, _ := bustest.RawSubjects(t, admin, "vera.run.x.>")
		n = len(subj)
	}
	evs, err := admin.ReadRun(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("the run's readers take the forged envelope for %s", evs[0].Type)
	}
	for rec, err := range admin.Read(ctx, bus.ReadOptions{RunID: "x"}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Err == nil || !strings.Contains(rec.Err.Error(), "does not match subject") {
			t.Fatalf("forged envelope read as %v (err %v)", rec.Event.Type, rec.Err)
		}
	}
}

func TestStoreRefusesADirectoryItDoesNotOwn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := (auth.Store{Dir: dir}).Init(); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Init on a symlinked creds dir: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	other := filepath.Join(t.TempDir(), "creds")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := (auth.Store{Dir: other}).Init(); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("Init on another user's creds dir: %v", err)
	}
}

// TestLivePiecesPublishedByTheAgentOnly: the live pieces of model replies
// (internal/live, core NATS, never stored) may be published by the agent
// alone; everyone who may read a run's events may read them (they hold
// nothing vera.model.responded will not), including the read-only outside
// identity; nobody else can inject text into what viewers see as the
// model's reply.
func TestLivePiecesPublishedByTheAgentOnly(t *testing.T) {
	s, store, _ := bustest.NewSecure(t)
	subj, err := live.Subject("lv1")
	if err != nil {
		t.Fatal(err)
	}
	readers := []string{auth.Reader, auth.Ext, catalog.ComponentCLI, catalog.ComponentDashboard}
	subs := map[string]*nats.Subscription{}
	for _, name := range readers {
		b := bustest.ConnectAs(t, s.ClientURL(), store, name, bus.Options{ReadOnly: true})
		sub, err := b.Conn().SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Conn().Flush(); err != nil {
			t.Fatal(err)
		}
		subs[name] = sub
	}
	// Everyone else tries first; each flush makes sure the server has
	// handled (and refused) the publish before the agent's.
	for _, name := range append(slices.Clone(readers), catalog.ComponentSandboxd, catalog.ComponentDeepVerify, catalog.ComponentProjector) {
		b := bustest.ConnectAs(t, s.ClientURL(), store, name, bus.Options{ReadOnly: true})
		if err := b.Conn().Publish(subj, []byte(`{"call_id":"forged","seq":1,"content":"from `+name+`"}`)); err != nil {
			t.Fatal(err)
		}
		if err := b.Conn().Flush(); err != nil {
			t.Fatal(err)
		}
	}
	agent := bustest.ConnectAs(t, s.ClientURL(), store, catalog.ComponentAgent, bus.Options{ReadOnly: true})
	// Only the model subject: not another live subject.
	if err := agent.Conn().Publish("vera.live.lv1.other", []byte(`x`)); err != nil {
		t.Fatal(err)
	}
	pub := live.NewPublisher(agent.Conn(), live.Options{Logger: bustest.Logger(t)})
	defer pub.Close()
	sink := pub.Deltas("lv1", 1, "call-1")
	sink(llm.Delta{Content: "from the agent"})
	sink(llm.Delta{})
	for name, sub := range subs {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s received no live piece: %v", name, err)
		}
		p, err := live.Decode(m.Subject, m.Data)
		if err != nil || p.CallID != "call-1" || p.Content != "from the agent" {
			t.Fatalf("%s received %s (%v), want the agent's piece first: another identity's publish got through", name, m.Data, err)
		}
		if extra, err := sub.NextMsg(200 * time.Millisecond); err == nil {
			t.Fatalf("%s received a second message %s on %s", name, extra.Data, extra.Subject)
		}
	}
	wild := bustest.ConnectAs(t, s.ClientURL(), store, auth.Reader, bus.Options{ReadOnly: true})
	other, err := wild.Conn().SubscribeSync("vera.live.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := wild.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if err := agent.Conn().Publish("vera.live.lv1.other", []byte(`x`)); err != nil {
		t.Fatal(err)
	}
	if err := agent.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := other.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("the agent published on %s, outside its live subject", m.Subject)
	}
}

// TestPlacementBucketWrittenBySandboxdOnly: the sandboxd identity may
// create, update and delete keys of the placement bucket; every other
// non-admin identity may read and watch it and is refused a write by the
// server.
func TestPlacementBucketWrittenBySandboxdOnly(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t, time.Minute)
	if _, err := admin.PlacementKV(ctx); err != nil {
		t.Fatalf("admin opens the bucket EnsureStreams created: %v", err)
	}
	sandboxd := bustest.ConnectAs(t, s.ClientURL(), store, catalog.ComponentSandboxd, bus.Options{})
	kv, err := sandboxd.PlacementKV(ctx)
	if err != nil {
		t.Fatalf("sandboxd opens the placement bucket: %v", err)
	}
	rev, err := kv.Create(ctx, "runs.r1", []byte(`{"daemon":"a"}`))
	if err != nil {
		t.Fatalf("sandboxd creates a key: %v", err)
	}
	rev, err = kv.Update(ctx, "runs.r1", []byte(`{"daemon":"b"}`), rev)
	if err != nil {
		t.Fatalf("sandboxd updates a key: %v", err)
	}
	if _, err := kv.Create(ctx, "runs.r2", []byte(`{"daemon":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "runs.r2"); err != nil {
		t.Fatalf("sandboxd deletes a key: %v", err)
	}

	for _, name := range []string{auth.Reader, catalog.ComponentAgent, auth.Ext} {
		b := bustest.ConnectAs(t, s.ClientURL(), store, name, bus.Options{ReadOnly: name != catalog.ComponentAgent})
		rkv, err := b.PlacementKV(ctx)
		if err != nil {
			t.Fatalf("%s opens the placement bucket: %v", name, err)
		}
		e, err := rkv.Get(ctx, "runs.r1")
		if err != nil || string(e.Value()) != `{"daemon":"b"}` || e.Revision() != rev {
			t.Fatalf("%s reads runs.r1: %v %v", name, e, err)
		}
		if _, err := rkv.Get(ctx, "runs.r2"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("%s reads the deleted runs.r2: %v, want ErrKeyNotFound", name, err)
		}
		// Writes: the server refuses the publish (a permissions
		// violation on the connection); the client sees no
		// acknowledgement, so its request fails.
		sub := make(chan error, 8)
		b.Conn().SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { sub <- err })
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, perr := rkv.Put(wctx, "runs.r1", []byte(`{"daemon":"`+name+`"}`))
		_, cerr := rkv.Create(wctx, "runs.r3", []byte(`{}`))
		derr := rkv.Delete(wctx, "runs.r1")
		cancel()
		for what, err := range map[string]error{"put": perr, "create": cerr, "delete": derr} {
			if err == nil {
				t.Errorf("%s may %s in the placement bucket", name, what)
			}
		}
		select {
		case err := <-sub:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), "$KV."+bus.PlacementBucket+".runs.") {
				t.Errorf("%s writing the placement bucket: %v, want a permissions violation", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s writing the placement bucket: no permissions violation reported", name)
		}
		if e, err := admin.JetStream().KeyValue(ctx, bus.PlacementBucket); err != nil {
			t.Fatal(err)
		} else if got, err := e.Get(ctx, "runs.r1"); err != nil || got.Revision() != rev {
			t.Fatalf("runs.r1 after %s's attempts: %v %v, want revision %d unchanged", name, got, err, rev)
		}
		if _, err := admin.JetStream().KeyValue(ctx, bus.PlacementBucket); err != nil {
			t.Fatal(err)
		}
	}

	// The reader watches: it sees the current value, then sandboxd's
	// next change.
	reader := bustest.ConnectAs(t, s.ClientURL(), store, auth.Reader, bus.Options{ReadOnly: true})
	rkv, err := reader.PlacementKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := rkv.Watch(ctx, "runs.>")
	if err != nil {
		t.Fatalf("reader watches the placement bucket: %v", err)
	}
	defer w.Stop()
	next := func() jetstream.KeyValueEntry {
		t.Helper()
		select {
		case e := <-w.Updates():
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("reader's watch got nothing")
			return nil
		}
	}
	if e := next(); e == nil || e.Key() != "runs.r1" || e.Revision() != rev {
		t.Fatalf("reader's watch first entry: %v", e)
	}
	if e := next(); e != nil && e.Key() == "runs.r2" {
		if e.Operation() != jetstream.KeyValueDelete {
			t.Fatalf("runs.r2 delivered as %v, want a delete", e.Operation())
		}
		e = next()
		if e != nil {
			t.Fatalf("want the end of the initial values, got %v", e.Key())
		}
	} else if e != nil {
		t.Fatalf("reader's watch: unexpected %s", e.Key())
	}
	if _, err := kv.Update(ctx, "runs.r1", []byte(`{"daemon":"c"}`), rev); err != nil {
		t.Fatal(err)
	}
	if e := next(); e == nil || e.Key() != "runs.r1" || string(e.Value()) != `{"daemon":"c"}` {
		t.Fatalf("reader's watch missed sandboxd's update: %v", e)
	}
}

// TestComponentWithoutPlacementBucketSaysHowToCreateIt: a component
// connecting to a bus whose bucket is missing gets an error naming
// `vera up`.
func TestComponentWithoutPlacementBucketSaysHowToCreateIt(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t, time.Minute)
	if err := admin.JetStream().DeleteKeyValue(ctx, bus.PlacementBucket); err != nil {
		t.Fatal(err)
	}
	_, err := bus.Connect(ctx, bus.Options{URL: s.ClientURL(), CredsFile: store.Path(catalog.ComponentSandboxd), Source: "sandboxd", Logger: bustest.Logger(t)})
	if !errors.Is(err, bus.ErrPermissionDenied) || !strings.Contains(err.Error(), bus.PlacementBucket) || !strings.Contains(err.Error(), "vera up") {
		t.Fatalf("sandboxd connecting without the bucket: %v, want a permission error naming the bucket and `vera up`", err)
	}
	reader := bustest.ConnectAs(t, s.ClientURL(), store, auth.Reader, bus.Options{ReadOnly: true})
	if _, err := reader.PlacementKV(ctx); !errors.Is(err, jetstream.ErrBucketNotFound) || !strings.Contains(err.Error(), "vera up") {
		t.Fatalf("opening a missing bucket: %v, want ErrBucketNotFound naming `vera up`", err)
	}
}

// TestSandboxDaemonIdentityOwnsItsConsumers: a sandbox daemon started
// with --id dock2 and the identity issued for it (role sandboxd) has
// sandboxd's permissions and its own consumers, which every other
// identity — a reader, the agent, the shared sandboxd identity — may not
// create, pull from or delete; it may not touch theirs either.
func TestSandboxDaemonIdentityOwnsItsConsumers(t *testing.T) {
	s, store, admin := bustest.NewSecure(t)
	ctx := ctxT(t, 2*time.Minute)
	if _, _, err := store.Issue("local", auth.RoleSandboxd); err == nil {
		t.Error("issued an identity for the default daemon local")
	}
	if _, _, err := store.Issue("control-x", auth.RoleSandboxd); err == nil {
		t.Error("issued a daemon identity whose consumer would be named like daemon x's control consumer")
	}
	id, _, err := store.Issue("dock2", auth.RoleSandboxd)
	if err != nil {
		t.Fatal(err)
	}
	if d := auth.Describe(id); !strings.Contains(d, "sandboxd-dock2") || !strings.Contains(d, catalog.TypeToolFinished) {
		t.Errorf("Describe(dock2) = %q", d)
	}
	bustest.ReloadUsers(t, s, store)
	dock2 := bustest.ConnectAs(t, s.ClientURL(), store, "dock2", bus.Options{Source: catalog.ComponentSandboxd, PublishBudget: time.Second, PublishTimeout: 3 * time.Second})
	if _, err := admin.Publish(ctx, exampleEvent(t, admin, "r1", catalog.TypeToolRequested)); err != nil {
		t.Fatal(err)
	}

	// Its own consumers: create, pull, acknowledge.
	for _, d := range auth.SandboxDaemonDurables("dock2") {
		c, err := dock2.JetStream().CreateOrUpdateConsumer(ctx, bus.StreamName, jetstream.ConsumerConfig{Durable: d, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatalf("dock2 creates its consumer %s: %v", d, err)
		}
		batch, err := c.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			t.Fatalf("dock2 pulls from %s: %v", d, err)
		}
		n := 0
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatalf("dock2 acknowledges on %s: %v", d, err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("dock2 pulled %d messages from %s, want 1 (%v)", n, d, batch.Error())
		}
	}
	// What it publishes: sandboxd's types, its own dead letters.
	if _, err := dock2.Publish(ctx, exampleEvent(t, dock2, "r1", catalog.TypeToolStarted)); err != nil {
		t.Errorf("dock2 publishing tool.started: %v", err)
	}
	if _, err := dock2.Publish(ctx, exampleEvent(t, dock2, "r1", catalog.TypeToolRequested)); !errors.Is(err, bus.ErrPermissionDenied) {
		t.Errorf("dock2 publishing tool.requested: %v, want ErrPermissionDenied", err)
	}
	if _, err := dock2.PublishRaw(ctx, bus.DeadLetterSubject+".sandboxd-dock2.r1", "01JDLQ00000000000000000001", []byte(`{}`)); err != nil {
		t.Errorf("dock2 writing its own dead letter: %v", err)
	}
	if _, err := dock2.PublishRaw(ctx, bus.DeadLetterSubject+".agent.r1", "01JDLQ00000000000000000002", []byte(`{}`)); !errors.Is(err, bus.ErrPermissionDenied) {
		t.Errorf("dock2 writing the agent's dead letter: %v, want ErrPermissionDenied", err)
	}
	// Nor may it touch another component's consumer or the default daemon's.
	if _, err := admin.JetStream().CreateOrUpdateConsumer(ctx, bus.StreamName, jetstream.ConsumerConfig{Durable: "sandboxd", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"sandboxd", "agent"} {
		if res, err := dock2.Conn().Request("$JS.API.CONSUMER.MSG.NEXT.VERA."+d, []byte(`{"batch":1,"no_wait":true}`), time.Second); err == nil {
			t.Errorf("dock2 pulled from %s: %s", d, res.Data)
		}
	}

	// Everyone else is kept from dock2's consumers.
	for _, name := range []string{auth.Reader, auth.Ext, catalog.ComponentAgent, catalog.ComponentSandboxd} {
		b := bustest.ConnectAs(t, s.ClientURL(), store, name, bus.Options{ReadOnly: true})
		for _, d := range auth.SandboxDaemonDurables("dock2") {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if _, err := b.JetStream().CreateOrUpdateConsumer(cctx, bus.StreamName, jetstream.ConsumerConfig{Durable: d, AckPolicy: jetstream.AckExplicitPolicy}); err == nil {
				t.Errorf("%s created or updated %s", name, d)
			}
			if res, err := b.Conn().Request("$JS.API.CONSUMER.MSG.NEXT.VERA."+d, []byte(`{"batch":1,"no_wait":true}`), time.Second); err == nil {
				t.Errorf("%s pulled from %s: %s", name, d, res.Data)
			}
			if err := b.JetStream().DeleteConsumer(cctx, bus.StreamName, d); err == nil {
				t.Errorf("%s deleted %s", name, d)
			}
			cancel()
		}
		// Another daemon id, with no identity of its own, is not protected:
		// the reason to issue one.
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := b.JetStream().CreateOrUpdateConsumer(cctx, bus.StreamName, jetstream.ConsumerConfig{Durable: "sandboxd-unissued-" + strings.ReplaceAll(name, ".", "-"), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Errorf("%s creating the consumer of a daemon without an identity: %v (it is not protected, so it should work)", name, err)
		}
		cancel()
	}
	for _, d := range auth.SandboxDaemonDurables("dock2") {
		c, err := admin.JetStream().Consumer(ctx, bus.StreamName, d)
		if err != nil {
			t.Fatalf("dock2's consumer %s is gone: %v", d, err)
		}
		if got := c.CachedInfo().Delivered.Consumer; got != 1 {
			t.Errorf("%s delivered %d messages, want the 1 dock2 pulled", d, got)
		}
	}

	// Revoked, its consumers are protected no more (and it cannot connect).
	if err := store.Revoke("dock2"); err != nil {
		t.Fatal(err)
	}
	bustest.ReloadUsers(t, s, store)
	if _, err := bus.Connect(ctx, bus.Options{URL: s.ClientURL(), CredsFile: store.Path("dock2"), ReadOnly: true, Logger: bustest.Logger(t)}); err == nil {
		t.Error("the revoked dock2 connected")
	}
}

// waitRunEvents waits until run holds n events (outside events reach VERA
// from VERA_EXT a moment after their publish) and returns them.
func waitRunEvents(t *testing.T, b *bus.Bus, run string, n int) []bus.Event {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	for {
		evs, err := b.ReadRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) >= n || ctx.Err() != nil {
			return evs
		}
		time.Sleep(20 * time.Millisecond)
	}
}
