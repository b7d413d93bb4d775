package rsmiddleware

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"
)

// RFC 6750 §3.1 error codes.
const (
	ErrCodeInvalidRequest    = "invalid_request"
	ErrCodeInvalidToken      = "invalid_token"
	ErrCodeInsufficientScope = "insufficient_scope"
)

// statusOf is the one table from RFC 6750 §3.1 error code to HTTP status.
var statusOf = map[string]int{
	"":                       http.StatusUnauthorized,
	ErrCodeInvalidDPoPProof:  http.StatusUnauthorized,
	ErrCodeUseDPoPNonce:      http.StatusUnauthorized,
	ErrCodeInvalidRequest:    http.StatusBadRequest,
	ErrCodeInvalidToken:      http.StatusUnauthorized,
	ErrCodeInsufficientScope: http.StatusForbidden,
}

// Challenge is a Bearer WWW-Authenticate challenge (RFC 6750 §3,
// RFC 9728 §5.1).
type Challenge struct {
	// Scheme is SchemeBearer (the zero value) or SchemeDPoP (RFC 9449 §7.1).
	Scheme string
	// Algs, for a DPoP challenge, are the accepted proof algorithms.
	Algs             []string
	ResourceMetadata string   // resource_metadata, the PRM URL
	Scopes           []string // scope: every scope the request needs
	Error            string   // "" when no token was sent
	Description      string   // error_description: fixed, safe text only
}

// String renders the header value, for example
//
//	Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", scope="read", error="invalid_token"
func (c Challenge) String() string {
	var b strings.Builder
	scheme := SchemeBearer
	if c.Scheme != "" {
		scheme = c.Scheme
	}
	b.WriteString(scheme)
	b.WriteString(" ")
	sep := ""
	param := func(k, v string) {
		v = quote(v)
		if v == "" {
			return
		}
		b.WriteString(sep)
		b.WriteString(k)
		b.WriteString(`="`)
		b.WriteString(v)
		b.WriteString(`"`)
		sep = ", "
	}
	if scheme == SchemeDPoP {
		param("algs", strings.Join(c.Algs, " "))
	}
	param("resource_metadata", c.ResourceMetadata)
	param("scope", strings.Join(c.Scopes, " "))
	param("error", c.Error)
	param("error_description", c.Description)
	return b.String()
}

// quote escapes a quoted-string (RFC 9110 §5.6.4); control characters
// (every one, not only CR, LF and TAB) are dropped, and invalid UTF-8 is
// replaced by U+FFFD.
func quote(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r == '"' || r == '\\' || r < 0x20 || r == 0x7f }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Write sends the challenge: status from the error code, the
// WWW-Authenticate header, CORS exposure of that header, and a small JSON body.
func (c Challenge) Write(w http.ResponseWriter, r *http.Request) {
	writeChallenges(w, r, c)
}

// writeChallenges sends one WWW-Authenticate field per challenge (RFC 9110
// §11.6.1), the first one's error deciding the status and body.
func writeChallenges(w http.ResponseWriter, r *http.Request, cs ...Challenge) {
	c := cs[0]
	h := w.Header()
	h.Del("WWW-Authenticate")
	for _, ch := range cs {
		h.Add("WWW-Authenticate", ch.String())
	}
	if h.Get("DPoP-Nonce") != "" {
		h.Set("Access-Control-Expose-Headers", "WWW-Authenticate, DPoP-Nonce")
	} else {
		h.Set("Access-Control-Expose-Headers", "WWW-Authenticate")
	}
	if r != nil && r.Header.Get("Origin") != "" && h.Get("Access-Control-Allow-Origin") == "" {
		h.Set("Access-Control-Allow-Origin", "*")
	}
	h.Set("Cache-Control", "no-store")
	status := statusOf[c.Error]
	if c.Error == "" {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":"unauthorized","error_description":"authorization required"}` + "\n"))
		return
	}
	body, _ := json.Marshal(struct {
		Error       string `json:"error"`
		Description string `json:"error_description,omitempty"`
		Scope       string `json:"scope,omitempty"`
	}{c.Error, c.Description, strings.Join(c.Scopes, " ")})
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
