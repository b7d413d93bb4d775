package as

import (
	"maps"
	"net/url"
	"slices"
	"time"

	"github.com/ory/fosite"
)

// session is the fosite.Session of every grant: the subject and the expiry
// of each token kind.
type session struct {
	Subject   string                         `json:"sub,omitempty"`
	ExpiresAt map[fosite.TokenType]time.Time `json:"exp,omitempty"`
	// Act is the RFC 8693 §4.1 actor of a delegated token (token exchange).
	Act map[string]any `json:"act,omitempty"`
	// GrantedAt is when the person approved the grant; refresh tokens never
	// outlive GrantedAt + Config.GrantLifetime.
	GrantedAt time.Time `json:"gat,omitzero"`
	// Scopes are the scopes the person granted at the authorization
	// endpoint: a refresh may ask for fewer, and one naming none gets these
	// (RFC 6749 §6). Empty in grants written before it was kept: then the
	// refreshed token's own scopes are the bound.
	Scopes []string `json:"gsc,omitempty"`
	// TokenHash binds an access token record to its exact token (see
	// signingInputHash).
	TokenHash string `json:"th,omitempty"`
	// StatusIdx is the grant's index in the Token Status List (status.go),
	// set when its first access token is issued; 0 before.
	StatusIdx int64 `json:"si,omitempty"`
	// CnfJKT is the RFC 7638 thumbprint of the DPoP key the access token
	// issued with this session is bound to (RFC 9449 §6: cnf.jkt); empty
	// for a Bearer token. Set at every issuance.
	CnfJKT string `json:"jkt,omitempty"`
	// RefreshJKT binds the refresh tokens of a public client to the key of
	// the proof it showed when they were issued (RFC 9449 §5); every
	// refresh must prove that key, and rotation carries it on.
	RefreshJKT string `json:"rjkt,omitempty"`
	// AuthorizeJKT is the dpop_jkt sent to the authorization endpoint
	// (RFC 9449 §10): the code may only be redeemed with a proof of that key.
	AuthorizeJKT string `json:"ajkt,omitempty"`
	// Federated names the trusted issuer (enterprise IdP or workload
	// issuer) whose assertion the grant came from, when its subject is
	// that issuer's ("<iss>#<sub>") rather than a local person's.
	Federated string `json:"fed,omitempty"`
}

var _ fosite.Session = (*session)(nil)

func newSession(subject string) *session {
	return &session{Subject: subject, ExpiresAt: map[fosite.TokenType]time.Time{}}
}

func (s *session) SetExpiresAt(key fosite.TokenType, exp time.Time) {
	if s.ExpiresAt == nil {
		s.ExpiresAt = map[fosite.TokenType]time.Time{}
	}
	s.ExpiresAt[key] = exp
}

func (s *session) GetExpiresAt(key fosite.TokenType) time.Time {
	return s.ExpiresAt[key]
}

func (s *session) GetUsername() string { return s.Subject }
func (s *session) GetSubject() string  { return s.Subject }

func (s *session) Clone() fosite.Session {
	if s == nil {
		return nil
	}
	// A copy of every field, then of what the fields share, so a field
	// added later is never lost on refresh (fosite clones the session).
	c := *s
	c.ExpiresAt, c.Act, c.Scopes = maps.Clone(s.ExpiresAt), maps.Clone(s.Act), slices.Clone(s.Scopes)
	return &c
}

// storedRequest is the JSON form of a fosite.Requester kept (sealed) in
// storage.Token.Data. The client is stored by ID and looked up again when the
// request is read back, so a deleted client's tokens stop working.
type storedRequest struct {
	ID              string     `json:"id"`
	RequestedAt     time.Time  `json:"at"`
	ClientID        string     `json:"cid"`
	RequestedScope  []string   `json:"rs,omitempty"`
	GrantedScope    []string   `json:"gs,omitempty"`
	RequestedAud    []string   `json:"ra,omitempty"`
	GrantedAud      []string   `json:"ga,omitempty"`
	Form            url.Values `json:"f,omitempty"`
	Session         *session   `json:"s"`
	AccessSignature string     `json:"as,omitempty"` // for refresh tokens: the access token issued with it
	// PKCE is the challenge of an authorization code (RFC 7636 §4.3), kept
	// in the code's record; nil in other records and in code records
	// written before it moved there (those have a KindPKCE record).
	PKCE *pkceChallenge `json:"pk,omitempty"`
	// Parent is, for a refresh token issued by a rotation, the signature
	// of the refresh token it replaced: using this token ends the parent's
	// grace window (tokenStore.RotateRefreshToken).
	Parent string `json:"pr,omitempty"`
}

func toStored(r fosite.Requester) *storedRequest {
	sr := &storedRequest{
		ID:             r.GetID(),
		RequestedAt:    r.GetRequestedAt(),
		RequestedScope: r.GetRequestedScopes(),
		GrantedScope:   r.GetGrantedScopes(),
		RequestedAud:   r.GetRequestedAudience(),
		GrantedAud:     r.GetGrantedAudience(),
		Form:           r.GetRequestForm(),
	}
	if c := r.GetClient(); c != nil {
		sr.ClientID = c.GetID()
	}
	if s, ok := r.GetSession().(*session); ok {
		sr.Session = s
	} else if s := r.GetSession(); s != nil {
		sr.Session = &session{Subject: s.GetSubject(), ExpiresAt: map[fosite.TokenType]time.Time{
			fosite.AccessToken:   s.GetExpiresAt(fosite.AccessToken),
			fosite.RefreshToken:  s.GetExpiresAt(fosite.RefreshToken),
			fosite.AuthorizeCode: s.GetExpiresAt(fosite.AuthorizeCode),
		}}
	} else {
		sr.Session = newSession("")
	}
	return sr
}

// toRequest rebuilds a fosite.Request around client.
func (sr *storedRequest) toRequest(client fosite.Client) *fosite.Request {
	sess := sr.Session
	if sess == nil {
		sess = newSession("")
	}
	form := sr.Form
	if form == nil {
		form = url.Values{}
	}
	return &fosite.Request{
		ID:                sr.ID,
		RequestedAt:       sr.RequestedAt,
		Client:            client,
		RequestedScope:    fosite.Arguments(sr.RequestedScope),
		GrantedScope:      fosite.Arguments(sr.GrantedScope),
		RequestedAudience: fosite.Arguments(sr.RequestedAud),
		GrantedAudience:   fosite.Arguments(sr.GrantedAud),
		Form:              form,
		Session:           sess,
	}
}
