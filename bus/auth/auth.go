// Package auth gives every connection to VERA's bus an identity and every
// identity the least NATS permissions it needs, derived from the event
// catalogue: a component may publish exactly the subjects of the event
// types the catalogue lists it as producing, and the server — not the
// consumer — refuses anything else.
//
// Identities are NATS nkeys. A Store keeps one seed file per identity
// (DATA_DIR/creds/NAME.nk, mode 0600, in a 0700 directory), usable as-is
// with `nats --nkey FILE`. The server side needs only the public keys and
// the permissions: NkeyUsers gives them to an embedded server, and Config
// writes the same as a nats.conf authorization block for an outside server
// or cluster. Nothing here is home-made authentication: the server checks
// the nkey signatures and enforces the permissions.
//
// The identities:
//
//   - one per component (agent, sandboxd, each verifier, projector,
//     dashboard) and cli (the `vera` commands that start and steer runs for
//     a person): read everything, manage their own durable consumers,
//     publish the catalogue's types they produce, write blobs and dead
//     letters (the agent also the live pieces of its streamed replies:
//     LivePublish);
//   - admin: everything, including creating streams and importing
//     recorded runs;
//   - reader: read only (subscribe, create and read consumers, fetch
//     blobs), never another identity's durable consumer;
//   - ext: reader plus publish its own outside events on
//     vera.extin.*.<its name> (bus.ExtInRoot: bounded per run and identity,
//     stored in VERA as vera.run.<run>.ext.<its name>);
//   - identities issued later for a user's own tool (Store.Issue), with
//     the reader or ext role;
//   - identities issued for a sandbox daemon started with --id NAME
//     (role sandboxd, named NAME): sandboxd's permissions, with its own
//     durable consumers (sandboxd-NAME, sandboxd-control-NAME) kept from
//     every other identity. A daemon id without an identity of its own
//     runs as the shared sandboxd identity, and its consumers are not
//     protected: a subject permission cannot deny a prefix of a token,
//     so only named consumers can be denied.
package auth

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/live"
)

// Role says what an identity may do.
type Role string

// Roles.
const (
	RoleComponent Role = "component" // a VERA component or the cli: its catalogue types
	RoleAdmin     Role = "admin"     // everything
	RoleReader    Role = "reader"    // read only
	RoleExt       Role = "ext"       // read, and publish its outside events (vera.extin.*.<name>)
	RoleSandboxd  Role = "sandboxd"  // a sandbox daemon with an id of its own: sandboxd's types, its own consumers
)

// Names of the identities that are not components.
const (
	Admin  = "admin"
	Reader = "reader"
	Ext    = "ext"
)

// Identity is one NATS user of the bus.
type Identity struct {
	Name      string `json:"name"`
	Role      Role   `json:"role"`
	PublicKey string `json:"public_key"` // the nkey's public key, U…
}

// BuiltIn returns the identities every VERA bus has, in a stable order:
// each component of the catalogue (the cli included), admin, reader, ext.
func BuiltIn() []Identity {
	var out []Identity
	for _, c := range catalog.Components() {
		out = append(out, Identity{Name: c, Role: RoleComponent})
	}
	return append(out, Identity{Name: Admin, Role: RoleAdmin}, Identity{Name: Reader, Role: RoleReader}, Identity{Name: Ext, Role: RoleExt})
}

func builtInRole(name string) (Role, bool) {
	for _, id := range BuiltIn() {
		if id.Name == name {
			return id.Role, true
		}
	}
	return "", false
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// ValidateIssuedName checks the name of an identity issued for an outside
// tool: 1–32 of a-z, 0-9, _ and -, starting with a letter, and not the
// name of a built-in identity.
func ValidateIssuedName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("identity name %q: use 1-32 characters a-z, 0-9, _ or -, starting with a letter", name)
	}
	if _, ok := builtInRole(name); ok {
		return fmt.Errorf("identity name %q is taken by a built-in identity", name)
	}
	return nil
}

