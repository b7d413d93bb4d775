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
type redemption struct {
	sig string
	tok *storage.Token
	sr  *storedRequest
	req fosite.Requester
}

type redemptionKey struct{}

// withRedemption returns ctx carrying an empty redemption memo.
func withRedemption(ctx context.Context) context.Context {
	return context.WithValue(ctx, redemptionKey{}, &redemption{})
}

// redemptionFrom returns the memo of ctx, or nil.
func redemptionFrom(ctx context.Context) *redemption {
	m, _ := ctx.Value(redemptionKey{}).(*redemption)
	return m
}

// remembered returns the memo's record of the code with signature sig, or
// nil when ctx remembers none (or another code's).
func remembered(ctx context.Context, sig string) *redemption {
	if m := redemptionFrom(ctx); m != nil && m.req != nil && m.sig == sig {
		return m
	}
	return nil
}
