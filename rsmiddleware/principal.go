package rsmiddleware

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// Actor is the RFC 8693 §4.1 "act" claim: the party acting for the subject,
// nested for delegation chains (the outermost is the most recent actor).
type Actor struct {
	Subject  string `json:"sub"`
	ClientID string `json:"client_id,omitempty"`
	Actor    *Actor `json:"act,omitempty"`
}

// Principal is what a verified access token says (RFC 9068 §2.2).
// A Principal returned by this package is shared: do not modify it.
type Principal struct {
	Issuer   string
	Subject  string
	ClientID string
	Scopes   []string
	TokenID  string // jti
	IssuedAt time.Time
	Expiry   time.Time
	Audience []string
	Actor    *Actor // nil unless the token came from a token exchange
	// DPoPThumbprint is the token's cnf.jkt (RFC 9449 §6): the RFC 7638
	// thumbprint of the key it is bound to; empty for a Bearer token.
	DPoPThumbprint string

	status *statusRef // the token's Token Status List entry, checked on every Verify
	// introspected is the RFC 7662 §2.2 answer p was made from; nil for a
	// JWT access token.
	introspected []byte
	// policyClaims are the token's claims decoded for policy rules, once
	// per Principal (the Verifier hands out one per cached token); read
	// only.
	policyClaims atomic.Pointer[decodedClaims]
}

// HasScopes reports whether p was granted every scope in want.
func (p *Principal) HasScopes(want ...string) bool {
	for _, s := range want {
		if !slices.Contains(p.Scopes, s) {
			return false
		}
	}
	return true
}

// MissingScopes returns the scopes of want that p was not granted.
func (p *Principal) MissingScopes(want []string) []string {
	var out []string
	for _, s := range want {
		if !slices.Contains(p.Scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

type ctxKey struct{}

// authInfo is the context value. token is the raw inbound access token: it is
// unexported so handler code cannot read or forward it; only the Exchanger
// and Transport of this package use it.
type authInfo struct {
	principal *Principal
	token     string
}

// PrincipalFromContext returns the principal the Middleware verified for the
// request whose context is ctx.
func PrincipalFromContext(ctx context.Context) (*Principal, bool) {
	ai, ok := ctx.Value(ctxKey{}).(*authInfo)
	if !ok || ai.principal == nil {
		return nil, false
	}
	return ai.principal, true
}

// ContextWithPrincipal returns a copy of ctx carrying p and the raw token it
// was verified from, as the Middleware does. It is for adapters (such as
// mcpsdk) that verify tokens outside Middleware; token may be empty, in which
// case Exchanger cannot be used with the context.
func ContextWithPrincipal(ctx context.Context, p *Principal, token string) context.Context {
	return context.WithValue(ctx, ctxKey{}, &authInfo{principal: p, token: token})
}

func inboundToken(ctx context.Context) string {
	if ai, ok := ctx.Value(ctxKey{}).(*authInfo); ok {
		return ai.token
	}
	return ""
}
