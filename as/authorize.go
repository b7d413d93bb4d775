package as

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/authflow"
	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/storage"
)

// singleAuthorizeParams may appear at most once (RFC 6749 §3.1).
var singleAuthorizeParams = []string{"response_type", "scope", "state", "code_challenge", "code_challenge_method",
	"prompt", "response_mode", "nonce", "dpop_jkt", "max_age"}

// serveAuthorize is the authorization endpoint (RFC 6749 §4.1.1, RFC 7636,
// RFC 8707, RFC 9207). It validates the request once into a transaction
// (authflow) and runs the step authflow.Next decides; the pages' steps
// return to serveContinue. An unknown client or a redirect URI that does
// not match gets an HTML error page and is never redirected (RFC 6749
// §4.1.2.1).
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		h.Set("Allow", "GET, POST")
		s.errorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "The authorization endpoint accepts GET and POST.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, http.StatusBadRequest, "Bad request", "The request could not be read.")
		return
	}
	// The parameters come from the query, or from the body of a request
	// POSTed without one (RFC 6749 §3.1).
	q := r.URL.Query()
	if r.Method == http.MethodPost && q.Get("client_id") == "" {
		q = cloneValues(r.PostForm)
	}
	t, aerr := s.validateAuthorization(r, q)
	if aerr != nil {
		s.answerError(w, r, aerr)
		return
	}
	s.proceed(w, r, t, s.ui.Session(w, r))
}

