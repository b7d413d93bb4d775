// Package mcpsdk adapts rsmiddleware to the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk/auth): TokenVerifier turns an
// rsmiddleware.TokenVerifier into an auth.TokenVerifier for
// auth.RequireBearerToken. Behind rsmiddleware.Middleware, RequestContexts
// gives tool handlers the context (principal and inbound token) of the HTTP
// request carrying their call, where the SDK gives them the session's.
//
// The tokens are RFC 9068 JWT access tokens (or, in introspection mode,
// RFC 7662 answers) presented as RFC 6750 §2.1 bearer tokens; the SDK answers
// failures with the RFC 9728 §5.1 WWW-Authenticate challenge.
package mcpsdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// Keys of auth.TokenInfo.Extra set by TokenVerifier.
const (
	ExtraPrincipal = "principal" // *rsmiddleware.Principal
	ExtraClientID  = "client_id" // string
	ExtraTokenID   = "jti"       // string
)

// errInvalidToken is the fixed text the SDK sends for a refused token.
var errInvalidToken = fmt.Errorf("%w: the access token is invalid, expired, or not for this resource", auth.ErrInvalidToken)

// TokenVerifier returns an auth.TokenVerifier backed by v. TokenInfo.UserID
// is the token's subject joined with its client ID, so the SDK's session
// check binds a session to the same user through the same client;
// TokenInfo.Extra carries the *rsmiddleware.Principal. Failures unwrap to
// auth.ErrInvalidToken (401); an unreachable AS is reported as
// rsmiddleware.ErrUnavailable (the SDK answers 500) so that clients do not
// discard valid tokens. The SDK writes the error's text into the response
// body, so the returned errors carry fixed texts only; the causes (which may
// name claims, keys or the AS's addresses) go to slog.Default().
//
// The SDK middleware does not strip the Authorization header and does not
// make the inbound token available to rsmiddleware.Exchanger; use
// rsmiddleware.Middleware when the server calls downstream APIs.
func TokenVerifier(v rsmiddleware.TokenVerifier) auth.TokenVerifier {
	return func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p, err := v.Verify(ctx, token)
		if err != nil {
			if errors.Is(err, rsmiddleware.ErrInvalidToken) {
				slog.DebugContext(ctx, "mcpsdk: token refused", "err", err)
				return nil, errInvalidToken
			}
			slog.WarnContext(ctx, "mcpsdk: cannot verify token", "err", err)
			return nil, rsmiddleware.ErrUnavailable
		}
		return &auth.TokenInfo{
			Scopes:     p.Scopes,
			Expiration: p.Expiry,
			UserID:     p.Subject + "\x00" + p.ClientID,
			Extra: map[string]any{
				ExtraPrincipal: p,
				ExtraClientID:  p.ClientID,
				ExtraTokenID:   p.TokenID,
			},
		}, nil
	}
}

// Principal returns the principal stored by TokenVerifier in the TokenInfo
// of ctx (auth.TokenInfoFromContext).
func Principal(ctx context.Context) (*rsmiddleware.Principal, bool) {
	ti := auth.TokenInfoFromContext(ctx)
	if ti == nil {
		return nil, false
	}
	p, ok := ti.Extra[ExtraPrincipal].(*rsmiddleware.Principal)
	return p, ok
}