// ValidateIssued checks an identity to be issued: its name
// (ValidateIssuedName) and role (reader, ext or sandboxd). A sandbox
// daemon's identity is named after its daemon id, which may not be
// "local" (the default daemon, which runs as sandboxd) nor start with
// "control" (its consumers would be named like another daemon's).
func ValidateIssued(name string, role Role) error {
	if err := ValidateIssuedName(name); err != nil {
		return err
	}
	switch role {
	case RoleReader, RoleExt:
		return nil
	case RoleSandboxd:
		if name == "local" {
			return fmt.Errorf("sandbox daemon %q is the default daemon, which runs as the sandboxd identity; issue one for a daemon started with another --id", name)
		}
		if name == "control" || strings.HasPrefix(name, "control-") {
			return fmt.Errorf("sandbox daemon id %q: its consumer would be named sandboxd-%s, like another daemon's control consumer; choose an id that does not start with \"control\"", name, name)
		}
		return nil
	}
	return fmt.Errorf("an issued identity is %q, %q or %q, not %q", RoleReader, RoleExt, RoleSandboxd, role)
}

// ComponentDurables names the durable consumers each component owns. Only
// its owner (and admin) may create, read from, acknowledge on or delete
// one of them: another identity that pulled from the agent's consumer
// could take events away from the agent. A test in cmd/vera checks this
// table against the components' own constants.
var ComponentDurables = map[string][]string{
	catalog.ComponentAgent:      {"agent"},
	catalog.ComponentSandboxd:   {"sandboxd", "sandboxd-control"},
	catalog.ComponentLogic:      {"verifier-logic"},
	catalog.ComponentDeepVerify: {"verifier-deepverify"},
	catalog.ComponentVerifyFast: {"verifier-verifyfast"},
	catalog.ComponentProjector:  {"projector-files", "projector-otel"},
}

// SandboxDaemonDurables names the durable consumers of the sandbox daemon
// started with --id id (as sandboxd.DaemonDurables names them; a test in
// cmd/vera checks the two agree). An identity with RoleSandboxd named id
// owns them; every other identity is denied them.
func SandboxDaemonDurables(id string) []string {
	return []string{"sandboxd-" + id, "sandboxd-control-" + id}
}

// protectedDurables are the durables of the components and of the sandbox
// daemons among ids that have an identity of their own, by owner.
func protectedDurables(ids []Identity) map[string][]string {
	out := make(map[string][]string, len(ComponentDurables))
	for c, ds := range ComponentDurables {
		out[c] = ds
	}
	for _, id := range ids {
		if id.Role == RoleSandboxd {
			out[id.Name] = SandboxDaemonDurables(id.Name)
		}
	}
	return out
}

// LivePublish names the live subjects (internal/live) each component may
// publish: the agent the pieces of its step replies as they stream in.
// Reading them needs no entry: every identity that may read a run's
// events may subscribe to vera.>, the live pieces included, which hold
// nothing the run's vera.model.responded will not.
var LivePublish = map[string][]string{
	catalog.ComponentAgent: {live.SubjectRoot + ".*." + live.ModelToken},
}

// The streams an identity may read.
// The placement bucket (KV_VERA_SANDBOXD) is not secret: `vera` status
// tools and the dashboard may show which daemon runs which run.
var readStreams = []string{bus.StreamName, bus.DeadLetterStream, bus.ExtStream, "OBJ_" + bus.BlobBucket, "KV_" + bus.PlacementBucket}

// PlacementWriters are the components that may write the placement
// bucket (bus.PlacementBucket): the sandbox daemons lease runs and
// heartbeat in it. A key-value Create, Update or Delete is a publish to
// $KV.<bucket>.<key> (with expected-revision and operation headers),
// answered on the writer's inbox.
var PlacementWriters = []string{catalog.ComponentSandboxd}

// Permissions are the publish and subscribe permissions of one identity,
// in nats-server's terms (allow lists, deny lists overriding them). A nil
// Permissions means everything is allowed (admin).
type Permissions struct {
	PublishAllow, PublishDeny     []string
	SubscribeAllow, SubscribeDeny []string
}