// serveContinue is where every step of a transaction returns to it
// (loginui.ContinuePath): a GET with the sealed transaction, whose step is
// spent here before the next is decided. Any other method, HEAD included,
// is 405 before the transaction is read, so a link preview cannot spend it.
func (s *Server) serveContinue(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet {
		h.Set("Allow", http.MethodGet)
		s.errorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	if s.ui == nil {
		s.errorPage(w, http.StatusNotFound, "Not found", "There is no such page.")
		return
	}
	sess := s.ui.Session(w, r)
	var t *authflow.Transaction
	err := authflow.ErrInvalid
	if vs := r.URL.Query()["txn"]; len(vs) == 1 {
		t, err = s.flow.Open(r.Context(), vs[0], sess.ID)
	}
	switch {
	case err == nil:
		s.proceed(w, r, t, sess)
	case errors.Is(err, authflow.ErrUsed), errors.Is(err, authflow.ErrExpired), errors.Is(err, authflow.ErrInvalid), errors.Is(err, authflow.ErrOtherSession):
		s.errorPage(w, http.StatusBadRequest, "Sign-in expired", "This step of the sign-in has expired, was already used, or was started in another browser. Please start again from the application.")
	default:
		s.log.error(r.Context(), "using an authorization transaction", "err", err)
		s.errorPage(w, http.StatusServiceUnavailable, "Temporarily unavailable", "Please try again in a moment.")
	}
}

// authzError is how the authorization endpoint answers a request it
// refuses: with err nil, a page of ours (never a redirect); otherwise the
// OAuth error err for the client at redirectURI, redirected when toClient,
// else first shown on our page with a link back (RFC 9700 §4.11.2: a
// registered redirect URI alone does not make the server safe to bounce
// through).
type authzError struct {
	status             int
	title, detail      string
	redirectURI, state string
	toClient           bool
	err                error
}

func (s *Server) answerError(w http.ResponseWriter, r *http.Request, e *authzError) {
	if e.err == nil {
		s.errorPage(w, e.status, e.title, e.detail)
		return
	}
	oe := s.toOAuthError(r.Context(), e.err)
	if !e.toClient {
		s.clientErrorPage(w, e.redirectURI, e.state, oe.Code, oe.Description)
		return
	}
	s.redirectError(w, r, e.redirectURI, e.state, oe.Code, oe.Description)
}

// validateAuthorization checks an authorization request, once: the client
// and its redirect URI, then (errors now going back to the client) the
// parameters, PKCE (RFC 7636 §4.3, S256 only), the resource (RFC 8707),
// the scopes, prompt and max_age (OpenID Connect Core §3.1.2.1), and
// fosite's own checks. It returns the transaction that records the result.
func (s *Server) validateAuthorization(r *http.Request, q url.Values) (*authflow.Transaction, *authzError) {
	ctx := r.Context()
	page := func(status int, title, detail string) *authzError {
		return &authzError{status: status, title: title, detail: detail}
	}
	if len(q["client_id"]) != 1 || len(q["redirect_uri"]) > 1 {
		return nil, page(http.StatusBadRequest, "Invalid request", "The request must name exactly one client_id and at most one redirect_uri.")
	}
	c, aerr := s.lookupClient(ctx, q.Get("client_id"))
	if aerr != nil {
		return nil, aerr
	}
	redirectURI := q.Get("redirect_uri")
	if redirectURI == "" {
		if len(c.redirectURIs) != 1 {
			return nil, page(http.StatusBadRequest, "Invalid request", "The request has no redirect_uri.")
		}
		redirectURI = c.redirectURIs[0]
	} else if !matchRedirectURI(c.redirectURIs, redirectURI) {
		return nil, page(http.StatusBadRequest, "Invalid redirect URI", "The redirect URI does not match any registered for this application.")
	}
	if !c.GetGrantTypes().Has("authorization_code") {
		return nil, page(http.StatusBadRequest, "Unauthorized client", "This application may not use the authorization code flow.")
	}
	state := q.Get("state")
	fail := func(err error) *authzError {
		return &authzError{redirectURI: redirectURI, state: state, toClient: c.source == "config", err: err}
	}
	req, err := s.checkParams(c, redirectURI, q)
	if err != nil {
		return nil, fail(err)
	}
	if s.ui == nil {
		return nil, page(http.StatusServiceUnavailable, "Login unavailable", "This server has no login pages configured.")
	}
	if err := s.fositeChecks(r, q, req); err != nil {
		if errors.Is(err, errRedirectInvalid) {
			return nil, page(http.StatusBadRequest, "Invalid request", "The authorization request is not valid.")
		}
		return nil, fail(err)
	}
	d := authflow.Display{ClientName: c.name, RedirectHost: hostOf(redirectURI), LoopbackOnly: allLoopback(c.redirectURIs), ResourceName: s.resourceName(req.Resource)}
	if c.source == "cimd" || strings.HasPrefix(c.id, "https://") {
		d.CIMDHost = hostOf(c.id)
	}
	return s.flow.New(*req, d), nil
}

// lookupClient reads the client of an authorization request. An
// unreachable store and an unknown client (never registered, or deleted
// since the request began) are pages of ours, never redirects.
func (s *Server) lookupClient(ctx context.Context, id string) (*client, *authzError) {
	c, err := s.clients.get(ctx, id)
	switch {
	case err == nil:
		return c, nil
	case isUnavailable(err):
		s.log.error(ctx, "client lookup", "err", err)
		return nil, &authzError{status: http.StatusServiceUnavailable, title: "Temporarily unavailable", detail: "Please try again in a moment."}
	default:
		return nil, &authzError{status: http.StatusBadRequest, title: "Unknown client", detail: "The application that sent you here is not registered with this server."}
	}
}

// checkParams checks the parameters of a request from client c, whose
// redirect URI is known good, and returns them as an authflow.Request.
func (s *Server) checkParams(c *client, redirectURI string, q url.Values) (*authflow.Request, error) {
	for _, p := range singleAuthorizeParams {
		if len(q[p]) > 1 {
			return nil, fosite.ErrInvalidRequest.WithHintf("The parameter %q is repeated.", p)
		}
	}
	switch {
	case q.Get("response_type") != "code":
		return nil, fosite.ErrUnsupportedResponseType.WithHint("Only response_type=code is supported.")
	case q.Get("response_mode") != "" && q.Get("response_mode") != "query":
		return nil, fosite.ErrUnsupportedResponseMode.WithHint("Only response_mode=query is supported.")
	case q.Get("request") != "" || q.Get("request_uri") != "":
		return nil, fosite.ErrRequestNotSupported
	case len(q.Get("state")) > maxState:
		return nil, fosite.ErrInvalidRequest.WithHintf("The state parameter is longer than %d bytes.", maxState)
	}
	if err := checkPKCE(q.Get("code_challenge"), q.Get("code_challenge_method")); err != nil {
		return nil, err
	}
	if jkt := q.Get("dpop_jkt"); jkt != "" && !validJKT(jkt) {
		return nil, fosite.ErrInvalidRequest.WithHint("The dpop_jkt parameter is not a SHA-256 JWK thumbprint.")
	}
	res, err := s.pickResource(c, q["resource"])
	if err != nil {
		return nil, err
	}
	named := fosite.RemoveEmpty(splitSpace(q.Get("scope")))
	scopes, err := grantScopes(c, res, named)
	if err != nil {
		return nil, err
	}
	prompts := splitSpace(q.Get("prompt"))
	if slices.Contains(prompts, "none") {
		return nil, &fosite.RFC6749Error{ErrorField: "login_required", DescriptionField: "This server always asks the person; prompt=none is not supported.", CodeField: http.StatusBadRequest}
	}
	maxAge := int64(-1)
	if v, ok := q["max_age"]; ok {
		if maxAge, err = strconv.ParseInt(v[0], 10, 64); err != nil || maxAge < 0 || strings.HasPrefix(v[0], "+") {
			return nil, fosite.ErrInvalidRequest.WithHint("max_age must be a number of seconds.")
		}
	}
	return &authflow.Request{
		ClientID:        c.id,
		RedirectURI:     redirectURI,
		RedirectURISent: q.Get("redirect_uri") != "",
		State:           q.Get("state"),
		CodeChallenge:   q.Get("code_challenge"),
		Resource:        res.URI,
		ResourceParams:  q["resource"],
		Scopes:          scopes,
		ScopesNamed:     len(named) > 0,
		DPoPJKT:         q.Get("dpop_jkt"),
		ForceLogin:      slices.Contains(prompts, "login"),
		ForceConsent:    slices.Contains(prompts, "consent"),
		MaxAge:          maxAge,
		// RFC 8252 §8.6: a public client on loopback or a private-use
		// scheme cannot prove which program it is; a remembered consent
		// still takes one click.
		ConfirmRemembered:  c.public && localRedirect(redirectURI),
		ClientRedirectURIs: slices.Clone(c.redirectURIs),
		ErrorsToClient:     c.source == "config",
	}, nil
}

// resourceName is the display name of the configured resource uri.
func (s *Server) resourceName(uri string) string {
	for i := range s.resources {
		if s.resources[i].URI == uri {
			return s.resources[i].Name
		}
	}
	return ""
}

// maxState bounds the client's state, which the transaction carries
// through every page.
const maxState = 4096

// errRedirectInvalid: fosite found the redirect URI unusable; the answer
// is our page, never a redirect.
var errRedirectInvalid = errors.New("as: redirect URI not valid for fosite")

// fositeChecks runs fosite's own parsing of the request once, handing it
// a request already within policy: narrowed scopes, the chosen redirect
// URI as sent, no audience of the client's choosing.
func (s *Server) fositeChecks(r *http.Request, q url.Values, req *authflow.Request) error {
	s.authorizeParses.Add(1)
	fq := cloneValues(q)
	fq.Set("scope", strings.Join(req.Scopes, " "))
	fq.Del("audience")
	// fosite refuses a state shorter than its minimum entropy (at least 8
	// whatever it is configured to), an absent one included. state belongs
	// to the client and is optional with PKCE (OAuth 2.1 §4.1.1, §7.12): the
	// check is handed a placeholder.
	fq.Set("state", statePlaceholder)
	ctx := requestState(r.Context(), req.RedirectURI)
	fr := r.Clone(ctx)
	fr.Form = fq
	fr.PostForm = url.Values{}
	fr.Body = http.NoBody
	ar, err := s.provider.NewAuthorizeRequest(ctx, fr)
	if err != nil && (ar == nil || !ar.IsRedirectURIValid()) {
		return errRedirectInvalid
	}
	return err
}

// proceed runs the step authflow.Next decides for transaction t, bound to
// this browser's session sess (loginui.UI.Session, read once per request).
func (s *Server) proceed(w http.ResponseWriter, r *http.Request, t *authflow.Transaction, sess authflow.Session) {
	ctx := r.Context()
	t.Session = sess.ID
	in, err := s.flowInput(ctx, t, sess)
	if err != nil {
		s.log.error(ctx, "reading the person's consent and record", "err", err)
		s.errorPage(w, http.StatusServiceUnavailable, "Temporarily unavailable", "The service cannot complete this step right now. Please try again in a moment.")
		return
	}
	d := authflow.Next(in)
	req := &t.Request
	switch d.Step {
	case authflow.SignIn, authflow.SignInAt:
		s.ui.SignIn(w, r, sess, t, d)
	case authflow.Consent, authflow.Confirm:
		s.ui.Ask(w, r, sess, t, d)
	case authflow.NotPermitted:
		// Beyond what the person's organisation allows (claim_scopes): a
		// page that says so, with the access_denied answer as the way back,
		// rather than a narrowed grant the client would ask past again.
		s.log.audit(ctx, "consent.not_permitted", "sub", sess.Subject, "client_id", req.ClientID, "resource", req.Resource, "scope", strings.Join(d.NotPermitted, " "))
		loc, err := s.errorResponseURL(req.RedirectURI, req.State, "access_denied", "The person's organisation does not permit the requested scope.")
		if err != nil {
			s.errorPage(w, http.StatusBadRequest, "Invalid redirect URI", "The redirect URI cannot be used.")
			return
		}
		s.ui.NotPermittedPage(w, d.NotPermitted, loc)
	case authflow.Deny:
		s.redirectError(w, r, req.RedirectURI, req.State, "access_denied", "The person denied the request.")
	case authflow.Issue:
		s.issueCode(w, r, t, sess.Subject, d.Scopes)
	}
}

// flowInput gathers what authflow.Next decides on: whether the session's
// person is active, their scope cap, and their remembered consent.
func (s *Server) flowInput(ctx context.Context, t *authflow.Transaction, sess authflow.Session) (authflow.Input, error) {
	in := authflow.Input{Txn: t, Session: sess, OnlyProvider: s.ui.OnlyProvider(), Now: s.now()}
	if sess.Subject == "" {
		return in, nil
	}
	var err error
	if in.Active, err = s.personActive(ctx, sess.Subject, false); err != nil || !in.Active {
		return in, err
	}
	if in.Cap.Scopes, in.Cap.Capped, err = s.personCap(ctx, sess.Subject, false, t.Request.Resource); err != nil {
		return in, err
	}
	c, err := s.cfg.Store.GetConsent(ctx, sess.Subject, t.Request.ClientID, t.Request.Resource)
	switch {
	case errors.Is(err, storage.ErrNotFound):
	case err != nil:
		return in, err
	default:
		in.Remembered = authflow.Remembered(c, in.Now, t.Request.ClientRedirectURIs)
	}
	return in, nil
}

// issueCode redirects to the client with a code for subject and scopes
// (RFC 6749 §4.1.2), bound to the transaction's resource (RFC 8707), PKCE
// challenge (RFC 7636 §4.4) and DPoP key (RFC 9449 §10), with iss (RFC
// 9207 §2).
func (s *Server) issueCode(w http.ResponseWriter, r *http.Request, t *authflow.Transaction, subject string, scopes []string) {
	req := &t.Request
	fail := func(err error) {
		s.answerError(w, r, &authzError{redirectURI: req.RedirectURI, state: req.State, toClient: req.ErrorsToClient || t.Interacted(), err: err})
	}
	if _, aerr := s.lookupClient(r.Context(), req.ClientID); aerr != nil {
		s.answerError(w, r, aerr)
		return
	}
	ctx := requestState(r.Context(), req.RedirectURI)
	fc, err := s.clients.GetClient(ctx, req.ClientID)
	if err != nil {
		fail(err)
		return
	}
	if !matchRedirectURI(fc.GetRedirectURIs(), req.RedirectURI) {
		// The client's registration changed since the request.
		s.errorPage(w, http.StatusBadRequest, "Invalid redirect URI", "The redirect URI does not match any registered for this application.")
		return
	}
	ru, err := url.Parse(req.RedirectURI)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "Invalid redirect URI", "The redirect URI cannot be used.")
		return
	}
	ar := fosite.NewAuthorizeRequest()
	ar.ResponseTypes = fosite.Arguments{"code"}
	ar.Client = fc
	ar.RedirectURI = ru
	ar.State = req.State
	ar.Form = req.FositeForm()
	ar.RequestedScope = fosite.Arguments(slices.Clone(req.Scopes))
	ar.SetRequestedAudience(fosite.Arguments{req.Resource})
	ar.GrantAudience(req.Resource)
	for _, sc := range scopes {
		if slices.Contains(req.Scopes, sc) {
			ar.GrantScope(sc)
		}
	}
	sess := newSession(subject)
	sess.GrantedAt = s.now()
	// RFC 9449 §10: the code may only be redeemed with a proof of this key.
	sess.AuthorizeJKT = req.DPoPJKT
	// What the person granted bounds every refresh of this grant (RFC 6749 §6).
	sess.Scopes = slices.Clone(ar.GetGrantedScopes())
	// The PKCE challenge goes into the code's own record (redeem.go).
	reqStateFrom(ctx).pkce = &pkceChallenge{Challenge: req.CodeChallenge, Method: "S256"}
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, sess)
	if err != nil {
		fail(err)
		return
	}
	resp.AddParameter("iss", s.issuer)
	writeAuthorizeResponse(w, ar, resp, req.State)
}

