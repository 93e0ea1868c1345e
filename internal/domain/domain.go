// Package domain finds the registrable domain (eTLD+1) of a URL or host,
// the unit in which VERA counts independent sources: the agent's
// negative-claim protocol and the auditor's SCOUT gating must agree on it,
// so both use this one function.
//
// It knows single-label public suffixes and a built-in list of common
// multi-label ones (no download of the Public Suffix List: this project's
// machines reach no other network); a suffix it does not know is treated
// as one label.
package domain

import (
	"net"
	"net/url"
	"strings"
)

// multiPartSuffixes are common public suffixes of more than one label.
var multiPartSuffixes = map[string]bool{}

func init() {
	for _, s := range strings.Fields(`
ac.at ac.cn ac.id ac.il ac.in ac.jp ac.ke ac.kr ac.nz ac.th ac.uk ac.za
appspot.com asn.au asso.fr azurewebsites.net blogspot.com cloudfront.net
co.at co.id co.il co.in co.it co.jp co.ke co.kr co.nz co.th co.uk co.za
com.ar com.au com.br com.cn com.co com.cy com.eg com.es com.gr com.hk com.mt
com.mx com.my com.ng com.pe com.ph com.pk com.pl com.pt com.ru com.sa com.sg
com.tr com.tw com.ua com.uy com.ve com.vn ed.jp edu.ar edu.au edu.br edu.cn
edu.eg edu.es edu.gr edu.hk edu.in edu.mx edu.my edu.ng edu.ph edu.pk edu.pl
edu.sa edu.sg edu.tr edu.tw edu.vn europa.eu firebaseapp.com firm.in fly.dev
geek.nz gen.in github.io githubusercontent.com gitlab.io glitch.me go.id
go.jp go.ke go.kr go.th gob.ar gob.es gob.mx gouv.fr gov.au gov.br gov.cn
gov.eg gov.gr gov.hk gov.il gov.in gov.it gov.my gov.ng gov.ph gov.pk gov.pl
gov.pt gov.sa gov.sg gov.tr gov.tw gov.ua gov.uk gov.vn gov.za govt.nz gr.jp
gv.at herokuapp.com hf.space id.au in.th ind.in lg.jp ltd.uk me.uk ne.jp
ne.kr net.ar net.au net.br net.cn net.hk net.in net.mx net.nz net.pl net.ru
net.sg net.tr net.tw net.uk net.za netlify.app ngrok-free.app ngrok.io
nhs.uk onrender.com or.at or.id or.jp or.ke or.kr or.th org.ar org.au org.br
org.cn org.es org.hk org.il org.in org.mx org.my org.nz org.pl org.pt org.ru
org.sg org.tr org.tw org.ua org.uk org.za pages.dev plc.uk police.uk re.kr
readthedocs.io replit.app res.in s3.amazonaws.com sch.uk streamlit.app
surge.sh vercel.app web.app wordpress.com workers.dev
`) {
		multiPartSuffixes[s] = true
	}
}

// Host returns the lowercase host of a URL, or of a bare host[:port];
// "" when there is none.
func Host(urlOrHost string) string {
	host := strings.TrimSpace(urlOrHost)
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil {
			return ""
		}
		host = u.Hostname()
	} else {
		if i := strings.IndexAny(host, "/?#"); i >= 0 {
			host = host[:i]
		}
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	return strings.Trim(strings.ToLower(host), ".")
}

// Registrable returns the registrable domain of a URL or host:
// www.bbc.co.uk → bbc.co.uk, docs.python.org → python.org, acme.github.io
// → acme.github.io. IP addresses, single-label hosts and hosts that are
// themselves a listed suffix are returned as they are; "" when there is no
// host.
func Registrable(urlOrHost string) string {
	host := Host(urlOrHost)
	if host == "" || net.ParseIP(host) != nil || !strings.Contains(host, ".") {
		return host
	}
	labels := strings.Split(host, ".")
	n := len(labels)
	for k := min(3, n); k >= 2; k-- {
		if multiPartSuffixes[strings.Join(labels[n-k:], ".")] {
			if k == n {
				return host
			}
			return strings.Join(labels[n-k-1:], ".")
		}
	}
	return strings.Join(labels[n-2:], ".")
}