// PermissionsOf returns what id may do on a bus whose identities are all
// (the sandbox daemons with identities of their own among them have
// consumers that id is denied).
func PermissionsOf(id Identity, all []Identity) (*Permissions, error) {
	p := &Permissions{}
	protected := protectedDurables(all)
	switch id.Role {
	case RoleAdmin:
		return nil, nil
	case RoleReader:
		readPermissions(p, "", protected)
	case RoleExt:
		readPermissions(p, "", protected)
		// Its own outside events: on the subjects that end with its
		// name, which VERA_EXT counts per run (bus.ExtInRoot).
		p.PublishAllow = append(p.PublishAllow, bus.ExtInRoot+".*."+id.Name)
	case RoleComponent:
		readPermissions(p, id.Name, protected)
		if err := componentPublish(p, id.Name, ComponentDurables[id.Name]); err != nil {
			return nil, err
		}
		if id.Name == catalog.ComponentSandboxd {
			// A sandbox daemon started with an id but no identity of its
			// own runs as sandboxd, with durables sandboxd-<id> and
			// sandboxd-control-<id>, and their dead letters: a subject
			// permission cannot name a prefix of a token, so this
			// identity may write every consumer's.
			p.PublishAllow = append(p.PublishAllow, bus.DeadLetterSubject+".*.*")
		}
	case RoleSandboxd:
		readPermissions(p, id.Name, protected)
		if err := componentPublish(p, catalog.ComponentSandboxd, SandboxDaemonDurables(id.Name)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("identity %q has unknown role %q", id.Name, id.Role)
	}
	return p, nil
}

// componentPublish adds what component publishes: the catalogue types it
// produces, the dead letters of its durables, its live subjects, blobs,
// and the placement bucket when it writes it.
func componentPublish(p *Permissions, component string, durables []string) error {
	for _, typ := range catalog.ProducedBy(component) {
		subj, err := bus.FilterSubject("*", typ)
		if err != nil {
			return fmt.Errorf("permissions of %s: %w", component, err)
		}
		p.PublishAllow = append(p.PublishAllow, subj)
	}
	// Dead letters of its own consumers (vera.dlq.<consumer>.<run>).
	for _, d := range durables {
		p.PublishAllow = append(p.PublishAllow, bus.DeadLetterSubject+"."+d+".*")
	}
	// Live pieces of the model replies it streams (core NATS,
	// stored nowhere; see internal/live).
	p.PublishAllow = append(p.PublishAllow, LivePublish[component]...)
	// Blobs: big model I/O and tool output (bus.PutBlob). Putting only:
	// deleting or purging blobs is admin's.
	p.PublishAllow = append(p.PublishAllow, "$O."+bus.BlobBucket+".>")
	if slices.Contains(PlacementWriters, component) {
		p.PublishAllow = append(p.PublishAllow, "$KV."+bus.PlacementBucket+".>")
	}
	return nil
}

// readPermissions fills what every non-admin identity may do: read the
// streams through named consumers and message gets, and nothing to another
// identity's durable consumers. protected are the durables by owner;
// owner's own ("" for none) are left to it.
//
// The JetStream API is an allow-list: exactly the requests the bus sends
// to read (nats.go's jetstream package: stream info, direct and stored
// message gets, named consumers — ordered ones, the object store's and a
// key-value watch's —, their info, pulls and deletion, flow control).
// Everything else under $JS.API is refused by the server, the legacy
// forms included:
// the 5-token $JS.API.CONSUMER.CREATE.<stream>, where the server takes the
// consumer's name from the request's body and updates an existing one (a
// reader could rewrite the agent's durable), and
// $JS.API.CONSUMER.DURABLE.CREATE. In the forms allowed the consumer's
// name is a token of the subject, which the server checks against the
// body, so a deny of a durable's subjects holds. No identity but admin
// creates or changes a stream, pauses, resets or unpins a consumer,
// deletes another identity's durable, deletes or purges messages, or
// moves, snapshots or restores anything.
func readPermissions(p *Permissions, owner string, protected map[string][]string) {
	p.SubscribeAllow = append(p.SubscribeAllow,
		"vera.>",   // core NATS: watch events as they are stored
		"_INBOX.>", // replies: JetStream API answers, pulled messages, publish acks
	)
	p.PublishAllow = append(p.PublishAllow, ReadAPI()...)
	for _, c := range slices.Sorted(mapKeys(protected)) {
		if c == owner {
			continue
		}
		for _, d := range protected[c] {
			p.PublishDeny = append(p.PublishDeny, durableSubjects(bus.StreamName, d)...)
		}
	}
}

// ReadAPI is the JetStream API every identity that reads may use (see
// readPermissions), in nats-server's subject syntax.
func ReadAPI() []string {
	out := []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.NAMES",
		"$JS.API.STREAM.LIST",
	}
	for _, s := range readStreams {
		out = append(out,
			"$JS.API.STREAM.INFO."+s,
			"$JS.API.STREAM.MSG.GET."+s,
			"$JS.API.DIRECT.GET."+s,
			"$JS.API.DIRECT.GET."+s+".>",
			"$JS.API.CONSUMER.CREATE."+s+".*",   // a named consumer (no filter, or several)
			"$JS.API.CONSUMER.CREATE."+s+".*.>", // a named consumer with one filter
			"$JS.API.CONSUMER.INFO."+s+".*",
			"$JS.API.CONSUMER.NAMES."+s,
			"$JS.API.CONSUMER.LIST."+s,
			"$JS.API.CONSUMER.MSG.NEXT."+s+".*",
			// Deleting a consumer it made: nats.go deletes a key-value
			// watch's and an object get's consumer synchronously when it
			// stops (refused, each stop would wait for its timeout). A
			// durable of another identity is denied (durableSubjects); an
			// ephemeral one of another client can be deleted, and VERA's
			// are all ordered consumers, which make a new one.
			"$JS.API.CONSUMER.DELETE."+s+".*",
			"$JS.ACK."+s+".>", // acknowledgements (another identity's durables are denied)
			"$JS.FC."+s+".>",  // flow control replies of push consumers (key-value watches)
		)
	}
	return out
}