// statePlaceholder stands in for the client's state during fosite's request
// parsing; it is longer than any minimum entropy fosite enforces.
const statePlaceholder = "mcpauth-state-placeholder-0123456789abcdef"

// writeAuthorizeResponse redirects with the code (RFC 6749 §4.1.2): the
// response's parameters added to the redirect URI's own query, and state
// exactly as the client sent it, or absent when it sent none (fosite would
// add an empty state= parameter).
func writeAuthorizeResponse(w http.ResponseWriter, ar fosite.AuthorizeRequester, resp fosite.AuthorizeResponder, state string) {
	h := w.Header()
	for k := range resp.GetHeader() {
		h.Set(k, resp.GetHeader().Get(k))
	}
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	u := *ar.GetRedirectURI()
	q := u.Query()
	for k, v := range resp.GetParameters() {
		if len(v) > 0 {
			q.Set(k, v[0])
		}
	}
	q.Del("state")
	if state != "" {
		q.Set("state", state)
	}
	u.RawQuery = q.Encode()
	h.Set("Location", u.String())
	w.WriteHeader(http.StatusSeeOther)
}

// checkPKCE requires an S256 code challenge (RFC 7636 §4.2-4.3): 43
// base64url characters; plain and a missing challenge are refused.
func checkPKCE(challenge, method string) error {
	if challenge == "" {
		return fosite.ErrInvalidRequest.WithHint("code_challenge is required (PKCE, S256).")
	}
	if method != "S256" {
		return fosite.ErrInvalidRequest.WithHint("code_challenge_method must be S256.")
	}
	if len(challenge) != 43 {
		return fosite.ErrInvalidRequest.WithHint("code_challenge must be a base64url SHA-256 (43 characters).")
	}
	for i := 0; i < len(challenge); i++ {
		c := challenge[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fosite.ErrInvalidRequest.WithHint("code_challenge must be base64url.")
		}
	}
	return nil
}

