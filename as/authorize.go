package as

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/loginui"
)

// singleAuthorizeParams may appear at most once (RFC 6749 §3.1).
var singleAuthorizeParams = []string{"response_type", "scope", "state", "code_challenge", "code_challenge_method",
	"prompt", "response_mode", "nonce", "dpop_jkt"}

// serveAuthorize is the authorization endpoint (RFC 6749 §4.1.1, RFC 7636,
// RFC 8707, RFC 9207). It validates the request, hands the person-facing part
// to loginui, and redirects with a code, or with an error, always with iss.
// An unknown client or a redirect URI that does not match gets an HTML error
// page and is never redirected (RFC 6749 §4.1.2.1).
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
	// The OAuth parameters come from the query; the login and consent forms
	// post back to the same URL with their own fields in the body. A POSTed
	// authorization request without a query uses the body.
	q := r.URL.Query()
	if r.Method == http.MethodPost && q.Get("client_id") == "" {
		q = cloneValues(r.PostForm)
	}
	ctx := r.Context()
	if len(q["client_id"]) != 1 || len(q["redirect_uri"]) > 1 {
		s.errorPage(w, http.StatusBadRequest, "Invalid request", "The request must name exactly one client_id and at most one redirect_uri.")
		return
	}
	c, err := s.clients.get(ctx, q.Get("client_id"))
	if err != nil {
		if isUnavailable(err) {
			s.log.error(ctx, "client lookup", "err", err)
			s.errorPage(w, http.StatusServiceUnavailable, "Temporarily unavailable", "Please try again in a moment.")
			return
		}
		s.errorPage(w, http.StatusBadRequest, "Unknown client", "The application that sent you here is not registered with this server.")
		return
	}
	redirectURI := q.Get("redirect_uri")
	if redirectURI == "" {
		if len(c.redirectURIs) != 1 {
			s.errorPage(w, http.StatusBadRequest, "Invalid request", "The request has no redirect_uri.")
			return
		}
		redirectURI = c.redirectURIs[0]
	} else if !matchRedirectURI(c.redirectURIs, redirectURI) {
		s.errorPage(w, http.StatusBadRequest, "Invalid redirect URI", "The redirect URI does not match any registered for this application.")
		return
	} else if !slices.Contains(c.redirectURIs, redirectURI) {
		// A loopback URI on another port: fosite, which checks the redirect
		// URI again, sees the client with this one added.
		ctx = withLoopbackRedirect(ctx, redirectURI)
	}
	if !c.GetGrantTypes().Has("authorization_code") {
		s.errorPage(w, http.StatusBadRequest, "Unauthorized client", "This application may not use the authorization code flow.")
		return
	}
	// From here on errors go back to the client, with state and iss: by a
	// redirect for clients the operator configured, or once the person has
	// answered one of our pages; otherwise on our own page with a link
	// back (RFC 9700 §4.11.2: a registered redirect URI alone does not make
	// the server safe to bounce through).
	state := q.Get("state")
	interacted := false
	fail := func(err error) {
		e := s.toOAuthError(ctx, err)
		if c.source != "config" && !interacted {
			s.clientErrorPage(w, redirectURI, state, e.Code, e.Description)
			return
		}
		s.redirectError(w, r, redirectURI, state, e.Code, e.Description)
	}
	for _, p := range singleAuthorizeParams {
		if len(q[p]) > 1 {
			fail(fosite.ErrInvalidRequest.WithHintf("The parameter %q is repeated.", p))
			return
		}
	}
	if q.Get("response_type") != "code" {
		fail(fosite.ErrUnsupportedResponseType.WithHint("Only response_type=code is supported."))
		return
	}
	if rm := q.Get("response_mode"); rm != "" && rm != "query" {
		fail(fosite.ErrUnsupportedResponseMode.WithHint("Only response_mode=query is supported."))
		return
	}
	if q.Get("request") != "" || q.Get("request_uri") != "" {
		fail(fosite.ErrRequestNotSupported)
		return
	}
	if err := checkPKCE(q.Get("code_challenge"), q.Get("code_challenge_method")); err != nil {
		fail(err)
		return
	}
	if jkt := q.Get("dpop_jkt"); jkt != "" && !validJKT(jkt) {
		fail(fosite.ErrInvalidRequest.WithHint("The dpop_jkt parameter is not a SHA-256 JWK thumbprint."))
		return
	}
	res, err := s.pickResource(c, q["resource"])
	if err != nil {
		fail(err)
		return
	}
	scopes, err := grantScopes(c, res, fosite.RemoveEmpty(splitSpace(q.Get("scope"))))
	if err != nil {
		fail(err)
		return
	}
	prompts := splitSpace(q.Get("prompt"))
	if slices.Contains(prompts, "none") {
		fail(&fosite.RFC6749Error{ErrorField: "login_required", DescriptionField: "This server always asks the person; prompt=none is not supported.", CodeField: http.StatusBadRequest})
		return
	}
	if s.ui == nil {
		s.errorPage(w, http.StatusServiceUnavailable, "Login unavailable", "This server has no login pages configured.")
		return
	}

	// Hand fosite a request already within policy: narrowed scopes, the
	// chosen redirect URI as sent, no audience of the client's choosing.
	fq := cloneValues(q)
	fq.Set("scope", strings.Join(scopes, " "))
	fq.Del("audience")
	// fosite refuses a state shorter than its minimum entropy (at least 8
	// whatever it is configured to), an absent one included. state belongs
	// to the client and is optional with PKCE (OAuth 2.1 §4.1.1, §7.12): the
	// check is handed a placeholder and the client's own value, absent or of
	// any length, is put back on the request it returns (restoreState).
	fq.Set("state", statePlaceholder)
	fr := r.Clone(ctx)
	fr.Form = fq
	fr.PostForm = url.Values{}
	fr.Body = http.NoBody
	ar, err := s.provider.NewAuthorizeRequest(ctx, fr)
	restoreState(ar, state)
	if err != nil {
		if ar == nil || !ar.IsRedirectURIValid() {
			s.errorPage(w, http.StatusBadRequest, "Invalid request", "The authorization request is not valid.")
			return
		}
		fail(err)
		return
	}

	prompt := loginui.Prompt{
		ClientID:     c.id,
		ClientName:   c.name,
		RedirectURI:  redirectURI,
		RedirectHost: hostOf(redirectURI),
		LoopbackOnly: allLoopback(c.redirectURIs),
		Resource:     res.URI,
		ResourceName: res.Name,
		Scopes:       scopes,
		ScopesNamed:  len(fosite.RemoveEmpty(splitSpace(q.Get("scope")))) > 0,
		ForceLogin:   slices.Contains(prompts, "login"),
		ForceConsent: slices.Contains(prompts, "consent"),
		RedirectURIs: slices.Clone(c.redirectURIs),
		// RFC 8252 §8.6: a public client on loopback or a private-use
		// scheme cannot prove which program it is; a remembered consent
		// still takes one click.
		ConfirmRemembered: c.public && localRedirect(redirectURI),
	}
	if c.source == "cimd" || strings.HasPrefix(c.id, "https://") {
		prompt.CIMDHost = hostOf(c.id)
	}
	result, ok := s.ui.Authorize(w, r, prompt)
	if !ok {
		return
	}
	interacted = result.Interacted
	if result.Denied && len(result.NotPermitted) > 0 {
		// Beyond what the person's organisation allows (claim_scopes): a
		// page that says so, with the access_denied answer as the way back,
		// rather than a narrowed grant the client would ask past again.
		loc, err := s.errorResponseURL(redirectURI, state, "access_denied", "The person's organisation does not permit the requested scope.")
		if err != nil {
			s.errorPage(w, http.StatusBadRequest, "Invalid redirect URI", "The redirect URI cannot be used.")
			return
		}
		s.ui.NotPermittedPage(w, result.NotPermitted, loc)
		return
	}
	if result.Denied {
		fail(&fosite.RFC6749Error{ErrorField: "access_denied", DescriptionField: "The person denied the request.", CodeField: http.StatusForbidden})
		return
	}
	sess := newSession(result.Subject)
	sess.GrantedAt = s.now()
	// RFC 9449 §10: the code may only be redeemed with a proof of this key.
	sess.AuthorizeJKT = q.Get("dpop_jkt")
	ar.SetRequestedAudience(fosite.Arguments{res.URI})
	ar.GrantAudience(res.URI)
	for _, sc := range result.Scopes {
		if slices.Contains(scopes, sc) {
			ar.GrantScope(sc)
		}
	}
	// What the person granted bounds every refresh of this grant (RFC 6749 §6).
	sess.Scopes = slices.Clone(ar.GetGrantedScopes())
	// The PKCE challenge goes into the code's own record (redeem.go).
	form := ar.GetRequestForm()
	ctx = withPKCE(ctx, form.Get("code_challenge"), form.Get("code_challenge_method"))
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, sess)
	if err != nil {
		fail(err)
		return
	}
	resp.AddParameter("iss", s.issuer)
	writeAuthorizeResponse(w, ar, resp, state)
}

// statePlaceholder stands in for the client's state during fosite's request
// parsing; it is longer than any minimum entropy fosite enforces.
const statePlaceholder = "mcpauth-state-placeholder-0123456789abcdef"

// restoreState puts the client's state (possibly empty) back on the request
// fosite parsed with statePlaceholder, so that nothing fosite writes or
// stores carries the placeholder.
func restoreState(ar fosite.AuthorizeRequester, state string) {
	if r, ok := ar.(*fosite.AuthorizeRequest); ok && r != nil {
		r.State = state
		if r.Form == nil {
			return
		}
		if state == "" {
			r.Form.Del("state")
		} else {
			r.Form.Set("state", state)
		}
	}
}

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

// loopbackRedirectKey carries, for one authorization request, a loopback
// redirect URI that matchRedirectURI accepted on a port other than the
// registered one.
type loopbackRedirectKey struct{}

func withLoopbackRedirect(ctx context.Context, uri string) context.Context {
	return context.WithValue(ctx, loopbackRedirectKey{}, uri)
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
