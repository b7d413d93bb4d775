package rsmiddleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/metadata"
)

// SchemeBearer and SchemeDPoP are the authentication schemes of the
// Authorization header (RFC 6750 §2.1, RFC 9449 §7.1).
const (
	SchemeBearer = "Bearer"
	SchemeDPoP   = "DPoP"
)

// Error codes of DPoP challenges (RFC 9449 §7.1, §9).
const (
	ErrCodeInvalidDPoPProof = "invalid_dpop_proof"
	ErrCodeUseDPoPNonce     = "use_dpop_nonce"
)

// DPoPConfig configures the checking of DPoP-bound tokens (RFC 9449 §7).
type DPoPConfig struct {
	// PublicURL is this endpoint's URL as clients address it: the htu
	// every proof must name (RFC 9449 §4.3 item 9). Behind a proxy it is
	// the public URL, not the one the server listens on. Query and fragment
	// are ignored. Required.
	PublicURL string
	// Required refuses tokens that are not DPoP-bound, and the Bearer
	// scheme with them; PRM then says dpop_bound_access_tokens_required.
	Required bool
	// Algs are the accepted proof algorithms; dpop.DefaultAlgs when empty.
	// none and HS* are never accepted.
	Algs []string
	// Window bounds |iat - now| of a proof; five minutes when zero
	// (the MCP DPoP profile's validity window).
	Window time.Duration
	// JTIs, when set, makes each proof usable once (RFC 9449 §11.1); for
	// one instance dpop.NewMemoryJTIs. Without it replay is bounded by
	// Window, as the MCP profile allows for stateless servers.
	JTIs dpop.JTIStore
	// Nonces, when set, makes every proof carry a server nonce (RFC 9449
	// §9): a proof without a current one gets 401 with
	// error="use_dpop_nonce" and a DPoP-Nonce header. dpop.NewNonces makes
	// stateless ones that every instance with the same secret accepts.
	Nonces *dpop.Nonces
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DPoP checks the proof that comes with a DPoP-bound token at a resource
// server (RFC 9449 §7.1): htm, htu, iat, ath and the key binding to the
// token's cnf.jkt. Middleware uses it; adapters that verify tokens
// elsewhere (mcpsdk) call Check themselves.
type DPoP struct {
	nonces   *dpop.Nonces
	now      func() time.Time
	checker  dpop.Checker
	url      string
	required bool
	algs     []string
}

// NewDPoP checks cfg and returns a DPoP checker.
func NewDPoP(cfg DPoPConfig) (*DPoP, error) {
	u, err := dpop.NormalizeURI(cfg.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("rsmiddleware: DPoPConfig.PublicURL %q: %v", cfg.PublicURL, err)
	}
	algs := slices.DeleteFunc(slices.Clone(cfg.Algs), func(a string) bool { return a == "none" || strings.HasPrefix(a, "HS") })
	if len(algs) == 0 {
		algs = slices.Clone(dpop.DefaultAlgs)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &DPoP{
		nonces:   cfg.Nonces,
		now:      now,
		checker:  dpop.Checker{Algs: algs, Window: cfg.Window, JTIs: cfg.JTIs, Now: cfg.Now},
		url:      u,
		required: cfg.Required,
		algs:     algs,
	}, nil
}

// Nonce is a fresh nonce to send in DPoP-Nonce, or "" without Nonces.
func (d *DPoP) Nonce() string {
	if d == nil || d.nonces == nil {
		return ""
	}
	return d.nonces.Issue(d.now())
}

// Algs are the accepted proof algorithms, for challenges and PRM.
func (d *DPoP) Algs() []string { return slices.Clone(d.algs) }

// Required reports whether only DPoP-bound tokens are accepted.
func (d *DPoP) Required() bool { return d.required }

// DPoPError is a refusal by DPoP.Check: Code is invalid_dpop_proof (the
// proof), invalid_token (the token or its binding) or use_dpop_nonce, and
// Scheme the challenge the error belongs in.
type DPoPError struct {
	Code        string
	Scheme      string
	Description string
	err         error
}

func (e *DPoPError) Error() string { return "rsmiddleware: " + e.Description }

// Unwrap makes a DPoPError an ErrInvalidToken.
func (e *DPoPError) Unwrap() error { return e.err }

func dpopError(scheme, code, desc string) *DPoPError {
	return &DPoPError{Code: code, Scheme: scheme, Description: desc, err: ErrInvalidToken}
}

// Check decides whether the verified token p, sent under scheme, may be
// used with r. A DPoP-bound token (cnf.jkt) must come under the DPoP
// scheme with a proof whose key is the bound one (RFC 9449 §7.1); sent as
// Bearer it is refused (§7.2). A token without cnf under the DPoP scheme is
// refused; one under Bearer is refused only when Required. d may be nil:
// then every bound token and the DPoP scheme are refused.
func (d *DPoP) Check(ctx context.Context, r *http.Request, scheme, token string, p *Principal) error {
	bound := p.DPoPThumbprint != ""
	if !strings.EqualFold(scheme, SchemeDPoP) {
		switch {
		case bound:
			return dpopError(SchemeBearer, ErrCodeInvalidToken, "a DPoP-bound access token must be sent with the DPoP scheme")
		case d != nil && d.required:
			return dpopError(SchemeDPoP, ErrCodeInvalidToken, "this resource accepts DPoP-bound access tokens only")
		}
		return nil
	}
	if d == nil {
		return dpopError(SchemeBearer, ErrCodeInvalidToken, "this resource does not accept DPoP")
	}
	proof, ok, err := dpop.FromHeader(r.Header)
	if err != nil {
		return dpopError(SchemeDPoP, ErrCodeInvalidDPoPProof, "the request must carry exactly one DPoP proof")
	}
	if !ok {
		return dpopError(SchemeDPoP, ErrCodeInvalidDPoPProof, "the DPoP proof is missing")
	}
	if !bound {
		return dpopError(SchemeDPoP, ErrCodeInvalidToken, "the access token is not DPoP-bound")
	}
	req := dpop.Request{Method: r.Method, URI: d.url, AccessToken: token}
	if d.nonces != nil {
		now := d.now()
		req.CheckNonce = func(n string) bool { return d.nonces.Valid(n, now) }
	}
	pr, err := d.checker.Check(ctx, proof, req)
	switch {
	case errors.Is(err, dpop.ErrUseNonce):
		return dpopError(SchemeDPoP, ErrCodeUseDPoPNonce, "the DPoP proof must carry the nonce in the DPoP-Nonce header")
	case errors.Is(err, dpop.ErrReplay):
		return dpopError(SchemeDPoP, ErrCodeInvalidDPoPProof, "the DPoP proof was used before")
	case errors.Is(err, dpop.ErrInvalidProof):
		return dpopError(SchemeDPoP, ErrCodeInvalidDPoPProof, "the DPoP proof is invalid")
	case err != nil:
		return fmt.Errorf("%w: DPoP replay cache: %v", ErrUnavailable, err)
	}
	if !constantTimeEqual(pr.Thumbprint, p.DPoPThumbprint) {
		return dpopError(SchemeDPoP, ErrCodeInvalidToken, "invalid DPoP key binding")
	}
	return nil
}

func constantTimeEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}

// ParseAuthorizationScheme extracts the scheme and token of an
// Authorization header value "Bearer <b64token>" or "DPoP <b64token>"
// (RFC 6750 §2.1, RFC 9449 §7.1); the scheme is matched case
// insensitively and returned as SchemeBearer or SchemeDPoP. Any other
// scheme is ErrNoToken.
func ParseAuthorizationScheme(header string) (scheme, token string, err error) {
	s, rest, _ := strings.Cut(header, " ")
	if strings.EqualFold(s, SchemeDPoP) {
		tok, err := ParseAuthorization(SchemeBearer + " " + rest)
		if err != nil || rest == "" {
			return SchemeDPoP, "", ErrMalformedAuthorization
		}
		return SchemeDPoP, tok, nil
	}
	tok, err := ParseAuthorization(header)
	return SchemeBearer, tok, err
}

// AddToPRM advertises DPoP in a resource's metadata (RFC 9728 §2, with the
// parameters RFC 9449 §5.1 defines): dpop_signing_alg_values_supported, and
// dpop_bound_access_tokens_required when only bound tokens are accepted.
func (d *DPoP) AddToPRM(doc *metadata.ProtectedResourceMetadata) {
	doc.DPoPSigningAlgValuesSupported = d.Algs()
	doc.DPoPBoundAccessTokensRequired = d.required
}
