package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"
)

// Image naming and labels.
const (
	// Repository is the repository part of every sandbox image tag.
	Repository = "vera-sandbox"

	// RecipeVersion is hashed into the tag. Bump it when the build steps
	// change in a way the recipe text does not show (for example the
	// offline path's post-processing of the debootstrap root filesystem),
	// so that existing images are not reused.
	RecipeVersion = "1"

	// LabelRecipe is the image label holding the recipe hash (the tag).
	LabelRecipe = "vera.recipe"
	// LabelBuiltBy is the image label marking images built by VERA; its value
	// is BuiltBy.
	LabelBuiltBy = "vera.built-by"
	// BuiltBy is the value of LabelBuiltBy.
	BuiltBy = "vera"
)

// Defaults for Options.
const (
	// DefaultBaseImage is the base image of the online (Dockerfile) build.
	DefaultBaseImage = "debian:bookworm-slim"
	// DefaultSuite is the Debian suite of the offline build when the host's
	// /etc/os-release names none.
	DefaultSuite = "bookworm"
	// DefaultMirror is the offline build's mirror when the host's apt
	// sources name none.
	DefaultMirror = "http://deb.debian.org/debian"
)

// Directories of the sandbox file system.
const (
	// WorkDir is the agent's read-write workspace (a bind mount) and the
	// container's working directory. Caches and the agent's virtualenv
	// (WorkDir/.venv) live under it.
	WorkDir = "/work"
	// InputDir is where the task's inputs are mounted read-only.
	InputDir = "/input"
	// HelperDir holds helper scripts VERA puts into the sandbox.
	HelperDir = "/opt/vera"
	// CacheDir is the XDG cache directory, under WorkDir so that caches
	// survive with the workspace and never land in the image.
	CacheDir = WorkDir + "/.cache"
	// VenvDir is the agent's virtualenv; its bin directory comes first on
	// PATH, so `python3 -m venv /work/.venv` is all it takes to use it.
	VenvDir = WorkDir + "/.venv"
)

// systemPath is Debian's default PATH for root, which the image's PATH
// extends. It is spelled out because the offline import has no base image
// whose PATH could be referenced.
const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// packages are installed by both build paths: by apt-get in the Dockerfile
// and by debootstrap --include offline. Dependencies follow; recommended
// packages do not.
var packages = []string{
	"bash",
	"ca-certificates",
	"coreutils",
	"curl",
	"git",
	"jq",
	"procps",
	"python3",
	"python3-pip",
	"python3-venv",
	"tini",
	"wget",
}

// envVars is the image's environment, in order. LANG needs no locales
// package: Debian's libc ships the C.UTF-8 locale.
var envVars = [][2]string{
	{"LANG", "C.UTF-8"},
	{"PATH", VenvDir + "/bin:" + systemPath},
	{"XDG_CACHE_HOME", CacheDir},
	{"PIP_CACHE_DIR", CacheDir + "/pip"},
	{"npm_config_cache", CacheDir + "/npm"},
	{"PLAYWRIGHT_BROWSERS_PATH", CacheDir + "/ms-playwright"},
}

var (
	// entrypoint is tini, so that the long-running container reaps the
	// orphans of the agent's commands and stops promptly on SIGTERM.
	entrypoint = []string{"/usr/bin/tini", "--"}
	// cmd keeps the container alive; commands run in it with exec.
	cmd = []string{"sleep", "infinity"}
)

// dirs are created in the image.
var dirs = []string{WorkDir, InputDir, HelperDir}

// cleanup are removed from the image after the packages are installed
// (globs, as absolute paths inside the image).
var cleanup = []string{
	"/var/lib/apt/lists/*",
	"/var/cache/apt/*.bin",
	"/var/cache/apt/archives/*.deb",
	"/var/cache/debconf/*-old",
	"/var/log/apt",
	"/var/log/alternatives.log",
	"/var/log/bootstrap.log",
	"/var/log/dpkg.log",
}

const (
	// profilePath is the login-shell hook: Debian's /etc/profile resets
	// PATH, so `bash -l` would lose VenvDir/bin without it.
	profilePath = "/etc/profile.d/vera.sh"
	// profileName is the file's name in the Dockerfile build context.
	profileName = "vera-profile.sh"
)

//go:embed recipe/Dockerfile.tmpl
var dockerfileTemplate string

// The rendered recipe, computed once.
var (
	dockerfile    = renderDockerfile()
	profileScript = renderProfile()
)

// Packages returns the packages installed in the image (their dependencies
// come along).
func Packages() []string { return slices.Clone(packages) }

// Env returns the image's environment as KEY=value strings.
func Env() []string {
	out := make([]string, len(envVars))
	for i, kv := range envVars {
		out[i] = kv[0] + "=" + kv[1]
	}
	return out
}

// Cmd returns the image's default command.
func Cmd() []string { return slices.Clone(cmd) }