// durableSubjects are the API subjects that act on durable d of stream s.
func durableSubjects(s, d string) []string {
	return []string{
		"$JS.API.CONSUMER.CREATE." + s + "." + d,
		"$JS.API.CONSUMER.CREATE." + s + "." + d + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + s + "." + d,
		"$JS.API.CONSUMER.MSG.NEXT." + s + "." + d,
		"$JS.API.CONSUMER.DELETE." + s + "." + d,
		"$JS.API.CONSUMER.PAUSE." + s + "." + d,
		"$JS.API.CONSUMER.RESET." + s + "." + d,
		"$JS.API.CONSUMER.UNPIN." + s + "." + d,
		"$JS.ACK." + s + "." + d + ".>",
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Describe is a one-line summary of what an identity may publish, for
// `vera auth list`.
func Describe(id Identity) string {
	switch id.Role {
	case RoleAdmin:
		return "everything (streams, imports)"
	case RoleReader:
		return "read only"
	case RoleExt:
		return "read; publish its outside events on " + bus.ExtInRoot + ".*." + id.Name + " (stored as vera.run.*.ext." + id.Name + ")"
	case RoleSandboxd:
		return "sandbox daemon --id " + id.Name + ": " + describeComponent(catalog.ComponentSandboxd) + "; its own consumers " + strings.Join(SandboxDaemonDurables(id.Name), ", ")
	}
	return describeComponent(id.Name)
}

func describeComponent(name string) string {
	types := catalog.ProducedBy(name)
	if len(types) == 0 {
		return "read; publishes no event type"
	}
	out := "read; publish " + strings.Join(types, ", ")
	if live := LivePublish[name]; len(live) > 0 {
		out += "; live " + strings.Join(live, ", ")
	}
	if slices.Contains(PlacementWriters, name) {
		out += "; write the placement bucket " + bus.PlacementBucket
	}
	return out
}
