package archtest

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/vera-run/vera"

// components are the independent consumers. Each may import bus (and
// small shared helpers), never another component. Every verifier under
// verifierd/ is a component of its own.
var components = []string{
	"agents",
	"sandboxd",
	"verifierd/logic",
	"verifierd/verifyfast",
	"verifierd/deepverify",
	"projector",
}

// testOnly are helpers no production package may depend on.
var testOnly = []string{"internal/scriptedmodel", "internal/dockertest", "internal/jaegertest", "bus/bustest", "sandboxd/image/imagetest", "internal/archtest", "component/componenttest",
	"internal/llm/schematest", "internal/modelcheck/modelchecktest", "eval/evaltest", "internal/browsertest"}

// isTestOnly reports whether pkg is a test helper: test helpers may use
// one another (the conformance suite runs on bustest's servers).
func isTestOnly(pkg string) bool {
	for _, t := range testOnly {
		if under(pkg, t) {
			return true
		}
	}
	return false
}

func under(pkg, root string) bool {
	p := module + "/" + root
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

func componentOf(pkg string) string {
	for _, c := range components {
		if under(pkg, c) {
			return c
		}
	}
	return ""
}

// violations checks a package → transitive dependencies graph.
func violations(graph map[string][]string) []string {
	var out []string
	for pkg, deps := range graph {
		own := componentOf(pkg)
		for _, d := range deps {
			if !strings.HasPrefix(d, module+"/") {
				continue
			}
			if other := componentOf(d); other != "" && other != own {
				if own != "" {
					out = append(out, pkg+" imports component "+other+" ("+d+"): components meet only on the bus")
				} else if under(pkg, "bus") {
					out = append(out, pkg+" imports component "+other+" ("+d+"): the bus must not depend on components")
				}
			}
			if under(pkg, "bus") && under(d, "cmd") {
				out = append(out, pkg+" imports "+d)
			}
			for _, t := range testOnly {
				if under(d, t) && !isTestOnly(pkg) {
					out = append(out, pkg+" imports test-only "+d)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestCheckerCatchesViolations(t *testing.T) {
	graph := map[string][]string{
		module + "/agents":               {module + "/bus", module + "/sandboxd/exec"},
		module + "/verifierd/logic":      {module + "/verifierd/verifyfast"},
		module + "/verifierd/verifyfast": {module + "/bus/catalog"},
		module + "/projector":            {module + "/internal/scriptedmodel"},
		module + "/bus":                  {module + "/projector"},
		module + "/cmd/vera":             {module + "/agents", module + "/sandboxd", module + "/projector"},
		module + "/sandboxd/exec":        {"github.com/docker/docker/client"},
	}
	got := violations(graph)
	if len(got) != 4 {
		t.Fatalf("want 4 violations, got %d:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, want := range []string{"agents imports component sandboxd", "logic imports component verifierd/verifyfast", "projector imports test-only", "bus imports component projector"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("missing %q in %v", want, got)
		}
	}
}

// TestComponentsNeverImportEachOther checks the real module with go list.
func TestComponentsNeverImportEachOther(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", module+"/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		graph[fields[0]] = fields[1:]
	}
	if len(graph) < 5 {
		t.Fatalf("go list found only %d packages", len(graph))
	}
	if _, ok := graph[module+"/bus"]; !ok {
		t.Fatal("go list did not list the bus package")
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}