// matchRedirectURI compares exactly, except that for http on loopback
// (127.0.0.1 and the rest of 127/8, [::1], localhost) the port may differ,
// and a URI registered without a port matches any (RFC 8252 §7.3: native
// apps listen on whatever port is free; VS Code, Claude Code and Cursor
// register such URIs). The host itself, the path and the query are still
// compared exactly: a URI registered for localhost does not match 127.0.0.1.
// RFC 8252 §8.3 advises against localhost, but the port is the client's to
// choose whichever loopback name it registered.
func matchRedirectURI(registered []string, requested string) bool {
	if slices.Contains(registered, requested) {
		return true
	}
	ru, err := url.Parse(requested)
	if err != nil || ru.Scheme != "http" || ru.User != nil || ru.Fragment != "" || strings.Contains(requested, "#") {
		return false
	}
	if !loopbackHost(ru.Hostname()) {
		return false
	}
	for _, reg := range registered {
		gu, err := url.Parse(reg)
		if err != nil || gu.Scheme != "http" || gu.User != nil {
			continue
		}
		if gu.Hostname() == ru.Hostname() && gu.EscapedPath() == ru.EscapedPath() && gu.RawQuery == ru.RawQuery {
			return true
		}
	}
	return false
}

// loopbackHost reports whether host is a loopback IP literal or localhost.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errorResponseURL is the redirect URI with an error response (RFC 6749
// §4.1.2.1) and iss (RFC 9207 §2).
func (s *Server) errorResponseURL(redirectURI, state, code, desc string) (string, error) {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("error", code)
	if desc != "" {
		q.Set("error_description", desc)
	}
	if state != "" {
		q.Set("state", state)
	}
	q.Set("iss", s.issuer)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// redirectError sends the browser back to the client with an error.
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, redirectURI, state, code, desc string) {
	loc, err := s.errorResponseURL(redirectURI, state, code, desc)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "Invalid redirect URI", "The redirect URI cannot be used.")
		return
	}
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}

