package as

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/storage"
)

// DPoPConfig configures sender-constrained tokens (RFC 9449). Proofs are
// always accepted at the token endpoint; these settings make them
// mandatory in places.
type DPoPConfig struct {
	// Nonce makes the token endpoint require a server nonce in every proof
	// (RFC 9449 §8): a proof without the current one gets 400
	// use_dpop_nonce and a DPoP-Nonce header. Nonces are sealed timestamps
	// (dpop.Nonces, keyed from Config.Secret), so every instance sharing the
	// secret accepts those of the others.
	Nonce bool
	// RequiredFor lists resource URIs whose tokens are only issued
	// DPoP-bound: a token request for one of them without a proof is
	// refused with invalid_dpop_proof (the AS side of a resource's
	// dpop_bound_access_tokens_required, RFC 9728 §2).
	RequiredFor []string
}

// dpopNonceTTL is how long a nonce is accepted after it was issued.
const dpopNonceTTL = 5 * time.Minute

// errInvalidDPoPProof is RFC 9449 §5: the proof at the token endpoint is
// missing where required, or fails a check of §4.3.
func errInvalidDPoPProof(desc string) *fosite.RFC6749Error {
	return &fosite.RFC6749Error{ErrorField: "invalid_dpop_proof", DescriptionField: desc, CodeField: http.StatusBadRequest}
}

// dpopJTIs adapts the shared one-time-id store (the one client assertion
// jti values use) to dpop.JTIStore, so a proof is usable once across every
// instance (RFC 9449 §11.1).
type dpopJTIs struct{ s storage.JTIStore }

func (j dpopJTIs) UseJTI(ctx context.Context, id string, exp time.Time) error {
	err := j.s.UseJTI(ctx, id, exp)
	if errors.Is(err, storage.ErrAlreadyUsed) {
		return dpop.ErrReplay
	}
	return err
}

// dpopState holds what the token endpoint needs to check proofs.
type dpopState struct {
	checker  dpop.Checker
	nonces   *dpop.Nonces // nil: no nonces required
	required []string     // canonical resource URIs
	tokenURL string
}

func (s *Server) initDPoP() error {
	st := &dpopState{
		checker:  dpop.Checker{Algs: dpop.DefaultAlgs, JTIs: dpopJTIs{s.cfg.Store}, Now: s.now},
		tokenURL: s.endpoint("/token"),
	}
	if s.cfg.DPoP.Nonce {
		n, err := dpop.NewNonces(s.cfg.Secret, dpopNonceTTL)
		if err != nil {
			return err
		}
		st.nonces = n
	}
	for _, u := range s.cfg.DPoP.RequiredFor {
		c, err := canonicalResources([]string{u})
		if err != nil || s.resourceByURI(c[0]) == nil {
			return errors.New("as: DPoP.RequiredFor names " + u + ", which is not a configured resource")
		}
		st.required = append(st.required, c[0])
	}
	s.dpop = st
	return nil
}

// checkTokenProof checks the DPoP proof of a token request (RFC 9449 §5)
// and returns ctx carrying its key thumbprint; ctx unchanged when there is
// no proof. Errors are invalid_dpop_proof, use_dpop_nonce (the caller adds
// the nonce header) or a storage outage.
func (s *Server) checkTokenProof(ctx context.Context, r *http.Request) (context.Context, error) {
	proof, ok, err := dpop.FromHeader(r.Header)
	if err != nil {
		return ctx, errInvalidDPoPProof("The request must carry exactly one DPoP proof.")
	}
	if !ok {
		return ctx, nil
	}
	req := dpop.Request{Method: http.MethodPost, URI: s.dpop.tokenURL}
	if s.dpop.nonces != nil {
		now := s.now()
		req.CheckNonce = func(n string) bool { return s.dpop.nonces.Valid(n, now) }
	}
	p, err := s.dpop.checker.Check(ctx, proof, req)
	switch {
	case errors.Is(err, dpop.ErrUseNonce):
		return ctx, errUseDPoPNonce
	case errors.Is(err, dpop.ErrReplay):
		return ctx, errInvalidDPoPProof("The DPoP proof was used before.")
	case errors.Is(err, dpop.ErrInvalidProof):
		return ctx, errInvalidDPoPProof("The DPoP proof is not valid.")
	case err != nil:
		return ctx, err
	}
	return withDPoPKey(ctx, p.Thumbprint), nil
}

