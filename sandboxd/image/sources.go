package image

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hostSuite returns VERSION_CODENAME from root/etc/os-release (or
// root/usr/lib/os-release), or "" when neither names one.
func hostSuite(root string) string {
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
			if ok && k == "VERSION_CODENAME" {
				return strings.Trim(v, `"'`)
			}
		}
		return ""
	}
	return ""
}

// aptSource is one source of apt's configuration: a one-line entry of a
// .list file or a deb822 stanza of a .sources file.
type aptSource struct {
	file   string
	types  []string
	uris   []string
	suites []string
}

// aptMirror returns the mirror the offline build should use: the first URI
// of a "deb" source in root's apt configuration (/etc/apt/sources.list, then
// the *.list and *.sources files of /etc/apt/sources.list.d in name order,
// as apt reads them). A source listing suite is preferred over earlier
// sources that do not (so a security or backports entry that comes first is
// passed over); URIs debootstrap cannot fetch from (cdrom:, mirror+...) are
// skipped. The URI is returned without a trailing slash.
func aptMirror(root, suite string) (string, error) {
	var files []string
	if _, err := os.Stat(filepath.Join(root, "etc/apt/sources.list")); err == nil {
		files = append(files, filepath.Join(root, "etc/apt/sources.list"))
	}
	entries, err := os.ReadDir(filepath.Join(root, "etc/apt/sources.list.d"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".list") || strings.HasSuffix(e.Name(), ".sources")) {
			files = append(files, filepath.Join(root, "etc/apt/sources.list.d", e.Name()))
		}
	}
	var sources []aptSource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if strings.HasSuffix(f, ".sources") {
			sources = append(sources, parseDeb822Sources(f, data)...)
		} else {
			sources = append(sources, parseOneLineSources(f, data)...)
		}
	}
	first := ""
	for _, s := range sources {
		if !slices.Contains(s.types, "deb") {
			continue
		}
		for _, u := range s.uris {
			if !fetchable(u) {
				continue
			}
			u = strings.TrimRight(u, "/")
			if suite != "" && slices.Contains(s.suites, suite) {
				return u, nil
			}
			if first == "" {
				first = u
			}
		}
	}
	if first == "" {
		return "", fmt.Errorf("no deb source in %s/etc/apt/sources.list or %s/etc/apt/sources.list.d", strings.TrimSuffix(root, "/"), strings.TrimSuffix(root, "/"))
	}
	return first, nil
}

// fetchable reports whether debootstrap can download from the URI.
func fetchable(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "http", "https", "ftp", "file":
		return true
	}
	return false
}

// parseOneLineSources parses the one-line format:
//
//	deb [ option=value ... ] uri suite [component ...]
func parseOneLineSources(file string, data []byte) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		typ := f[0]
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			// Options: "[arch=amd64 signed-by=...]" or "[ arch=amd64 ]".
			for len(f) > 0 {
				end := strings.HasSuffix(f[0], "]")
				f = f[1:]
				if end {
					break
				}
			}
		}
		if len(f) < 2 {
			continue
		}
		out = append(out, aptSource{file: file, types: []string{typ}, uris: []string{f[0]}, suites: []string{f[1]}})
	}
	return out
}

// parseDeb822Sources parses the deb822 format of *.sources files: stanzas of
// "Field: value" lines separated by blank lines, continuation lines starting
// with white space, "#" comment lines. Stanzas with "Enabled: no" are
// skipped.
func parseDeb822Sources(file string, data []byte) []aptSource {
	var out []aptSource
	fields := map[string]string{}
	last := ""
	flush := func() {
		if len(fields) > 0 && !strings.EqualFold(strings.TrimSpace(fields["enabled"]), "no") {
			out = append(out, aptSource{
				file:   file,
				types:  strings.Fields(fields["types"]),
				uris:   strings.Fields(fields["uris"]),
				suites: strings.Fields(fields["suites"]),
			})
		}
		fields = map[string]string{}
		last = ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}
