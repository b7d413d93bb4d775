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
	return DPoPTokenVerifier(v, nil)
}

// DPoPTokenVerifier is TokenVerifier for a server that also accepts
// DPoP-bound tokens (RFC 9449 §7): wrap the auth.RequireBearerToken handler
// in AcceptDPoP, which hands the SDK a DPoP-scheme request as a Bearer one
// and remembers the scheme; the verifier then checks the request's DPoP
// proof with d. Under either verifier a DPoP-bound token sent as Bearer is
// refused (§7.2). d nil: no token is accepted under the DPoP scheme.
func DPoPTokenVerifier(v rsmiddleware.TokenVerifier, d *rsmiddleware.DPoP) auth.TokenVerifier {
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		p, err := v.Verify(ctx, token)
		if err == nil && r != nil {
			scheme := rsmiddleware.SchemeBearer
			if r.Context().Value(dpopSchemeKey{}) != nil {
				scheme = rsmiddleware.SchemeDPoP
			}
			err = d.Check(ctx, r, scheme, token, p)
		} else if err == nil && p.DPoPThumbprint != "" {
			// A bound token without the request to check its proof.
			err = fmt.Errorf("%w: DPoP-bound token without a request", rsmiddleware.ErrInvalidToken)
		}
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

type dpopSchemeKey struct{}

// AcceptDPoP lets auth.RequireBearerToken, which reads the Bearer scheme
// only, see requests made with "Authorization: DPoP <token>" (RFC 9449
// §7.1): it rewrites the header to the Bearer form and marks the request,
// so DPoPTokenVerifier checks its proof (the DPoP header is left as it is).
func AcceptDPoP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if vs := r.Header.Values("Authorization"); len(vs) == 1 {
			if scheme, tok, err := rsmiddleware.ParseAuthorizationScheme(vs[0]); err == nil && scheme == rsmiddleware.SchemeDPoP {
				r = r.WithContext(context.WithValue(r.Context(), dpopSchemeKey{}, true))
				r.Header = r.Header.Clone()
				r.Header.Set("Authorization", "Bearer "+tok)
			}
		}
		next.ServeHTTP(w, r)
	})
}
