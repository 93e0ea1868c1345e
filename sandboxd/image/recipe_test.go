package image

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestTagFormatAndStability(t *testing.T) {
	for _, o := range []Options{
		{},
		{BaseImage: "debian:bookworm"},
		{Offline: true, Suite: "bookworm", Mirror: "http://deb.debian.org/debian"},
		{Offline: true}, // host defaults
	} {
		tag := Tag(o)
		if !regexp.MustCompile(`^vera-sandbox:[0-9a-f]{12}$`).MatchString(tag) {
			t.Errorf("Tag(%+v) = %q, want vera-sandbox:<12 hex>", o, tag)
		}
		if again := Tag(o); again != tag {
			t.Errorf("Tag(%+v) not stable: %q then %q", o, tag, again)
		}
		if Hash(o) != strings.TrimPrefix(tag, Repository+":") {
			t.Errorf("Hash and Tag disagree for %+v", o)
		}
	}
}

func TestTagDefaultsAndIrrelevantOptions(t *testing.T) {
	if Tag(Options{}) != Tag(Options{BaseImage: DefaultBaseImage}) {
		t.Error("the default base image must give the same tag as naming it")
	}
	off := Options{Offline: true, Suite: "bookworm", Mirror: "http://deb.debian.org/debian"}
	same := []Options{
		{Offline: true, Suite: "bookworm", Mirror: "http://deb.debian.org/debian/"}, // trailing slash
		{Offline: true, Suite: "bookworm", Mirror: "http://deb.debian.org/debian", BaseImage: "x:y"},
		{Offline: true, Suite: "bookworm", Mirror: "http://deb.debian.org/debian", KeepWorkDir: true, Progress: io.Discard},
	}
	for _, o := range same {
		if Tag(o) != Tag(off) {
			t.Errorf("Tag(%+v) = %s, want %s like %+v", o, Tag(o), Tag(off), off)
		}
	}
	if Tag(Options{Suite: "trixie", Mirror: "http://example.org/debian"}) != Tag(Options{}) {
		t.Error("suite and mirror must not change the online tag")
	}
	// The same explicit recipe hashes the same on any machine: the host's
	// defaults only matter when a field is left empty.
	in := recipeInputs{version: "1", dockerfile: "FROM x\n", profile: "p", packages: []string{"a"}, offline: true, suite: "s", mirror: "m"}
	if in.hash() != "eb434dbdaa5b" {
		t.Errorf("recipe hash of fixed inputs = %s; the hash function changed (every tag changes with it)", in.hash())
	}
}

func TestTagChangesWithEveryInput(t *testing.T) {
	base := recipeInputs{
		version: RecipeVersion, dockerfile: string(dockerfile), profile: string(profileScript),
		packages: packages, offline: true, suite: "bookworm", mirror: "http://deb.debian.org/debian",
	}
	online := base
	online.offline, online.suite, online.mirror, online.baseImage = false, "", "", DefaultBaseImage
	variants := map[string]recipeInputs{"offline": base, "online": online}
	mod := func(name string, from recipeInputs, f func(*recipeInputs)) {
		f(&from)
		variants[name] = from
	}
	mod("version", base, func(r *recipeInputs) { r.version = "2" })
	mod("dockerfile", base, func(r *recipeInputs) { r.dockerfile += "\n" })
	mod("profile", base, func(r *recipeInputs) { r.profile += "#\n" })
	mod("packages+", base, func(r *recipeInputs) { r.packages = append(slices.Clone(r.packages), "vim") })
	mod("packages-", base, func(r *recipeInputs) { r.packages = r.packages[1:] })
	mod("packages-split", base, func(r *recipeInputs) { r.packages = []string{"a b", "c"} })
	mod("packages-joined", base, func(r *recipeInputs) { r.packages = []string{"a", "b c"} })
	mod("suite", base, func(r *recipeInputs) { r.suite = "trixie" })
	mod("mirror", base, func(r *recipeInputs) { r.mirror = "http://ftp.de.debian.org/debian" })
	mod("salt", base, func(r *recipeInputs) { r.salt = "x" })
	mod("base-image", online, func(r *recipeInputs) { r.baseImage = "debian:bookworm" })
	seen := map[string]string{}
	for name, in := range variants {
		h := in.hash()
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s give the same hash %s", name, other, h)
		}
		seen[h] = name
	}
	// Through the public API.
	a := Tag(Options{Offline: true, Suite: "bookworm", Mirror: "http://a/debian"})
	b := Tag(Options{Offline: true, Suite: "bookworm", Mirror: "http://b/debian"})
	c := Tag(Options{Offline: true, Suite: "trixie", Mirror: "http://a/debian"})
	d := Tag(Options{BaseImage: "debian:bookworm"})
	e := Tag(Options{})
	if len(map[string]bool{a: true, b: true, c: true, d: true, e: true}) != 5 {
		t.Errorf("tags not all different: %s %s %s %s %s", a, b, c, d, e)
	}
}

