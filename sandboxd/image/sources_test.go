package image

import (
	"os"
	"path/filepath"
	"testing"
)

// debianSources is Debian 12's default /etc/apt/sources.list.d/debian.sources
// (as on the CI machine, with its snapshot comments).
const debianSources = `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`

func TestAptMirror(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string // relative to the root
		suite   string
		want    string
		wantErr bool
	}{
		{
			name:  "one-line sources.list",
			files: map[string]string{"etc/apt/sources.list": "deb http://deb.debian.org/debian bookworm main\n"},
			suite: "bookworm",
			want:  "http://deb.debian.org/debian",
		},
		{
			name: "comments, deb-src, options and a trailing slash",
			files: map[string]string{"etc/apt/sources.list": `# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main

deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://ftp.fr.debian.org/debian/ bookworm main contrib # mirror
`},
			suite: "bookworm",
			want:  "http://ftp.fr.debian.org/debian",
		},
		{
			name:  "options with spaces inside the brackets",
			files: map[string]string{"etc/apt/sources.list": "deb [ arch=amd64 trusted=yes ] https://mirror.example/debian bookworm main\n"},
			suite: "bookworm",
			want:  "https://mirror.example/debian",
		},
		{
			name:  "deb822 Debian 12 default",
			files: map[string]string{"etc/apt/sources.list.d/debian.sources": debianSources},
			suite: "bookworm",
			want:  "http://deb.debian.org/debian",
		},
		{
			name: "deb822: disabled, deb-src only, multiple URIs, continuation lines",
			files: map[string]string{"etc/apt/sources.list.d/a.sources": `Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main

types: deb deb-src
uris: http://first.example/debian
  http://second.example/debian
suites: bookworm
components: main
signed-by:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBGPL0BUBEADmW5NdOOHwPIJlgPu6JDcKw/NZJPzmgeGntU0wrA
 -----END PGP PUBLIC KEY BLOCK-----
`},
			suite: "bookworm",
			want:  "http://first.example/debian",
		},
		{
			name: "the suite's source wins over an earlier security source",
			files: map[string]string{"etc/apt/sources.list": `deb http://security.debian.org/debian-security bookworm-security main
deb http://deb.debian.org/debian bookworm main
`},
			suite: "bookworm",
			want:  "http://deb.debian.org/debian",
		},
		{
			name:  "no source for the suite: the first deb source",
			files: map[string]string{"etc/apt/sources.list": "deb http://deb.debian.org/debian-security bookworm-security main\n"},
			suite: "trixie",
			want:  "http://deb.debian.org/debian-security",
		},
		{
			name: "sources.list comes before sources.list.d",
			files: map[string]string{
				"etc/apt/sources.list":                  "deb http://main.example/debian bookworm main\n",
				"etc/apt/sources.list.d/debian.sources": debianSources,
			},
			suite: "bookworm",
			want:  "http://main.example/debian",
		},
		{
			name: "sources.list.d in name order, other suffixes ignored",
			files: map[string]string{
				"etc/apt/sources.list":                             "# empty\n",
				"etc/apt/sources.list.d/00-google.list.disabled":   "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n",
				"etc/apt/sources.list.d/10-local.list":             "deb http://local.example/debian bookworm main\n",
				"etc/apt/sources.list.d/20-debian.sources":         debianSources,
				"etc/apt/sources.list.d/nodesource.sources.backup": "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: bookworm\n",
			},
			suite: "bookworm",
			want:  "http://local.example/debian",
		},
		{
			name: "URIs debootstrap cannot use are skipped",
			files: map[string]string{"etc/apt/sources.list": `deb cdrom:[Debian GNU/Linux 12]/ bookworm main
deb mirror+file:/etc/apt/mirrors/debian.list bookworm main
deb file:/srv/mirror/debian bookworm main
`},
			suite: "bookworm",
			want:  "file:/srv/mirror/debian",
		},
		{
			name:    "no apt configuration",
			files:   map[string]string{},
			suite:   "bookworm",
			wantErr: true,
		},
		{
			name:    "only deb-src",
			files:   map[string]string{"etc/apt/sources.list": "deb-src http://deb.debian.org/debian bookworm main\n"},
			suite:   "bookworm",
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			got, err := aptMirror(root, tt.suite)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("aptMirror = %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("aptMirror = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHostSuite(t *testing.T) {
	tests := []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"etc/os-release": "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\nID=debian\n"}, "bookworm"},
		{map[string]string{"etc/os-release": "VERSION_CODENAME=\"jammy\"\n"}, "jammy"},
		{map[string]string{"usr/lib/os-release": "VERSION_CODENAME=trixie\n"}, "trixie"},
		{map[string]string{"etc/os-release": "ID=debian\nPRETTY_NAME=\"Debian GNU/Linux trixie/sid\"\n"}, ""},
		{map[string]string{}, ""},
	}
	for _, tt := range tests {
		if got := hostSuite(writeTree(t, tt.files)); got != tt.want {
			t.Errorf("hostSuite(%v) = %q, want %q", tt.files, got, tt.want)
		}
	}
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
