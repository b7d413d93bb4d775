package metadata

import (
	"errors"
	"net/url"
	"strings"
)

// Well-known URI suffixes (RFC 8615) used by OAuth discovery.
const (
	// SuffixAuthorizationServer is the RFC 8414 §3 suffix.
	SuffixAuthorizationServer = "oauth-authorization-server"
	// SuffixOpenIDConfiguration is the OpenID Connect Discovery 1.0 §4 suffix.
	SuffixOpenIDConfiguration = "openid-configuration"
	// SuffixProtectedResource is the RFC 9728 §3 suffix.
	SuffixProtectedResource = "oauth-protected-resource"
)

// ErrInvalidIdentifier is returned when an issuer or resource identifier
// cannot be used to build a well-known URL (RFC 8414 §2: https or http URL
// with no query or fragment).
var ErrInvalidIdentifier = errors.New("metadata: invalid issuer or resource identifier")

func parseIdentifier(identifier string) (*url.URL, error) {
	if identifier == "" || len(identifier) > 2048 || strings.ContainsAny(identifier, " \t\r\n\\") {
		return nil, ErrInvalidIdentifier
	}
	u, err := url.Parse(identifier)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(identifier, "#") {
		return nil, ErrInvalidIdentifier
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, ErrInvalidIdentifier
	}
	return u, nil
}

// WellKnownURL builds the well-known URL for identifier (an issuer or a
// resource) by inserting "/.well-known/<suffix>" between the host and the path
// component, as RFC 8414 §3.1 and RFC 9728 §3.1 specify. A terminating slash of
// the path is removed first, so
//
//	WellKnownURL("https://h/mcp", "oauth-protected-resource")
//
// is "https://h/.well-known/oauth-protected-resource/mcp", and an identifier
// without a path yields "https://h/.well-known/<suffix>".
func WellKnownURL(identifier, suffix string) (string, error) {
	u, err := parseIdentifier(identifier)
	if err != nil {
		return "", err
	}
	if suffix == "" || strings.ContainsAny(suffix, "/?#") {
		return "", errors.New("metadata: invalid well-known suffix")
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return u.Scheme + "://" + u.Host + "/.well-known/" + suffix + path, nil
}

// WellKnownPath is WellKnownURL without scheme and host: the path a server
// mounts its handler on.
func WellKnownPath(identifier, suffix string) (string, error) {
	s, err := WellKnownURL(identifier, suffix)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", ErrInvalidIdentifier
	}
	return u.EscapedPath(), nil
}

// DiscoveryURLs lists, in the order clients try them, the URLs at which the
// metadata of issuer may be found (MCP 2025-11-25 "Authorization Server
// Metadata Discovery"):
//
//  1. RFC 8414 §3.1 path-inserted:  https://h/.well-known/oauth-authorization-server/p
//  2. OIDC path-inserted:           https://h/.well-known/openid-configuration/p
//  3. OIDC Discovery §4 appended:   https://h/p/.well-known/openid-configuration
//  4. root (issuers without a path: https://h/.well-known/oauth-authorization-server)
//
// For an issuer without a path the list collapses to the two root forms.
// Duplicates are removed.
func DiscoveryURLs(issuer string) ([]string, error) {
	u, err := parseIdentifier(issuer)
	if err != nil {
		return nil, err
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	cands := []string{
		origin + "/.well-known/" + SuffixAuthorizationServer + path,
		origin + "/.well-known/" + SuffixOpenIDConfiguration + path,
		origin + path + "/.well-known/" + SuffixOpenIDConfiguration,
		origin + "/.well-known/" + SuffixAuthorizationServer,
	}
	out := cands[:0]
	seen := make(map[string]bool, len(cands))
	for _, c := range cands {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}
