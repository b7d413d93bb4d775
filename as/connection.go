package as

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/connections"
)

// ConnectionTokens releases people's tokens at third-party services
// (connections.Vault): the token exchange answers a request whose resource
// is a connection's with the person's token there.
type ConnectionTokens interface {
	// ForResource returns the connection whose resource is uri
	// (canonical), or nil.
	ForResource(uri string) *connections.Provider
	// Provider returns the connection id, or nil: an exchange may name a
	// connection by its id as audience (RFC 8693 §2.1: a logical name of
	// the target service).
	Provider(id string) *connections.Provider
	// Token returns subject's current token of connection id, refreshed
	// when needed; connections.ErrNotConnected or ErrReconnect when the
	// person must connect first.
	Token(ctx context.Context, subject, id string) (*connections.Token, error)
}

// releasedConnection is a connection's token found by the exchange
// handler's Handle step, handed to its Populate step in the request state.
type releasedConnection struct {
	id  string
	tok *connections.Token
}

// connectRequiredError is RFC 8693's answer when the person must first
// connect their account: interaction_required (OpenID Connect Core §3.1.2.6,
// the word for "the person must act"), with a connect_uri member naming
// the page where they do.
type connectRequiredError struct {
	rfc        *fosite.RFC6749Error
	connectURI string
}

func (e *connectRequiredError) Error() string { return e.rfc.Error() }
func (e *connectRequiredError) Unwrap() error { return e.rfc }

// ConnectURI is where a person connects the account of connection id:
// {issuer}/connections?connection={id}.
func ConnectURI(issuer, id string) string {
	return issuer + "/connections?" + url.Values{"connection": {id}}.Encode()
}

// handleConnection is the exchange for a connection's resource: the client
// must be one of the connection's clients, the subject token an active
// access token of ours issued for a resource the client may use (the
// calling server's own), for a person who is still active; the answer is
// that person's token at the provider (RFC 8693 §2.2.1), or
// interaction_required with connect_uri when they have not connected or
// must reconnect.
func (h *exchangeHandler) handleConnection(ctx context.Context, r fosite.AccessRequester, c *client, p *exchangeParams, cp *connections.Provider) error {
	if !cp.AllowsClient(c.id) {
		return errInvalidTarget("This client may not receive tokens of the requested connection.")
	}
	if dpopKeyFrom(ctx) != "" {
		return fosite.ErrInvalidRequest.WithHint("A connection's token is the provider's bearer token; send the request without a DPoP proof.")
	}
	st := reqStateFrom(ctx)
	if st == nil {
		return fosite.ErrServerError.WithDebug("no request state")
	}
	sub, err := h.verifySubject(ctx, p.subjectToken)
	if err != nil {
		return err
	}
	if !c.allows(sub.audience) {
		return fosite.ErrInvalidGrant.WithHint("The subject_token was issued for a resource this client may not use.")
	}
	if sub.federated != "" {
		return fosite.ErrInvalidGrant.WithHint("The subject_token names no person of this server.")
	}
	tok, err := h.s.cfg.Connections.Token(ctx, sub.subject, cp.ID())
	switch {
	case errors.Is(err, connections.ErrNotConnected), errors.Is(err, connections.ErrReconnect):
		reason := "not_connected"
		hint := "The person has not connected their " + cp.Name() + " account; send them to connect_uri."
		if errors.Is(err, connections.ErrReconnect) {
			reason, hint = "needs_reconnect", "The person must reconnect their "+cp.Name()+" account; send them to connect_uri."
		}
		h.s.log.audit(ctx, "connection.token_refused", "client_id", c.id, "sub", sub.subject, "connection", cp.ID(), "reason", reason)
		return &connectRequiredError{
			rfc:        &fosite.RFC6749Error{ErrorField: "interaction_required", DescriptionField: hint, CodeField: http.StatusBadRequest},
			connectURI: ConnectURI(h.s.cfg.Issuer, cp.ID()),
		}
	case errors.Is(err, connections.ErrUnavailable):
		h.s.log.error(ctx, "connection provider unavailable", "connection", cp.ID(), "err", err)
		return fosite.ErrTemporarilyUnavailable.WithHint("The provider of the requested connection cannot be reached.")
	case err != nil:
		return err
	}
	st.connection = &releasedConnection{id: cp.ID(), tok: tok}
	sess, ok := r.GetSession().(*session)
	if !ok {
		return fosite.ErrServerError.WithDebug("unexpected session type")
	}
	sess.Subject = sub.subject
	r.SetRequestedAudience(fosite.Arguments{cp.Resource()})
	r.GrantAudience(cp.Resource())
	for _, s := range tok.Scopes {
		r.GrantScope(s)
	}
	return nil
}

// populateConnection writes the provider's token as the exchange's answer
// (RFC 8693 §2.2.1): issued_token_type access_token, token_type as the
// provider gave it, expires_in when it said. Nothing is stored.
func (h *exchangeHandler) populateConnection(ctx context.Context, r fosite.AccessRequester, rc *releasedConnection, resp fosite.AccessResponder) error {
	tok := rc.tok
	resp.SetAccessToken(tok.AccessToken)
	tt := tok.TokenType
	if tt == "" {
		tt = "bearer"
	}
	resp.SetTokenType(tt)
	if !tok.ExpiresAt.IsZero() {
		d := tok.ExpiresAt.Sub(h.s.now()).Truncate(time.Second)
		if d < time.Second {
			d = time.Second
		}
		resp.SetExpiresIn(d)
	}
	if len(tok.Scopes) > 0 {
		resp.SetScopes(fosite.Arguments(tok.Scopes))
	}
	resp.SetExtra("issued_token_type", TokenTypeAccessToken)
	h.s.log.audit(ctx, "connection.token_released", "client_id", r.GetClient().GetID(), "sub", r.GetSession().GetSubject(),
		"connection", rc.id, "scope", strings.Join(tok.Scopes, " "))
	return nil
}
