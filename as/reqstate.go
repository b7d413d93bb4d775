package as

import (
	"context"
	"sync/atomic"
)

// reqState is what one request has to carry past fosite, which hands our
// client manager and storage only a context. It is the one value the AS
// keeps in a context; each field says which request sets it.
type reqState struct {
	// loopbackRedirect (authorization endpoint): a loopback redirect URI
	// matchRedirectURI accepted on a port other than the registered one
	// (RFC 8252 §7.3); GetClient shows fosite the client with it added.
	loopbackRedirect string
	// pkce (authorization endpoint): the validated challenge, folded into
	// the code's own record (redeem.go).
	pkce *pkceChallenge
	// assertionAlg (client authentication, while the assertion is
	// verified): the alg of a private_key_jwt assertion (RFC 7523 §3).
	assertionAlg string
	// dpopJKT (token endpoint): the thumbprint of the request's checked
	// DPoP proof (RFC 9449 §4.3).
	dpopJKT string
	// redemption (token and introspection endpoints): the records read
	// in this request, so each is read once (redeem.go). Nil elsewhere.
	redemption *redemption
	// connection (token endpoint, token exchange): the connection's token
	// the exchange releases (connection.go).
	connection *releasedConnection
	// revoked marks that tokens were revoked in the current storage
	// transaction (tokenStore.BeginTX, Commit).
	revoked *atomic.Bool
}

type reqStateKey struct{}

// withReqState returns ctx carrying a request state of its own, and it.
// A ctx that carries one already keeps it.
func withReqState(ctx context.Context) (context.Context, *reqState) {
	if st := reqStateFrom(ctx); st != nil {
		return ctx, st
	}
	st := &reqState{}
	return context.WithValue(ctx, reqStateKey{}, st), st
}

// reqStateFrom returns the request state of ctx, or nil.
func reqStateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(reqStateKey{}).(*reqState)
	return st
}

// requestState is the context of one authorization request whose
// redirect URI is redirectURI, which matchRedirectURI accepted.
func requestState(ctx context.Context, redirectURI string) context.Context {
	ctx, st := withReqState(ctx)
	st.loopbackRedirect = redirectURI
	return ctx
}

// redemptionFrom returns the memo of ctx, or nil.
func redemptionFrom(ctx context.Context) *redemption {
	if st := reqStateFrom(ctx); st != nil {
		return st.redemption
	}
	return nil
}

// withRedemption returns ctx carrying an empty redemption memo.
func withRedemption(ctx context.Context) context.Context {
	ctx, st := withReqState(ctx)
	st.redemption = &redemption{}
	return ctx
}

// pkceFrom is the challenge of the code being issued in ctx, or nil.
func pkceFrom(ctx context.Context) *pkceChallenge {
	if st := reqStateFrom(ctx); st != nil {
		return st.pkce
	}
	return nil
}

// withDPoPKey records the thumbprint of the request's checked proof.
func withDPoPKey(ctx context.Context, jkt string) context.Context {
	ctx, st := withReqState(ctx)
	st.dpopJKT = jkt
	return ctx
}

// dpopKeyFrom is the thumbprint of the token request's proof key, or "".
func dpopKeyFrom(ctx context.Context) string {
	if st := reqStateFrom(ctx); st != nil {
		return st.dpopJKT
	}
	return ""
}
