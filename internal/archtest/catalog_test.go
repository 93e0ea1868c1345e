package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// The catalogue's producer and consumer lists are what the bus's
// permissions are generated from (bus/auth) and what docs/events.md tells
// outside programs; these tests read each component's code and fail when
// the two disagree, in either direction.

// componentDirs maps each component's source folder (with its
// subfolders, except those listed on their own) to its catalogue name.
var componentDirs = map[string]string{
	"agents":               catalog.ComponentAgent,
	"sandboxd":             catalog.ComponentSandboxd,
	"verifierd/logic":      catalog.ComponentLogic,
	"verifierd/deepverify": catalog.ComponentDeepVerify,
	"verifierd/verifyfast": catalog.ComponentVerifyFast,
	"projector":            catalog.ComponentProjector,
	"projector/dashboard":  catalog.ComponentDashboard,
	"cmd/vera":             catalog.ComponentCLI,
	"eval":                 catalog.ComponentCLI, // vera eval's runner and scorers
}

// modelClient is the shared model client: a component that imports it
// makes model calls, which the recorder its command wires in
// (internal/llm/llmbus) publishes as vera.model.requested and
// vera.model.responded on the component's own connection.
const modelClient = module + "/internal/llm"

// observers show every event of a run, whatever its type (the catalogue
// lists them as consumers of all).
var observers = map[string]bool{catalog.ComponentProjector: true, catalog.ComponentDashboard: true, catalog.ComponentCLI: true}

// usage is what a component's code shows of the catalogue.
type usage struct {
	produces   map[string]bool // payloads it fills in (and so publishes)
	mentions   map[string]bool // types it names: Type constants, type switches, decode targets
	consumeAll bool            // a durable consumer without a type filter
	callsModel bool            // it imports the model client
}

// payloadTypes maps a payload's Go type name to its event types.
func payloadTypes() map[string][]string {
	out := map[string][]string{}
	for _, e := range catalog.Entries() {
		name := reflect.TypeOf(e.Example).Name()
		out[name] = append(out[name], e.Type)
	}
	return out
}

// typeConstants maps the catalogue's exported Type constants to their
// values, read from its source.
func typeConstants(root string) (map[string]string, error) {
	out := map[string]string{}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join(root, "bus", "catalog"), func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		return nil, err
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok {
					return true
				}
				for i, name := range vs.Names {
					if strings.HasPrefix(name.Name, "Type") && i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if v, err := strconv.Unquote(lit.Value); err == nil && catalog.ValidType(v) {
								out[name.Name] = v
							}
						}
					}
				}
				return true
			})
		}
	}
	return out, nil
}

// scan reads the non-test Go files of dir (and its subfolders, but for
// skip) as the code of one component.
func scan(dir string, skip []string, payloads map[string][]string, consts map[string]string) (usage, error) {
	u := usage{produces: map[string]bool{}, mentions: map[string]bool{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (slices.Contains(skip, path) || d.Name() == "testdata" || d.Name() == "static") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		scanFile(f, &u, payloads, consts)
		return nil
	})
	return u, err
}

func scanFile(f *ast.File, u *usage, payloads map[string][]string, consts map[string]string) {
	catalogName, busName := "", ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		local := filepath.Base(p)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		switch p {
		case module + "/bus/catalog":
			catalogName = local
		case module + "/bus":
			busName = local
		case modelClient:
			u.callsModel = true
		}
	}
	isCatalog := func(e ast.Expr) (string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		x, ok := sel.X.(*ast.Ident)
		return sel.Sel.Name, ok && catalogName != "" && x.Name == catalogName
	}
	mention := func(goType string) {
		for _, t := range payloads[goType] {
			u.mentions[t] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if name, ok := isCatalog(n.Type); ok {
				if len(n.Elts) > 0 {
					for _, t := range payloads[name] {
						u.produces[t] = true
					}
				} else {
					mention(name) // a zero value to decode into
				}
			}
			if sel, ok := n.Type.(*ast.SelectorExpr); ok && busName != "" && sel.Sel.Name == "ConsumerConfig" {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == busName {
					hasTypes := false
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Types" {
								hasTypes = true
							}
						}
					}
					if !hasTypes {
						u.consumeAll = true
					}
				}
			}
		case *ast.StarExpr: // *catalog.X in type switches, assertions, decode targets
			if name, ok := isCatalog(n.X); ok {
				mention(name)
			}
		case *ast.TypeAssertExpr:
			if n.Type != nil {
				if name, ok := isCatalog(n.Type); ok {
					mention(name)
				}
			}
		case *ast.SelectorExpr:
			if name, ok := isCatalog(n); ok {
				if v, ok := consts[name]; ok {
					u.mentions[v] = true
				}
			}
		}
		return true
	})
}