// Entrypoint returns the image's entrypoint.
func Entrypoint() []string { return slices.Clone(entrypoint) }

// Dockerfile returns the Dockerfile of the online build. Its build context
// also holds the login-shell profile script (see BuildContext).
func Dockerfile() []byte { return bytes.Clone(dockerfile) }

// configInstructions are the Dockerfile instructions that set the image's
// runtime configuration. The Dockerfile ends with them and the offline
// import passes them as its changes, so both paths configure the image with
// the same text.
func configInstructions() []string {
	var out []string
	for _, kv := range envVars {
		out = append(out, "ENV "+kv[0]+"="+kv[1])
	}
	out = append(out, "WORKDIR "+WorkDir)
	out = append(out, "ENTRYPOINT "+jsonArray(entrypoint))
	out = append(out, "CMD "+jsonArray(cmd))
	return out
}

// labels are set on the built image.
func labels(hash string) map[string]string {
	return map[string]string{LabelRecipe: hash, LabelBuiltBy: BuiltBy}
}

// importChanges are the Dockerfile instructions applied to the image created
// by the offline import: the Dockerfile's configuration plus the labels the
// online build sets through the build API.
func importChanges(hash string) []string {
	l := labels(hash)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range l {
			if !yield(k) {
				return
			}
		}
	})
	label := "LABEL"
	for _, k := range keys {
		label += " " + k + "=" + l[k]
	}
	return append(configInstructions(), label)
}

func jsonArray(s []string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // []string always marshals
	}
	return string(b)
}

func renderDockerfile() []byte {
	t := template.Must(template.New("Dockerfile").Parse(dockerfileTemplate))
	var buf bytes.Buffer
	err := t.Execute(&buf, map[string]any{
		"DefaultBaseImage": DefaultBaseImage,
		"WorkDir":          WorkDir,
		"InputDir":         InputDir,
		"Packages":         packages,
		"Cleanup":          cleanup,
		"Dirs":             dirs,
		"ProfileName":      profileName,
		"ProfilePath":      profilePath,
		"Config":           configInstructions(),
	})
	if err != nil {
		panic(fmt.Sprintf("image: rendering the Dockerfile: %v", err))
	}
	return buf.Bytes()
}

func renderProfile() []byte {
	var b strings.Builder
	b.WriteString("# VERA sandbox environment for login shells: /etc/profile resets PATH.\n")
	for _, kv := range envVars {
		fmt.Fprintf(&b, "export %s='%s'\n", kv[0], kv[1])
	}
	return []byte(b.String())
}

// BuildContext returns the online build's context: a tar stream with the
// Dockerfile and the files it copies.
func BuildContext() []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time keeps the context (and the builder's cache key) stable.
	mtime := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []struct {
		name string
		data []byte
	}{{"Dockerfile", dockerfile}, {profileName, profileScript}} {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			panic(err) // writing to a bytes.Buffer does not fail
		}
		if _, err := tw.Write(f.data); err != nil {
			panic(err)
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Hash returns the recipe hash for opts (after defaults are applied, see
// Options.WithDefaults): the first 12 hex digits of a SHA-256 over the
// recipe version, the Dockerfile and build-context files, the package list,
// and the base image (online) or suite and mirror (offline). It does not
// depend on the machine beyond those inputs.
func Hash(opts Options) string {
	o := opts.WithDefaults()
	in := recipeInputs{
		version:    RecipeVersion,
		dockerfile: string(dockerfile),
		profile:    string(profileScript),
		packages:   packages,
		offline:    o.Offline,
		salt:       o.salt,
	}
	if o.Offline {
		in.suite, in.mirror = o.Suite, o.Mirror
	} else {
		in.baseImage = o.BaseImage
	}
	return in.hash()
}

// recipeInputs is everything the tag depends on.
type recipeInputs struct {
	version    string
	dockerfile string
	profile    string
	packages   []string
	offline    bool
	baseImage  string // online
	suite      string // offline
	mirror     string // offline
	salt       string // tests only
}

func (in recipeInputs) hash() string {
	h := sha256.New()
	field := func(name, value string) {
		// Length-prefixed, so no two different inputs serialize alike.
		fmt.Fprintf(h, "%s %d\n%s\n", name, len(value), value)
	}
	field("recipe-version", in.version)
	field("dockerfile", in.dockerfile)
	field("profile", in.profile)
	field("packages", strings.Join(in.packages, "\n"))
	if in.offline {
		field("mode", "offline")
		field("suite", in.suite)
		field("mirror", in.mirror)
	} else {
		field("mode", "online")
		field("base-image", in.baseImage)
	}
	if in.salt != "" {
		field("salt", in.salt)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Tag returns the image tag for opts: "vera-sandbox:<Hash(opts)>". A change
// to any input of the recipe gives a new tag; the same recipe gives the same
// tag on any machine.
func Tag(opts Options) string { return Repository + ":" + Hash(opts) }
