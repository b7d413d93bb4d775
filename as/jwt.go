package as

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/ory/fosite"
	foauth2 "github.com/ory/fosite/handler/oauth2"
)

// accessClaims are the claims of an RFC 9068 §2.2 JWT access token.
type accessClaims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	Audience  string `json:"aud"`
	ClientID  string `json:"client_id"`
	Scope     string `json:"scope,omitempty"`
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`
	ID        string `json:"jti"`
	// Act is the RFC 8693 §4.1 actor claim, set by token exchange.
	Act map[string]any `json:"act,omitempty"`
	// Status points into the Token Status List
	// (draft-ietf-oauth-status-list §6.1; status.go).
	Status *statusClaim `json:"status,omitempty"`
	// Cnf binds the token to a DPoP key (RFC 9449 §6.1).
	Cnf *cnfClaim `json:"cnf,omitempty"`
	// Email, Groups and Tenant are the person's attributes named by the
	// resource's TokenClaims (RFC 9068 §2.2.3.1 lists groups among the
	// identity claims an access token may carry; email is OpenID Connect
	// Core §5.1's).
	Email  string   `json:"email,omitempty"`
	Groups []string `json:"groups,omitempty"`
	Tenant string   `json:"tenant,omitempty"`
}

// cnfClaim is the RFC 7800 confirmation claim with the RFC 9449 §6.1 jkt
// member.
type cnfClaim struct {
	JKT string `json:"jkt"`
}

// tokenStrategy issues RFC 9068 JWT access tokens signed with the keyring,
// and leaves codes and refresh tokens to fosite's HMAC strategy (opaque,
// 256-bit, stored under their HMAC signature).
type tokenStrategy struct {
	*foauth2.HMACSHAStrategyUnPrefixed
	keys   *keyring
	issuer string
	ttl    time.Duration
	now    func() time.Time
	// status hands out the grant's status index; statusURI is the list's URL.
	status    *statusIndexer
	statusURI string
	// tokenClaims are the person attributes per resource (canonical URI)
	// and people where they come from.
	tokenClaims map[string][]string
	people      PersonDirectory
}

var _ foauth2.CoreStrategy = (*tokenStrategy)(nil)

// ValidateAuthorizeCode refuses a code whose lifetime (CodeTTL, at most 10
// minutes: RFC 9700 §4.2, OAuth 2.1 §4.1.2) has passed by the configured
// clock, then lets fosite check the HMAC and its own wall-clock expiry.
// fosite reads time.Now directly; checking Config.Now too keeps one notion
// of time for every expiry this server enforces.
func (t *tokenStrategy) ValidateAuthorizeCode(ctx context.Context, r fosite.Requester, code string) error {
	if exp := r.GetSession().GetExpiresAt(fosite.AuthorizeCode); !exp.IsZero() && !t.now().Before(exp) {
		return fosite.ErrTokenExpired.WithHint("The authorization code has expired.")
	}
	return t.HMACSHAStrategyUnPrefixed.ValidateAuthorizeCode(ctx, r, code)
}

// AccessTokenSignature is the JWS signature part: the key of the stored
// record (ARCHITECTURE.md: JWT access tokens are stored under it).
func (t *tokenStrategy) AccessTokenSignature(_ context.Context, token string) string {
	i := strings.LastIndexByte(token, '.')
	if i < 0 || strings.Count(token, ".") != 2 {
		return ""
	}
	return token[i+1:]
}

// errAudience is returned when a request reaches token issuance without
// exactly one granted audience; the AS never issues a token for no or many
// resources.
var errAudience = errors.New("as: an access token needs exactly one audience")

// GenerateAccessToken signs an RFC 9068 token: header typ at+jwt and kid;
// claims iss, sub (the client for client credentials), aud (the one
// canonical resource URI), client_id, scope, iat, exp, jti, and status
// (the grant's index in the Token Status List, handed out with its first
// access token and kept in the session for every later one).
func (t *tokenStrategy) GenerateAccessToken(ctx context.Context, r fosite.Requester) (string, string, error) {
	aud := r.GetGrantedAudience()
	if len(aud) != 1 {
		return "", "", errAudience
	}
	k, err := t.keys.signingKey()
	if err != nil {
		return "", "", err
	}
	now := t.now()
	exp := now.Add(t.ttl)
	sess := r.GetSession()
	sub := sess.GetSubject()
	if sub == "" {
		sub = r.GetClient().GetID()
	}
	sess.SetExpiresAt(fosite.AccessToken, exp)
	c := accessClaims{
		Issuer:    t.issuer,
		Subject:   sub,
		Audience:  aud[0],
		ClientID:  r.GetClient().GetID(),
		Scope:     strings.Join(r.GetGrantedScopes(), " "),
		IssuedAt:  now.Unix(),
		ExpiresAt: exp.Unix(),
		ID:        randomID(),
	}
	jkt := dpopKeyFrom(ctx)
	if jkt != "" {
		c.Cnf = &cnfClaim{JKT: jkt}
	}
	if s, ok := sess.(*session); ok && s.Subject != "" && s.Federated == "" {
		// A person's token (not client credentials, whose sub is the
		// client; not a federated subject, which has no record here),
		// also after token exchange, which keeps the subject.
		if err := t.addPersonClaims(ctx, &c, aud[0]); err != nil {
			return "", "", err
		}
	}
	if s, ok := sess.(*session); ok {
		s.CnfJKT = jkt
		if jkt != "" && r.GetClient().IsPublic() {
			// RFC 9449 §5: a public client's refresh tokens are bound to
			// the key it proved; the session is stored with them.
			s.RefreshJKT = jkt
		}
		c.Act = s.Act
		if t.status != nil {
			if s.StatusIdx == 0 {
				if s.StatusIdx, err = t.status.index(ctx); err != nil {
					return "", "", err
				}
			}
			c.Status = &statusClaim{StatusList: statusRef{Idx: s.StatusIdx, URI: t.statusURI}}
		}
	}
	payload, err := marshalClaims(&c)
	if err != nil {
		return "", "", err
	}
	tok, inputHash, err := k.signCompact(payload)
	if err != nil {
		return "", "", err
	}
	if s, ok := sess.(*session); ok {
		s.TokenHash = inputHash
	}
	return tok, t.AccessTokenSignature(ctx, tok), nil
}

// addPersonClaims writes the attributes of c's subject that the resource's
// TokenClaims name.
func (t *tokenStrategy) addPersonClaims(ctx context.Context, c *accessClaims, aud string) error {
	names := t.tokenClaims[aud]
	if len(names) == 0 || t.people == nil {
		return nil
	}
	p, ok, err := t.people.Person(ctx, c.Subject)
	if err != nil || !ok {
		return err
	}
	for _, n := range names {
		switch n {
		case "email":
			c.Email = p.Email
		case "groups":
			c.Groups = p.Groups
		case "tenant":
			c.Tenant = p.Tenant
		}
	}
	return nil
}

// ValidateAccessToken verifies signature (kid looked up in our own key set,
// algorithm from our list), typ and exp.
func (t *tokenStrategy) ValidateAccessToken(ctx context.Context, _ fosite.Requester, token string) error {
	_, err := t.verify(ctx, token)
	return err
}

func (t *tokenStrategy) verify(ctx context.Context, token string) (*accessClaims, error) {
	jws, err := jose.ParseSigned(token, t.keys.algs())
	if err != nil || len(jws.Signatures) != 1 {
		return nil, fosite.ErrTokenSignatureMismatch
	}
	h := jws.Signatures[0].Header
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != "at+jwt" {
		return nil, fosite.ErrTokenSignatureMismatch
	}
	k := t.keys.lookup(ctx, h.KeyID)
	if k == nil || string(h.Algorithm) != k.alg {
		return nil, fosite.ErrTokenSignatureMismatch
	}
	payload, err := jws.Verify(k.priv.Public())
	if err != nil {
		return nil, fosite.ErrTokenSignatureMismatch
	}
	var c accessClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fosite.ErrTokenSignatureMismatch
	}
	if c.Issuer != t.issuer || t.now().Unix() >= c.ExpiresAt {
		return nil, fosite.ErrTokenExpired
	}
	return &c, nil
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
