package metadata

import (
	"errors"
	"net/url"
	"strings"
)

// ErrInvalidResource is returned by CanonicalResource for a value that is not
// an acceptable resource indicator.
var ErrInvalidResource = errors.New("metadata: invalid resource URI")

// CanonicalResource returns the canonical form of a resource indicator
// (RFC 8707 §2, MCP "canonical server URI"): an absolute http or https URI with
// lowercase scheme and host, no default port, no userinfo, query or fragment,
// no dot segments, and no trailing slash ("https://h/" and "https://h" are one
// resource; so are ".../mcp/" and ".../mcp").
//
// Two resource indicators name the same resource exactly when their canonical
// forms are equal as strings; never compare by prefix.
func CanonicalResource(raw string) (string, error) {
	if raw == "" || len(raw) > 2048 || strings.ContainsAny(raw, " \t\r\n\\") {
		return "", ErrInvalidResource
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return "", ErrInvalidResource
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", ErrInvalidResource
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		return "", ErrInvalidResource
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", ErrInvalidResource
	}
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	path := u.EscapedPath()
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." || strings.EqualFold(seg, "%2e") || strings.EqualFold(seg, "%2e%2e") ||
			strings.EqualFold(seg, ".%2e") || strings.EqualFold(seg, "%2e.") {
			return "", ErrInvalidResource
		}
	}
	path = strings.TrimRight(path, "/")
	return scheme + "://" + host + path, nil
}
