package rsmiddleware

import (
	"errors"
	"strings"
)

// Errors of ParseAuthorization.
var (
	// ErrNoToken: the header is absent, empty, or of another scheme
	// (RFC 6750 §3.1: the challenge then carries no error code).
	ErrNoToken = errors.New("rsmiddleware: no bearer token")
	// ErrMalformedAuthorization: the header is not "Bearer <b64token>"
	// (RFC 6750 §2.1); answered with invalid_request.
	ErrMalformedAuthorization = errors.New("rsmiddleware: malformed Authorization header")
)

// ParseAuthorization extracts the token from an Authorization header value of
// the form "Bearer <b64token>" (RFC 6750 §2.1). The scheme is matched case
// insensitively (RFC 9110 §11.1); the token must be a b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func ParseAuthorization(header string) (string, error) {
	if header == "" {
		return "", ErrNoToken
	}
	scheme, rest, ok := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// Another scheme carries no bearer token (RFC 6750 §3: answered
		// like a request without credentials).
		return "", ErrNoToken
	}
	if !ok {
		return "", ErrMalformedAuthorization
	}
	tok := strings.TrimLeft(rest, " ")
	if !isB64Token(tok) {
		return "", ErrMalformedAuthorization
	}
	return tok, nil
}

func isB64Token(s string) bool {
	if s == "" || len(s) > 16<<10 {
		return false
	}
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
