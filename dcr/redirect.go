package dcr

import (
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
)

// RedirectKind classifies an acceptable redirect URI.
type RedirectKind int

// Redirect URI kinds (RFC 8252 §7, OAuth 2.1 §2.3.1).
const (
	// RedirectHTTPS is an https URI (RFC 8252 §7.2 claimed URLs, web clients).
	RedirectHTTPS RedirectKind = iota + 1
	// RedirectLoopback is http on 127.0.0.1, [::1] or localhost (RFC 8252 §7.3).
	RedirectLoopback
	// RedirectPrivateUse is a private-use URI scheme such as
	// cursor://anysphere.cursor-mcp/oauth/callback or com.example.app:/cb
	// (RFC 8252 §7.1); native applications only.
	RedirectPrivateUse
)

// schemes that are never acceptable as private-use redirect schemes: they
// run code, read local files, or belong to other protocols.
var forbiddenSchemes = map[string]bool{
	"javascript": true, "data": true, "vbscript": true, "file": true, "about": true,
	"blob": true, "filesystem": true, "ftp": true, "ws": true, "wss": true,
	"mailto": true, "tel": true, "sms": true, "urn": true, "view-source": true,
	"chrome": true, "resource": true, "jar": true,
}

// CheckRedirectURI classifies raw as a redirect URI or says why it is refused:
// it must be absolute, without fragment (RFC 6749 §3.1.2), userinfo or
// wildcard; https anywhere, http only on loopback (127.0.0.1, [::1],
// localhost), or a private-use scheme (which only native clients may use).
func CheckRedirectURI(raw string) (RedirectKind, error) {
	if raw == "" {
		return 0, errors.New("is empty")
	}
	if strings.Contains(raw, "#") {
		return 0, errors.New("has a fragment")
	}
	if strings.Contains(raw, "*") {
		return 0, errors.New("has a wildcard")
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f || r == '\\' {
			return 0, errors.New("contains whitespace, control characters or backslashes")
		}
		if r > 0x7e {
			// URIs are ASCII (RFC 3986 §2); a Unicode host could imitate
			// another on the consent page. IDNs must arrive as punycode.
			return 0, errors.New("contains non-ASCII characters (use punycode or percent-encoding)")
		}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return 0, errors.New("is not an absolute URI")
	}
	if u.User != nil || strings.Contains(u.Host, "@") {
		return 0, errors.New("has userinfo")
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "https":
		if u.Opaque != "" || u.Hostname() == "" {
			return 0, errors.New("has no host")
		}
		return RedirectHTTPS, nil
	case "http":
		if u.Opaque != "" || u.Hostname() == "" {
			return 0, errors.New("has no host")
		}
		if !IsLoopbackHost(u.Hostname()) {
			return 0, errors.New("uses http on a host other than 127.0.0.1, [::1] or localhost")
		}
		return RedirectLoopback, nil
	}
	if forbiddenSchemes[scheme] {
		return 0, errors.New("uses a forbidden scheme")
	}
	if u.Opaque != "" {
		return 0, errors.New("is not hierarchical (want scheme:/path or scheme://host/path)")
	}
	if u.Host == "" && u.Path == "" {
		return 0, errors.New("has neither host nor path")
	}
	return RedirectPrivateUse, nil
}

// IsLoopbackHost reports whether host (as url.URL.Hostname returns it) is
// 127.0.0.1, ::1 or localhost.
func IsLoopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h) // nil for a name, and nil equals no address
	return ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)
}

// IsLoopbackRedirect reports whether raw is an http loopback redirect URI.
func IsLoopbackRedirect(raw string) bool {
	k, err := CheckRedirectURI(raw)
	return err == nil && k == RedirectLoopback
}

// LoopbackOnly reports whether every one of uris is a loopback redirect URI.
// The consent page warns about such clients: anything on the person's machine
// can receive the code (RFC 8252 §8.3).
func LoopbackOnly(uris []string) bool {
	if len(uris) == 0 {
		return false
	}
	for _, u := range uris {
		if !IsLoopbackRedirect(u) {
			return false
		}
	}
	return true
}

// MatchRedirectURI reports whether requested equals one of registered exactly,
// except that for http on loopback (127.0.0.1 and the rest of 127/8, [::1],
// localhost) the port is ignored, and a URI registered without a port
// matches any (RFC 8252 §7.3; VS Code and Claude Code redirect on an
// ephemeral port to a portless or other-port registration, Cursor registers
// localhost). The host, path and query still match exactly: a registration
// for localhost does not cover 127.0.0.1.
func MatchRedirectURI(registered []string, requested string) bool {
	if slices.Contains(registered, requested) {
		return true
	}
	q, err := url.Parse(requested)
	if err != nil || q.Scheme != "http" || q.User != nil || q.Fragment != "" {
		return false
	}
	qh := q.Hostname()
	if ip := net.ParseIP(qh); qh != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return false
	}
	for _, r := range registered {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "http" || u.Hostname() != qh {
			continue
		}
		if u.EscapedPath() == q.EscapedPath() && u.RawQuery == q.RawQuery {
			return true
		}
	}
	return false
}