// clientErrorPage shows an authorization error on our own page, naming the
// client's host, with a link to the error response the client would have
// got: for clients the operator did not configure, before the person has
// answered a page (RFC 9700 §4.11.2).
func (s *Server) clientErrorPage(w http.ResponseWriter, redirectURI, state, code, desc string) {
	loc, err := s.errorResponseURL(redirectURI, state, code, desc)
	if err != nil || s.ui == nil {
		s.errorPage(w, http.StatusBadRequest, "Invalid request", "The authorization request is not valid.")
		return
	}
	detail := "The application's request could not be accepted (" + code + ")."
	if desc != "" {
		detail += " " + desc
	}
	s.ui.ClientErrorPage(w, http.StatusBadRequest, "The request could not be completed", detail, loc)
}

// localRedirect reports whether a redirect URI reaches only a program on
// the person's device: a loopback address (RFC 8252 §7.3), localhost, or a
// private-use URI scheme (RFC 8252 §7.1).
func localRedirect(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return false
	case "http":
		h := u.Hostname()
		ip := net.ParseIP(h)
		return strings.EqualFold(h, "localhost") || ip != nil && ip.IsLoopback()
	default:
		return true
	}
}

func (s *Server) errorPage(w http.ResponseWriter, status int, title, detail string) {
	if s.ui != nil {
		s.ui.ErrorPage(w, status, title, detail)
		return
	}
	loginui.ErrorPage(w, status, title, detail)
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.Host == "" {
		return u.Scheme + ":"
	}
	return u.Host
}

func allLoopback(uris []string) bool {
	if len(uris) == 0 {
		return false
	}
	for _, raw := range uris {
		u, err := url.Parse(raw)
		if err != nil {
			return false
		}
		h := u.Hostname()
		ip := net.ParseIP(h)
		if !(h == "localhost" || ip != nil && ip.IsLoopback()) {
			return false
		}
	}
	return true
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

func splitSpace(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}
