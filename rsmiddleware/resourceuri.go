package rsmiddleware

import "strings"

// specialSchemes are the WHATWG URL Standard's special schemes and their
// default ports ("" for file).
var specialSchemes = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21", "file": ""}

// resourceURIForms returns the spellings under which the server behind may
// look up the resource URI uri: uri itself and, when it differs, the form
// a WHATWG URL parser serialises it to (the TypeScript MCP SDK reads
// resources/read as new URL(uri).toString(): the scheme and a special
// scheme's host lower-cased, a default port dropped, an empty path of a
// special scheme made "/"). A resources/read needs the scopes of every
// form, so that "CONFIG://secrets" needs those of config://secrets.
//
// Non-ASCII text is percent-encoded as UTF-8 in that form; a string that
// is no URI (no RFC 3986 scheme) has itself as its only form.
//
// ok is false for a URI whose serialisation the form above does not
// cover, which is refused: spaces and control characters (a WHATWG parser
// drops tabs and newlines and trims spaces and controls), a backslash, the
// characters RFC 3986 excludes and WHATWG percent-encodes (" < > ` { } | ^),
// a quote in the query of a special scheme, "." and ".." path segments
// (also %2e-encoded, which WHATWG resolves), a special scheme without
// "//", userinfo, IP literals or numeric hosts other than dotted decimal
// quads and non-ASCII hosts of special schemes (which WHATWG rewrites),
// empty or zero-padded ports, and a file URI with a host.
func resourceURIForms(uri string) (forms []string, ok bool) {
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c <= 0x20 || c == 0x7f || strings.IndexByte("\\\"<>`{}|^", c) >= 0 {
			return nil, false
		}
	}
	colon := strings.IndexByte(uri, ':')
	if colon <= 0 || !validScheme(uri[:colon]) {
		// No URI: a WHATWG parser refuses it, a server looking it up as
		// a string reads it as sent.
		return []string{uri}, true
	}
	scheme, rest := strings.ToLower(uri[:colon]), uri[colon+1:]
	defPort, special := specialSchemes[scheme]
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteByte(':')
	hierarchical := strings.HasPrefix(rest, "/")
	if strings.HasPrefix(rest, "//") {
		end := strings.IndexAny(rest[2:], "/?#")
		if end < 0 {
			end = len(rest) - 2
		}
		authority := rest[2 : 2+end]
		rest = rest[2+end:]
		host, ok := normalAuthority(authority, scheme, defPort, special)
		if !ok {
			return nil, false
		}
		b.WriteString("//")
		writeEscaped(&b, host)
		if special && (rest == "" || rest[0] == '?' || rest[0] == '#') {
			b.WriteByte('/')
		}
		hierarchical = true
	} else if special {
		return nil, false
	}
	end := strings.IndexAny(rest, "?#")
	if end < 0 {
		end = len(rest)
	}
	path, tail := rest[:end], rest[end:]
	if hierarchical {
		for seg := range strings.SplitSeq(path, "/") {
			if s := strings.ReplaceAll(strings.ToLower(seg), "%2e", "."); s == "." || s == ".." {
				return nil, false
			}
		}
	}
	if special && strings.HasPrefix(tail, "?") {
		q, _, _ := strings.Cut(tail, "#")
		if strings.IndexByte(q, '\'') >= 0 {
			return nil, false
		}
	}
	writeEscaped(&b, path)
	writeEscaped(&b, tail)
	forms = []string{uri}
	if n := b.String(); n != uri {
		forms = append(forms, n)
	}
	return forms, true
}

// writeEscaped writes s with its bytes past ASCII percent-encoded, as a
// WHATWG parser writes the UTF-8 of non-ASCII code points in a path, query,
// fragment or opaque host.
func writeEscaped(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
}

// validScheme reports whether s is an RFC 3986 §3.1 scheme.
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !('a' <= c && c <= 'z' || i > 0 && ('0' <= s[i] && s[i] <= '9' || s[i] == '+' || s[i] == '-' || s[i] == '.')) {
			return false
		}
	}
	return s != ""
}

// normalAuthority is the authority of a resource URI as a WHATWG parser
// serialises it, or ok false when resourceURIForms refuses it.
func normalAuthority(a, scheme, defPort string, special bool) (string, bool) {
	if strings.ContainsAny(a, "@[]") {
		return "", false
	}
	if scheme == "file" {
		return "", a == ""
	}
	host, port, hasPort := strings.Cut(a, ":")
	if hasPort {
		if port == "" || strings.IndexByte(port, ':') >= 0 || port[0] == '0' && port != "0" {
			return "", false
		}
		for i := 0; i < len(port); i++ {
			if port[i] < '0' || port[i] > '9' {
				return "", false
			}
		}
		if len(port) > 5 || special && port == defPort {
			if len(port) > 5 {
				return "", false
			}
			hasPort = false
		}
	}
	if special {
		if host == "" || strings.ContainsFunc(host, func(r rune) bool { return r == '%' || r >= 0x80 }) {
			return "", false
		}
		host = strings.ToLower(host)
		if numericHost(host) && !dottedQuad(host) {
			return "", false
		}
	}
	if hasPort {
		return host + ":" + port, true
	}
	return host, true
}

// numericHost reports whether a WHATWG parser reads host as an IPv4
// address: its last label (a trailing dot aside) starts with a digit.
func numericHost(host string) bool {
	h := strings.TrimSuffix(host, ".")
	last := h[strings.LastIndexByte(h, '.')+1:]
	return last != "" && '0' <= last[0] && last[0] <= '9'
}

// dottedQuad reports whether host is four decimal octets without leading
// zeros, the form a WHATWG parser serialises an IPv4 address in.
func dottedQuad(host string) bool {
	parts := strings.Split(host, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || len(p) > 1 && p[0] == '0' {
			return false
		}
		n := 0
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return false
			}
			n = n*10 + int(p[i]-'0')
		}
		if n > 255 {
			return false
		}
	}
	return true
}