// errUseDPoPNonce is RFC 9449 §8: the proof lacks the server's nonce.
var errUseDPoPNonce = &fosite.RFC6749Error{
	ErrorField:       "use_dpop_nonce",
	DescriptionField: "The DPoP proof must carry the nonce in the DPoP-Nonce header.",
	CodeField:        http.StatusBadRequest,
}

// setNonceHeader sends a fresh nonce when nonces are on (RFC 9449 §8:
// with use_dpop_nonce, and on success so the client has the next one).
func (s *Server) setNonceHeader(w http.ResponseWriter) {
	if s.dpop.nonces == nil {
		return
	}
	w.Header().Set(dpop.NonceHeader, s.dpop.nonces.Issue(s.now()))
}

// dpopHandler runs after every grant's handler has loaded or built the
// grant, whatever the grant type (RFC 9449 §5: DPoP applies to every
// access token request). It enforces where a proof is mandatory and that
// the proof's key is the one the code or refresh token is bound to. The
// binding of the new tokens happens in tokenStrategy.GenerateAccessToken.
type dpopHandler struct{ s *Server }

var _ fosite.TokenEndpointHandler = (*dpopHandler)(nil)

func (h *dpopHandler) CanHandleTokenEndpointRequest(context.Context, fosite.AccessRequester) bool {
	return true
}

// CanSkipClientAuth leaves client authentication to the grant handlers,
// which run first: a workload token (jwt-bearer) is redeemed without it.
func (h *dpopHandler) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool { return true }

func (h *dpopHandler) HandleTokenEndpointRequest(ctx context.Context, r fosite.AccessRequester) error {
	jkt := dpopKeyFrom(ctx)
	c, _ := r.GetClient().(*client)
	if jkt == "" && c != nil && c.dpopBound {
		// RFC 9449 §5.2: dpop_bound_access_tokens client metadata.
		return errInvalidDPoPProof("This client must send a DPoP proof with every token request.")
	}
	if jkt == "" {
		for _, aud := range r.GetGrantedAudience() {
			if slices.Contains(h.s.dpop.required, aud) {
				return errInvalidDPoPProof("Tokens for this resource are only issued bound to a DPoP key.")
			}
		}
	}
	sess, ok := r.GetSession().(*session)
	if !ok {
		return nil
	}
	g := r.GetGrantTypes()
	if g.ExactOne("authorization_code") && sess.AuthorizeJKT != "" && !constantEq(sess.AuthorizeJKT, jkt) {
		// RFC 9449 §10: the code is bound to the dpop_jkt of its request.
		return errInvalidDPoPProof("The DPoP proof's key is not the one named by dpop_jkt.")
	}
	if g.ExactOne("refresh_token") && sess.RefreshJKT != "" && !constantEq(sess.RefreshJKT, jkt) {
		// RFC 9449 §5: a public client's refresh token is bound to its key.
		return errInvalidDPoPProof("The refresh token is bound to another DPoP key.")
	}
	return nil
}

func (h *dpopHandler) PopulateTokenEndpointResponse(_ context.Context, _ fosite.AccessRequester, _ fosite.AccessResponder) error {
	return nil
}

func constantEq(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// validJKT reports whether v has the form of a SHA-256 JWK thumbprint:
// 43 base64url characters (RFC 9449 §10, RFC 7638).
func validJKT(v string) bool {
	if len(v) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == 32
}
