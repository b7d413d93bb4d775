package as

import (
	"context"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/storage"
)

// redemption remembers, for the length of one token request, the
// authorization-code record that fosite's HandleTokenEndpointRequest read,
// so that the PKCE check and PopulateTokenEndpointResponse, which read the
// same record again, cost no further SELECT (RFC 6749 §4.1.3, RFC 7636 §4.6).
//
// What the record says about being active is only a first answer: whether
// this request redeems the code is decided later by the conditional UPDATE
// of InvalidateAuthorizeCodeSession (storage.TokenStore.DeactivateToken),
// exactly once among any number of concurrent requests, whatever they
// remembered.
//
// It also remembers the client read from storage (or resolved) when the
// request authenticated it, so that rebuilding a stored grant around its
// client (code, refresh token) does not read the client again; and, on
// backends that read a token with its person's record in one statement,
// that record's status, so that the check of the person (personActive)
// costs no further SELECT. Introspection uses it for the person only.
type redemption struct {
	sig string
	tok *storage.Token
	sr  *storedRequest
	req fosite.Requester

	client *client

	// Refresh (RFC 6749 §6): the presented refresh token's signature and
	// its parent's (the token it was rotated from), read by
	// GetRefreshTokenSession; rotated is the signature RotateRefreshToken
	// rotated, the parent of the refresh token issued next.
	refreshSig, refreshParent, rotated string

	// The person's status read together with a token record
	// (storage.TokenPersonReader): that of personSubject; personRead tells
	// whether one was read at all.
	personSubject string
	person        storage.PersonStatus
	personRead    bool
}

// rememberPerson keeps the status of subject read with a token, for
// personActive in the same request.
func rememberPerson(ctx context.Context, subject string, ps storage.PersonStatus) {
	if m := redemptionFrom(ctx); m != nil && subject != "" {
		m.personSubject, m.person, m.personRead = subject, ps, true
	}
}

// rememberedPerson returns the status of subject read with a token in this
// request, and whether one was read.
func rememberedPerson(ctx context.Context, subject string) (storage.PersonStatus, bool) {
	if m := redemptionFrom(ctx); m != nil && m.personRead && m.personSubject == subject {
		return m.person, true
	}
	return storage.PersonStatus{}, false
}

// remembered returns the memo's record of the code with signature sig, or
// nil when ctx remembers none (or another code's).
func remembered(ctx context.Context, sig string) *redemption {
	if m := redemptionFrom(ctx); m != nil && m.req != nil && m.sig == sig {
		return m
	}
	return nil
}

// pkceChallenge is the RFC 7636 §4.3 challenge of an authorization code. It
// is kept inside the code's own record rather than in a record of its own:
// the code record carries everything PKCE verification needs, and a redeemed
// code's challenge is dead with it (its active flag says so), so no record
// is written at the authorization endpoint and none read or deleted at
// redemption.
type pkceChallenge struct {
	Challenge string `json:"c"`
	Method    string `json:"m"`
}
