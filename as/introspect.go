package as

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/storage"
)

// introspection is the RFC 7662 §2.2 response.
type introspection struct {
	Active    bool   `json:"active"`
	Scope     string `json:"scope,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Subject   string `json:"sub,omitempty"`
	Audience  string `json:"aud,omitempty"`
	Issuer    string `json:"iss,omitempty"`
	ExpiresAt int64  `json:"exp,omitempty"`
	IssuedAt  int64  `json:"iat,omitempty"`
	TokenType string `json:"token_type,omitempty"`
	// Cnf of a DPoP-bound access token (RFC 9449 §6.2).
	Cnf *cnfClaim `json:"cnf,omitempty"`
	// The person attributes of the resource's TokenClaims, as in the JWT.
	Email  string   `json:"email,omitempty"`
	Groups []string `json:"groups,omitempty"`
	Tenant string   `json:"tenant,omitempty"`
}

var inactive = []byte(`{"active":false}` + "\n")

// serveIntrospect is the introspection endpoint (RFC 7662). Only
// authenticated confidential clients from the configuration may call it
// (never registered or CIMD clients), and a caller learns only about tokens
// issued to itself or, when it is one of a resource's IntrospectionClients,
// access tokens for that resource; everything else is active:false.
//
// The answer comes from the stored record, found by the token's signature,
// not from re-verifying the JWT: the record is what revocation changes, and
// looking it up costs less than an ECDSA verification.
func (s *Server) serveIntrospect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "The introspection endpoint accepts POST only.")
		return
	}
	if err := s.parseForm(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The memo keeps the person's record read with the token.
	ctx := withRedemption(r.Context())
	fc, err := s.clients.authenticate(ctx, r, r.PostForm)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	caller := fc.(*client)
	if caller.public {
		s.writeError(w, r, fosite.ErrInvalidClient.WithHint("Only confidential clients may introspect tokens."))
		return
	}
	if caller.source != "config" {
		// Registered and CIMD clients are nobody's resource server.
		s.writeError(w, r, fosite.ErrInvalidClient.WithHint("Only clients configured as resource servers may introspect tokens."))
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		s.writeError(w, r, fosite.ErrInvalidRequest.WithHint("The token parameter is missing."))
		return
	}
	res, err := s.introspect(ctx, caller, token, r.PostForm.Get("token_type_hint"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if res == nil {
		_, _ = w.Write(inactive)
		return
	}
	_ = json.NewEncoder(w).Encode(res)
}

// introspect returns nil for an inactive or invisible token; an error only
// for a storage outage.
func (s *Server) introspect(ctx context.Context, caller *client, token, hint string) (*introspection, error) {
	kinds := []storage.TokenKind{storage.KindAccessToken, storage.KindRefreshToken}
	if hint == "refresh_token" {
		kinds[0], kinds[1] = kinds[1], kinds[0]
	}
	for _, kind := range kinds {
		var sig string
		if kind == storage.KindAccessToken {
			sig = s.tokens.AccessTokenSignature(ctx, token)
		} else if s.tokens.Enigma.Validate(ctx, token) == nil {
			// An opaque refresh token is "key.signature"; only one whose
			// HMAC this server made is looked up (as fosite's refresh
			// grant checks it), so garbage costs no query.
			sig = s.tokens.RefreshTokenSignature(ctx, token)
		}
		if sig == "" {
			continue
		}
		t, sr, err := s.store.loadShared(ctx, kind, sig)
		if errors.Is(err, fosite.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return s.describe(ctx, caller, kind, token, t, sr)
	}
	return nil, nil
}

// describe is the introspection answer for a stored token, nil when it is
// inactive or not the caller's to learn about; an error only when the
// person's record cannot be read.
func (s *Server) describe(ctx context.Context, caller *client, kind storage.TokenKind, token string, t *storage.Token, sr *storedRequest) (*introspection, error) {
	now := s.now()
	if !t.Active || !now.Before(t.ExpiresAt) {
		return nil, nil
	}
	if kind == storage.KindRefreshToken && s.store.rotatedOut(t, now) {
		return nil, nil
	}
	if kind == storage.KindAccessToken && sr.Session != nil && sr.Session.TokenHash != "" && !tokenHashIs(token, sr.Session.TokenHash) {
		return nil, nil // the signature of one token under another header or payload
	}
	aud := ""
	if len(sr.GrantedAud) == 1 {
		aud = sr.GrantedAud[0]
	}
	// RFC 7662 §4: a caller learns about its own tokens, and a declared
	// resource server (Resource.IntrospectionClients) about access tokens
	// for its resource; only configured clients are either.
	visible := caller.source == "config" &&
		(sr.ClientID == caller.id || kind == storage.KindAccessToken && aud != "" && s.introspects(caller.id, aud))
	if !visible {
		return nil, nil
	}
	sub, federated := "", false
	if sr.Session != nil {
		sub, federated = sr.Session.Subject, sr.Session.Federated != ""
	}
	active, err := s.personActive(ctx, sub, federated)
	if err != nil {
		return nil, err
	}
	if !active {
		return nil, nil // the person can no longer sign in (Config.Users, their record)
	}
	if sub == "" {
		sub = sr.ClientID
	}
	out := &introspection{
		Active:    true,
		Scope:     strings.Join(sr.GrantedScope, " "),
		ClientID:  sr.ClientID,
		Subject:   sub,
		Audience:  aud,
		Issuer:    s.issuer,
		ExpiresAt: t.ExpiresAt.Unix(),
		IssuedAt:  t.CreatedAt.Unix(),
		TokenType: "Bearer",
	}
	if kind == storage.KindAccessToken && sr.Session != nil && sr.Session.Subject != "" && !federated {
		c := accessClaims{Subject: sub}
		if err := s.tokens.addPersonClaims(ctx, &c, aud); err != nil {
			return nil, err
		}
		out.Email, out.Groups, out.Tenant = c.Email, c.Groups, c.Tenant
	}
	if kind == storage.KindRefreshToken {
		out.TokenType = "refresh_token"
	} else if sr.Session != nil && sr.Session.CnfJKT != "" {
		out.TokenType = dpop.HeaderName
		out.Cnf = &cnfClaim{JKT: sr.Session.CnfJKT}
	}
	return out, nil
}

// introspects reports whether clientID is a declared resource server of
// the resource uri.
func (s *Server) introspects(clientID, uri string) bool {
	for _, r := range s.resources {
		if r.URI == uri {
			return slices.Contains(r.introspectors, clientID)
		}
	}
	return false
}

// signingInputHash binds a stored access token record to the exact token:
// base64url(SHA-256(header.payload)).
func signingInputHash(token string) string {
	sum, ok := signingInputSum(token)
	if !ok {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// tokenHashIs reports whether want is signingInputHash(token), without
// allocating for the usual token sizes (introspection and token exchange
// check it for every token).
func tokenHashIs(token, want string) bool {
	sum, ok := signingInputSum(token)
	if !ok {
		return want == ""
	}
	var b [43]byte // base64url of 32 bytes, unpadded
	base64.RawURLEncoding.Encode(b[:], sum[:])
	return string(b[:]) == want
}

// signingInputSum is SHA-256 of the token's signing input (everything
// before the last dot), hashed from a stack copy when it is small enough.
func signingInputSum(token string) ([sha256.Size]byte, bool) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return [sha256.Size]byte{}, false
	}
	if i <= 4096 {
		var buf [4096]byte
		return sha256.Sum256(append(buf[:0], token[:i]...)), true
	}
	return sha256.Sum256([]byte(token[:i])), true
}

// serveRevoke is the revocation endpoint (RFC 7009). Revoking a refresh
// token revokes its whole family; revoking an access token does too. Unknown
// tokens get 200.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "The revocation endpoint accepts POST only.")
		return
	}
	if err := s.parseForm(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.PostForm.Get("token") == "" {
		s.writeError(w, r, fosite.ErrInvalidRequest.WithHint("The token parameter is missing."))
		return
	}
	ctx := r.Context()
	if err := s.provider.NewRevocationRequest(ctx, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.audit(ctx, "token.revoked", "client_id", requestClientID(r), "token_digest", digest(r.PostForm.Get("token")))
	w.WriteHeader(http.StatusOK)
}

// serveJWKS publishes the public signing keys, retired ones included until
// the tokens they signed have expired. Private parts never appear.
func (s *Server) serveJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "GET only.")
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=60")
	_, _ = w.Write(s.keys.jwksDoc())
}

// requestClientID names the client of a request for audit logs, from HTTP
// Basic or the body; never the secret.
func requestClientID(r *http.Request) string {
	if id, _, ok := r.BasicAuth(); ok {
		return id
	}
	return r.PostForm.Get("client_id")
}
