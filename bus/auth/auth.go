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
//   - ext: reader plus publish on vera.run.*.ext.> (an outside tool's own
//     events);
//   - identities issued later for a user's own tool (Store.Issue), with
//     the reader or ext role.
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
	RoleExt       Role = "ext"       // read, and publish vera.run.*.ext.>
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
var readStreams = []string{bus.StreamName, bus.DeadLetterStream, "OBJ_" + bus.BlobBucket, "KV_" + bus.PlacementBucket}

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

// PermissionsOf returns what id may do.
func PermissionsOf(id Identity) (*Permissions, error) {
	p := &Permissions{}
	switch id.Role {
	case RoleAdmin:
		return nil, nil
	case RoleReader:
		readPermissions(p, "")
	case RoleExt:
		readPermissions(p, "")
		p.PublishAllow = append(p.PublishAllow, bus.SubjectRoot+".*.ext.>")
	case RoleComponent:
		readPermissions(p, id.Name)
		for _, typ := range catalog.ProducedBy(id.Name) {
			subj, err := bus.FilterSubject("*", typ)
			if err != nil {
				return nil, fmt.Errorf("permissions of %s: %w", id.Name, err)
			}
			p.PublishAllow = append(p.PublishAllow, subj)
		}
		// Dead letters of its own consumers (vera.dlq.<consumer>.<run>).
		for _, d := range ComponentDurables[id.Name] {
			p.PublishAllow = append(p.PublishAllow, bus.DeadLetterSubject+"."+d+".*")
		}
		// Live pieces of the model replies it streams (core NATS,
		// stored nowhere; see internal/live).
		p.PublishAllow = append(p.PublishAllow, LivePublish[id.Name]...)
		// Blobs: big model I/O and tool output (bus.PutBlob), and the
		// purge of a half-written blob's chunks.
		p.PublishAllow = append(p.PublishAllow,
			"$O."+bus.BlobBucket+".>",
			"$JS.API.STREAM.PURGE.OBJ_"+bus.BlobBucket,
		)
		if slices.Contains(PlacementWriters, id.Name) {
			p.PublishAllow = append(p.PublishAllow, "$KV."+bus.PlacementBucket+".>")
			// Each sandbox daemon started with an id has durables of its
			// own (sandboxd-<id>, sandboxd-control-<id>), and their dead
			// letters: a subject permission cannot name a prefix of a
			// token, so the sandbox daemons may write every consumer's.
			p.PublishAllow = append(p.PublishAllow, bus.DeadLetterSubject+".*.*")
		}
	default:
		return nil, fmt.Errorf("identity %q has unknown role %q", id.Name, id.Role)
	}
	return p, nil
}

// readPermissions fills what every non-admin identity may do: read the
// streams through consumers and message gets, and nothing to another
// identity's durable consumers. owner is the component whose durables
// these permissions may use ("" for none).
func readPermissions(p *Permissions, owner string) {
	p.SubscribeAllow = append(p.SubscribeAllow,
		"vera.>",   // core NATS: watch events as they are stored
		"_INBOX.>", // replies: JetStream API answers, pulled messages, publish acks
	)
	p.PublishAllow = append(p.PublishAllow,
		"$JS.API.INFO",
		"$JS.API.STREAM.NAMES",
		"$JS.API.STREAM.LIST",
	)
	for _, s := range readStreams {
		p.PublishAllow = append(p.PublishAllow,
			"$JS.API.STREAM.INFO."+s,
			"$JS.API.STREAM.MSG.GET."+s,
			"$JS.API.DIRECT.GET."+s,
			"$JS.API.DIRECT.GET."+s+".>",
			"$JS.API.CONSUMER.CREATE."+s,
			"$JS.API.CONSUMER.CREATE."+s+".>",
			"$JS.API.CONSUMER.INFO."+s+".*",
			"$JS.API.CONSUMER.NAMES."+s,
			"$JS.API.CONSUMER.LIST."+s,
			"$JS.API.CONSUMER.MSG.NEXT."+s+".*",
			"$JS.API.CONSUMER.DELETE."+s+".*",
			"$JS.ACK."+s+".>",
			"$JS.FC."+s+".>", // flow control replies of push consumers (nats stream view)
		)
	}
	for _, c := range slices.Sorted(mapKeys(ComponentDurables)) {
		if c == owner {
			continue
		}
		for _, d := range ComponentDurables[c] {
			p.PublishDeny = append(p.PublishDeny, durableSubjects(bus.StreamName, d)...)
		}
	}
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
		return "read; publish vera.run.*.ext.>"
	}
	types := catalog.ProducedBy(id.Name)
	if len(types) == 0 {
		return "read; publishes no event type"
	}
	out := "read; publish " + strings.Join(types, ", ")
	if live := LivePublish[id.Name]; len(live) > 0 {
		out += "; live " + strings.Join(live, ", ")
	}
	if slices.Contains(PlacementWriters, id.Name) {
		out += "; write the placement bucket " + bus.PlacementBucket
	}
	return out
}