// disagreements compares a component's code with the catalogue's lists.
func disagreements(component string, u usage) []string {
	var out []string
	produced := catalog.ProducedBy(component)
	consumed := catalog.ConsumedBy(component)
	for _, t := range sortedKeys(u.produces) {
		if !slices.Contains(produced, t) {
			out = append(out, fmt.Sprintf("%s publishes %s, but the catalogue does not list it as a producer", component, t))
		}
	}
	for _, t := range produced {
		if !u.produces[t] {
			out = append(out, fmt.Sprintf("the catalogue lists %s as a producer of %s, but its code never fills one in", component, t))
		}
	}
	for _, t := range sortedKeys(u.mentions) {
		if !u.produces[t] && !slices.Contains(consumed, t) {
			out = append(out, fmt.Sprintf("%s reads %s, but the catalogue does not list it as a consumer", component, t))
		}
	}
	for _, t := range consumed {
		if !u.mentions[t] && !u.consumeAll {
			out = append(out, fmt.Sprintf("the catalogue lists %s as a consumer of %s, but its code never reads one", component, t))
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCatalogueListsAreTheCode: every component's producer and consumer
// entries in the catalogue match what its code publishes and reads.
func TestCatalogueListsAreTheCode(t *testing.T) {
	root := filepath.Join("..", "..")
	consts, err := typeConstants(root)
	if err != nil {
		t.Fatal(err)
	}
	payloads := payloadTypes()
	var all []string
	for dir := range componentDirs {
		all = append(all, filepath.Join(root, dir))
	}
	// A component's code may span folders (the cli: cmd/vera and eval).
	byComponent := map[string]*usage{}
	for dir, component := range componentDirs {
		path := filepath.Join(root, dir)
		u, err := scan(path, all, payloads, consts)
		if err != nil {
			t.Fatal(err)
		}
		if len(u.produces)+len(u.mentions) == 0 {
			t.Fatalf("%s: found nothing of the catalogue in %s: the scanner is broken", component, path)
		}
		acc := byComponent[component]
		if acc == nil {
			acc = &usage{produces: map[string]bool{}, mentions: map[string]bool{}}
			byComponent[component] = acc
		}
		maps.Copy(acc.produces, u.produces)
		maps.Copy(acc.mentions, u.mentions)
		acc.consumeAll = acc.consumeAll || u.consumeAll
		acc.callsModel = acc.callsModel || u.callsModel
	}
	for component, u := range byComponent {
		if u.callsModel {
			// Its model clients record their calls on its connection
			// (the cli's: vera eval's judge, on the eval's id).
			u.produces["vera.model.requested"], u.produces["vera.model.responded"] = true, true
		}
		u.consumeAll = u.consumeAll || observers[component]
		for _, d := range disagreements(component, *u) {
			t.Error(d)
		}
	}
}

// TestCatalogueCheckerCatchesDrift runs the checker on code written for
// it: a component that publishes what it may not, and reads what the
// catalogue does not say it reads.
func TestCatalogueCheckerCatchesDrift(t *testing.T) {
	dir := t.TempDir()
	src := `package fake

import (
	"github.com/vera-run/vera/bus"
	cat "github.com/vera-run/vera/bus/catalog"
)

func f(b *bus.Bus) {
	_, _ = b.Events.New("r", cat.ToolFinished{ExitCode: 1})
	_ = bus.ConsumerConfig{Durable: "x", Types: []string{cat.TypeAuditJudged}}
}
`
	if err := os.WriteFile(filepath.Join(dir, "fake.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..")
	consts, err := typeConstants(root)
	if err != nil {
		t.Fatal(err)
	}
	u, err := scan(dir, nil, payloadTypes(), consts)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(disagreements(catalog.ComponentLogic, u), "\n")
	for _, want := range []string{
		"verifier.logic publishes vera.tool.finished, but the catalogue does not list it as a producer",
		"verifier.logic reads vera.audit.judged, but the catalogue does not list it as a consumer",
		"the catalogue lists verifier.logic as a producer of vera.logic.verdict, but its code never fills one in",
		"the catalogue lists verifier.logic as a consumer of vera.agent.step, but its code never reads one",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the checker missed: %s\ngot:\n%s", want, got)
		}
	}
}