func TestImportChangesMatchTheDockerfile(t *testing.T) {
	const hash = "0123456789ab"
	changes := importChanges(hash)
	want := []string{
		"ENV LANG=C.UTF-8",
		"ENV PATH=/work/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"ENV XDG_CACHE_HOME=/work/.cache",
		"ENV PIP_CACHE_DIR=/work/.cache/pip",
		"ENV npm_config_cache=/work/.cache/npm",
		"ENV PLAYWRIGHT_BROWSERS_PATH=/work/.cache/ms-playwright",
		"WORKDIR /work",
		`ENTRYPOINT ["/usr/bin/tini","--"]`,
		`CMD ["sleep","infinity"]`,
		"LABEL vera.built-by=vera vera.recipe=0123456789ab",
	}
	if !slices.Equal(changes, want) {
		t.Errorf("importChanges:\n got %q\nwant %q", changes, want)
	}
	// Every configuration instruction is a line of the Dockerfile, and the
	// Dockerfile sets no other configuration.
	lines := strings.Split(string(dockerfile), "\n")
	for _, c := range configInstructions() {
		if !slices.Contains(lines, c) {
			t.Errorf("Dockerfile lacks the line %q", c)
		}
	}
	for _, l := range lines {
		for _, kw := range []string{"ENV ", "WORKDIR ", "CMD ", "ENTRYPOINT ", "USER ", "LABEL "} {
			if strings.HasPrefix(l, kw) && !slices.Contains(changes, l) {
				t.Errorf("Dockerfile line %q is not applied by the offline import", l)
			}
		}
	}
	if got := Env(); !strings.HasPrefix(got[1], "PATH="+VenvDir+"/bin:") {
		t.Errorf("PATH does not start with the venv: %q", got[1])
	}
}

func TestDockerfile(t *testing.T) {
	df := string(Dockerfile())
	for _, want := range []string{
		"ARG BASE_IMAGE=" + DefaultBaseImage + "\nFROM ${BASE_IMAGE}\n",
		"apt-get install -y --no-install-recommends",
		"mkdir -p /work /input /opt/vera",
		"rm -rf /var/lib/apt/lists/*",
		"COPY " + profileName + " " + profilePath + "\n",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, df)
		}
	}
	for _, p := range []string{"bash", "coreutils", "python3", "python3-venv", "python3-pip", "curl", "wget", "ca-certificates", "git", "jq", "procps", "tini"} {
		if !slices.Contains(Packages(), p) {
			t.Errorf("package %s missing", p)
		}
		if !strings.Contains(df, "        "+p+" \\\n") {
			t.Errorf("Dockerfile does not install %s", p)
		}
	}
	if strings.Contains(df, "{{") {
		t.Errorf("unrendered template text in the Dockerfile:\n%s", df)
	}
}

func TestEnvValuesNeedNoQuoting(t *testing.T) {
	// ENV lines and the profile script write values unquoted / in single
	// quotes; keep them free of characters that would need escaping.
	for _, kv := range envVars {
		if strings.ContainsAny(kv[0]+kv[1], " \t\n'\"\\$`") {
			t.Errorf("env %s=%s needs quoting", kv[0], kv[1])
		}
	}
}

func TestProfileScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	p := filepath.Join(t.TempDir(), "vera.sh")
	if err := os.WriteFile(p, profileScript, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sh, "-c", `PATH=/usr/bin:/bin; . "$1"; echo "$PATH|$PIP_CACHE_DIR|$LANG"`, "sh", p).CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing the profile: %v\n%s", err, out)
	}
	want := "/work/.venv/bin:" + systemPath + "|/work/.cache/pip|C.UTF-8\n"
	if string(out) != want {
		t.Errorf("after the profile: %q, want %q", out, want)
	}
}

func TestBuildContext(t *testing.T) {
	tr := tar.NewReader(bytes.NewReader(BuildContext()))
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[hdr.Name] = b
	}
	if !bytes.Equal(files["Dockerfile"], dockerfile) || !bytes.Equal(files[profileName], profileScript) || len(files) != 2 {
		t.Errorf("build context has %d files: %v", len(files), slices.Collect(func(yield func(string) bool) {
			for k := range files {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if !bytes.Equal(BuildContext(), BuildContext()) {
		t.Error("build context not deterministic")
	}
}
