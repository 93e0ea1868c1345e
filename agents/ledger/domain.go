package ledger

import (
	"github.com/vera-run/vera/internal/domain"

	"net"
	"net/url"
	"strings"
)

// Host returns the lower-cased host name of a URL or of a bare host
// ("example.com/x", "example.com:8080"), without port, user info or a
// trailing dot; "" when there is none.
func Host(raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	var h string
	switch {
	case strings.Contains(raw, "://"):
		u, err := url.Parse(raw)
		if err != nil {
			_, rest, _ := strings.Cut(raw, "://")
			return Host(rest)
		}
		h = u.Hostname()
	case strings.HasPrefix(raw, "//"):
		return Host("http:" + raw)
	default:
		h = raw
		if i := strings.IndexAny(h, "/?#"); i >= 0 {
			h = h[:i]
		}
		if i := strings.LastIndexByte(h, '@'); i >= 0 {
			h = h[i+1:]
		}
		if strings.HasPrefix(h, "[") {
			if i := strings.IndexByte(h, ']'); i > 0 {
				h = h[1:i]
			}
		} else if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.Count(h, ":") == 1 {
			h = h[:i]
		}
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || strings.ContainsAny(h, " \t\"'<>\\{}|^`") {
		return ""
	}
	return h
}

// canonHost is Host with a leading www. (or www2. …) removed: the unit in
// which the negative-claim protocol counts domains.
func canonHost(raw string) string {
	h := Host(raw)
	if rest, ok := strings.CutPrefix(h, "www"); ok {
		if i := strings.IndexByte(rest, '.'); i >= 0 && strings.Trim(rest[:i], "0123456789") == "" && strings.Count(rest[i+1:], ".") >= 1 {
			return rest[i+1:]
		}
	}
	return h
}

// RegistrableDomain returns the registrable domain (eTLD+1) of a URL or
// host: news.bbc.co.uk → bbc.co.uk, docs.python.org → python.org,
// acme.github.io → acme.github.io. Public suffixes come from a built-in
// list of common multi-label suffixes (package internal/domain, shared with the auditor); any other
// suffix is the last label. An IP address, a single-label host
// (localhost) and a host that is itself a listed suffix are returned as
// they are; "" when raw has no host.
func RegistrableDomain(raw string) string { return domain.Registrable(Host(raw)) }

// publicSuffix returns the suffix part of a registrable domain.
func publicSuffix(reg string) string {
	_, s, _ := strings.Cut(reg, ".")
	return s
}

// searchEngines are the registrable-domain labels (or whole domains) of
// web search engines: their result pages are not sources.
var searchEngines = map[string]bool{
	"google": true, "bing.com": true, "duckduckgo.com": true, "yahoo": true, "yandex": true,
	"baidu.com": true, "ecosia.org": true, "startpage.com": true, "qwant.com": true, "kagi.com": true,
	"mojeek.com": true, "sogou.com": true, "so.com": true, "search.brave.com": true, "searx.be": true,
	"metager.org": true, "you.com": true, "perplexity.ai": true, "ask.com": true, "aol.com": true,
}

// IsSearchEngine reports whether a URL or host belongs to a web search
// engine (Google, Bing, DuckDuckGo, Yahoo, Yandex, Baidu, Ecosia,
// Startpage, Qwant, Brave Search, a SearX instance…). Its pages are
// neither official nor independent sources.
func IsSearchEngine(raw string) bool {
	h := Host(raw)
	reg := RegistrableDomain(h)
	label, _, _ := strings.Cut(reg, ".")
	switch {
	case h == "":
		return false
	case searchEngines[reg] || searchEngines[h]:
		return true
	case (label == "google" || label == "yandex") && (h == reg || h == "www."+reg || strings.HasPrefix(h, "news.") || strings.HasPrefix(h, "scholar.")):
		return true // google.com, www.google.co.uk, yandex.ru, news.google.com…
	case label == "yahoo" && strings.HasPrefix(h, "search."):
		return true
	case strings.Contains(h, "searx") || strings.HasPrefix(h, "search.brave."):
		return true
	}
	return false
}

// Words that do not identify a vendor on their own.
var (
	corporateWords = map[string]bool{
		"inc": true, "corp": true, "corporation": true, "ltd": true, "llc": true, "gmbh": true, "co": true,
		"company": true, "plc": true, "limited": true, "ag": true, "sa": true, "group": true, "holdings": true,
		"technologies": true, "platforms": true, "foundation": true, "the": true, "labs": true,
	}
	genericWords = map[string]bool{
		"software": true, "systems": true, "research": true, "international": true, "global": true,
		"digital": true, "network": true, "project": true, "official": true, "services": true, "cloud": true,
		"media": true, "games": true, "studios": true, "motors": true, "airlines": true, "pharma": true,
		"energy": true, "health": true, "united": true, "national": true, "american": true, "general": true,
	}
)

// vendorKeys returns the keys a vendor name matches domains with: the
// name's letters and digits run together (OpenAI → openai, Hugging Face
// → huggingface), the same without corporate words (Acme Corp → acme),
// and, for a name of several words, each distinctive word of five letters
// or more (Google DeepMind → google, deepmind).
func vendorKeys(vendor string) []string {
	var ws []string
	var cur strings.Builder
	for _, r := range strings.ToLower(vendor) {
		if isWordRune(r) {
			cur.WriteRune(r)
			continue
		}
		if r == '\'' || r == '\u2019' {
			continue
		}
		if cur.Len() > 0 {
			ws = append(ws, cur.String())
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		ws = append(ws, cur.String())
	}
	var keys []string
	add := func(k string) {
		if len(k) >= 2 {
			for _, e := range keys {
				if e == k {
					return
				}
			}
			keys = append(keys, k)
		}
	}
	add(strings.Join(ws, ""))
	var core []string
	for _, w := range ws {
		if !corporateWords[w] {
			core = append(core, w)
		}
	}
	add(strings.Join(core, ""))
	if len(core) > 1 {
		for _, w := range core {
			if len(w) >= 5 && !genericWords[w] && !stopWords[w] {
				add(w)
			}
		}
	}
	return keys
}

// IsOfficial reports whether a domain (a host or URL) is owned by a
// vendor, given by name or alias ("OpenAI", "Acme Corp") or by one of its
// domains ("openai.com"). A vendor given as a domain matches hosts of the
// same registrable domain. A vendor given as a name matches when the first
// label of the host's registrable domain, hyphens ignored, equals one of
// the name's keys (see vendorKeys), or when the host sits under the
// vendor's own top-level domain: for "Acme", acme.com, docs.acme.com,
// blog.acme.com, acme.io, acme.co.uk and acme.github.io; for "Acme Corp"
// also acme-corp.com; for "Google", blog.google.
//
// Ownership is inferred from names only (no WHOIS): domains a vendor owns
// under another name (chatgpt.com for OpenAI) must be passed as aliases,
// and a name that is a common word matches unrelated domains of that word.
func IsOfficial(domain, vendor string) bool {
	reg := RegistrableDomain(domain)
	vendor = strings.TrimSpace(vendor)
	if reg == "" || vendor == "" || net.ParseIP(reg) != nil {
		return false
	}
	if strings.Contains(vendor, ".") && !strings.ContainsAny(vendor, " \t") {
		return reg == RegistrableDomain(vendor)
	}
	label, _, _ := strings.Cut(reg, ".")
	label = strings.ReplaceAll(label, "-", "")
	suffix := publicSuffix(reg)
	for _, k := range vendorKeys(vendor) {
		if k == label || (k == suffix && len(k) >= 3) {
			return true
		}
	}
	return false
}

// officialAny reports whether domain is official for any of the vendors.
func officialAny(domain string, vendors []string) bool {
	for _, v := range vendors {
		if IsOfficial(domain, v) {
			return true
		}
	}
	return false
}
