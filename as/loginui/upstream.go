package loginui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/as/authflow"
	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/upstream"
)

// UpstreamProvider is an OpenID provider people sign in through
// (*upstream.Provider).
type UpstreamProvider interface {
	ID() string
	AuthCodeURL(ctx context.Context, state, nonce, verifier string, params ...string) (string, error)
	// CheckResponseIssuer applies RFC 9207 §2.4 to the callback's iss
	// parameter ("" when absent).
	CheckResponseIssuer(ctx context.Context, iss string) error
	Exchange(ctx context.Context, code, verifier, nonce string) (*upstream.Identity, error)
	Check(id *upstream.Identity) error
	Capped() bool
	Scopes(claims map[string][]string) []string
}

// Upstream is one provider offered on the login page.
type Upstream struct {
	Provider UpstreamProvider
	// Name is the label of its button.
	Name string
}

// UpstreamUserStore is the part of storage.UserStore the upstream sign-in
// uses: it records the person and reads their record back for the scope
// cap and to see whether they were disabled.
type UpstreamUserStore interface {
	RecordLogin(ctx context.Context, u *storage.User) (*storage.User, error)
	GetUser(ctx context.Context, subject string) (*storage.User, error)
}

// UpstreamSubject is the subject the AS issues for a person who signed in
// through upstream id with the provider's subject sub: "{id}:{sub}". Stable
// per provider and person; configuration refuses local usernames of that
// form, so the two never collide.
func UpstreamSubject(id, sub string) string { return id + ":" + sub }

// SplitUpstreamSubject is the inverse of UpstreamSubject for a configured
// provider id; ok is false for any other subject (a local username).
func (u *UI) upstreamOf(subject string) (*Upstream, bool) {
	id, _, ok := strings.Cut(subject, ":")
	if !ok {
		return nil, false
	}
	for i := range u.cfg.Upstreams {
		if u.cfg.Upstreams[i].Provider.ID() == id {
			return &u.cfg.Upstreams[i], true
		}
	}
	return nil, false
}

// RefreshSealer returns the sealer of upstream refresh tokens at rest: the
// loginui stores them with it and the AS opens them to recheck a person at
// refresh. The subject is the associated data, so a sealed token moved to
// another person's record does not open.
func RefreshSealer(secret []byte) (*seal.Sealer, error) {
	return seal.New(secret, "mcpauth upstream refresh token")
}

// pendingUpstream is what a sign-in through a provider carries from our
// login page to the callback, sealed into the state parameter (encrypted
// and authenticated with the session cookie's keys): the verifier and
// nonce never appear in clear anywhere but here.
type pendingUpstream struct {
	ID       string `json:"jti"`
	Upstream string `json:"up"`
	Sess     string `json:"sid"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"pkce"`
	Exp      int64  `json:"exp"`
	// MaxAge, when not negative, asks the provider for an authentication
	// no older than this many seconds before Start (max_age, OpenID
	// Connect Core §3.1.2.1; 0 for prompt=login at our authorization
	// endpoint), and the ID token's auth_time must show one.
	MaxAge int64 `json:"max_age"`
	Start  int64 `json:"iat"`
	// Txn is the authorization transaction the sign-in returns to; Page,
	// without one, the page of Handler's it returns to.
	Txn  *authflow.Transaction `json:"txn,omitempty"`
	Page string                `json:"page,omitempty"`
}

// signInPages are the pages of Handler's that sign a person in and that a
// sign-in through a provider returns to.
var signInPages = []string{"consents"}

// returnsHome reports whether p returns to a transaction or to one of
// signInPages, not both: a state naming anything else is not one we issue.
func (p *pendingUpstream) returnsHome() bool {
	if p.Txn != nil {
		return p.Page == ""
	}
	if id, ok := strings.CutPrefix(p.Page, approvalPage("")); ok {
		return approvalID(id)
	}
	return slices.Contains(signInPages, p.Page)
}

// pendingFor is what a sign-in returns to when it succeeds: its
// authorization transaction, or one of the pages Handler serves.
type pendingFor struct {
	txn  *authflow.Transaction
	page string
}

const pendingCookieName = "mcpauth_upstream_state" // securecookie MAC name, never set as a cookie

// startUpstream sends the person to provider up, returning afterwards to
// pf, with an authentication no older than maxAge seconds (-1: any). The
// state is bound to this browser's session and single use (checked at the
// callback).
func (u *UI) startUpstream(w http.ResponseWriter, r *http.Request, sess session, up *Upstream, pf pendingFor, maxAge int64) {
	sess = u.ensureSession(w, sess)
	now := u.now()
	p := pendingUpstream{
		ID: randomID(), Upstream: up.Provider.ID(), Sess: sess.ID, Txn: pf.txn, Page: pf.page,
		Nonce: upstream.RandomToken(), Verifier: upstream.NewVerifier(), Exp: now.Add(u.cfg.FlowTTL).Unix(),
		MaxAge: maxAge, Start: now.Unix(),
	}
	state, err := u.cookies.Encode(pendingCookieName, p)
	if err != nil {
		u.log.ErrorContext(r.Context(), "loginui: encoding upstream state", "err", err)
		u.ErrorPage(w, http.StatusInternalServerError, "Sign-in failed", "The sign-in could not be started. Please try again.")
		return
	}
	var params []string
	if maxAge >= 0 {
		params = []string{"max_age", strconv.FormatInt(maxAge, 10)}
	}
	dest, err := up.Provider.AuthCodeURL(r.Context(), state, p.Nonce, p.Verifier, params...)
	if err != nil {
		u.log.WarnContext(r.Context(), "loginui: upstream unavailable", "upstream", up.Provider.ID(), "err", err)
		u.ErrorPage(w, http.StatusBadGateway, "Sign-in provider unavailable",
			up.Name+" cannot be reached right now. Please try again in a moment.")
		return
	}
	u.audit(r.Context(), "login.upstream_started", "upstream", up.Provider.ID(), "addr", u.cfg.ClientIP(r))
	http.Redirect(w, r, dest, http.StatusSeeOther)
}

// freshSkew is the clock difference allowed between the provider's
// auth_time and our start of a fresh sign-in.
const freshSkew = 2 * time.Minute

// Callback parameter limits; anything longer is refused.
const (
	maxStateLen = 16 << 10
	maxCodeLen  = 4096
)

// callbackParams reads the provider's answer (RFC 6749 §4.1.2, §4.1.2.1):
// each parameter at most once and of bounded length.
type callbackParams struct {
	State, Code, Error, Iss string
}

var errBadCallback = errors.New("loginui: bad callback parameters")

func parseCallback(q url.Values) (callbackParams, error) {
	var c callbackParams
	for _, f := range []struct {
		name string
		dst  *string
		max  int
	}{
		{"state", &c.State, maxStateLen},
		{"code", &c.Code, maxCodeLen},
		{"error", &c.Error, 64},
		{"iss", &c.Iss, 2048},
	} {
		vs := q[f.name]
		if len(vs) > 1 || (len(vs) == 1 && len(vs[0]) > f.max) {
			return callbackParams{}, errBadCallback
		}
		if len(vs) == 1 {
			*f.dst = vs[0]
		}
	}
	if c.State == "" || (c.Code == "") == (c.Error == "") {
		return callbackParams{}, errBadCallback
	}
	if strings.ContainsFunc(c.Error, func(r rune) bool { return r < 0x20 || r > 0x7e || r == '"' || r == '\\' }) {
		return callbackParams{}, errBadCallback
	}
	return c, nil
}

// serveCallback is /upstream/{id}/callback: it checks the state (sealed by
// us, for this provider, this browser session, not expired, not used
// before) and the iss parameter (RFC 9207 §2.4), redeems the code,
// validates the ID token, applies the allow rules, records the person and
// signs them in, then returns to the authorization request, which shows
// our consent page. Every failure is a
// page of ours: the OAuth client did not cause it and is not sent an error.
//
// Only GET is answered (RFC 6749 §4.1.2: the provider redirects the browser
// with a GET). Any other method, HEAD included (a link preview, a
// prefetching proxy), is 405 with Allow: GET before the state is read, so
// it cannot use the state up or redeem the code.
func (u *UI) serveCallback(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		u.ErrorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	up := u.upstreamByID(id)
	if up == nil {
		u.ErrorPage(w, http.StatusNotFound, "Not found", "There is no such page.")
		return
	}
	ctx := r.Context()
	again := "Please start again from the application."
	cb, err := parseCallback(r.URL.Query())
	if err != nil {
		u.ErrorPage(w, http.StatusBadRequest, "Sign-in failed", "The answer from "+up.Name+" could not be read. "+again)
		return
	}
	var p pendingUpstream
	if err := u.cookies.Decode(pendingCookieName, cb.State, &p); err != nil || p.ID == "" || p.Upstream != id || !p.returnsHome() {
		u.audit(ctx, "login.upstream_failed", "upstream", id, "reason", "state")
		u.ErrorPage(w, http.StatusBadRequest, "Sign-in failed", "This sign-in answer does not belong to a sign-in started here. "+again)
		return
	}
	sess := u.readSession(r)
	if sess.ID == "" || sess.ID != p.Sess {
		u.audit(ctx, "login.upstream_failed", "upstream", id, "reason", "session")
		u.ErrorPage(w, http.StatusBadRequest, "Sign-in failed", "This sign-in was started in another browser, or your session ended. "+again)
		return
	}
	now := u.now()
	if now.Unix() >= p.Exp {
		u.audit(ctx, "login.upstream_failed", "upstream", id, "reason", "expired")
		u.ErrorPage(w, http.StatusBadRequest, "Sign-in expired", "The sign-in took too long. "+again)
		return
	}
	switch err := u.cfg.JTIs.UseJTI(ctx, "loginui-upstream:"+p.ID, time.Unix(p.Exp, 0)); {
	case errors.Is(err, storage.ErrAlreadyUsed):
		u.audit(ctx, "login.upstream_failed", "upstream", id, "reason", "replay")
		u.ErrorPage(w, http.StatusBadRequest, "Sign-in failed", "This sign-in answer was already used. "+again)
		return
	case err != nil:
		u.storageError(w, r, "using upstream state", err)
		return
	}
	// Mix-up defence (RFC 9207 §2.4): an answer naming another issuer, or
	// lacking the iss its provider promised, is neither redeemed nor
	// believed, error answers included.
	if err := up.Provider.CheckResponseIssuer(ctx, cb.Iss); err != nil {
		u.upstreamFailure(w, r, up, err)
		return
	}
	if cb.Error != "" {
		// The person cancelled, or the provider refused them: nothing the
		// OAuth client did. Offer to start over rather than bouncing an
		// error to it.
		u.audit(ctx, "login.upstream_failed", "upstream", id, "reason", "provider_error", "error", cb.Error)
		u.ErrorPage(w, http.StatusForbidden, "Sign-in not completed", up.Name+" did not complete the sign-in ("+cb.Error+"). "+again)
		return
	}
	ident, err := up.Provider.Exchange(ctx, cb.Code, p.Verifier, p.Nonce)
	if err != nil {
		u.upstreamFailure(w, r, up, err)
		return
	}
	if p.MaxAge >= 0 && (ident.AuthTime.IsZero() || ident.AuthTime.Before(time.Unix(p.Start-p.MaxAge, 0).Add(-freshSkew))) {
		u.audit(ctx, "login.upstream_failed", "upstream", id, "reason", "not_reauthenticated")
		u.ErrorPage(w, http.StatusBadGateway, "Sign-in failed", "The application asked you to sign in again, but "+up.Name+" did not. "+again)
		return
	}
	if err := up.Provider.Check(ident); err != nil {
		var de *upstream.DeniedError
		rule := "allow rules"
		if errors.As(err, &de) {
			rule = de.Rule
		}
		u.audit(ctx, "login.upstream_refused", "upstream", id, "sub", UpstreamSubject(id, ident.Subject), "rule", rule)
		u.ErrorPage(w, http.StatusForbidden, "Not allowed", "Your "+up.Name+" account may not use this service: "+ruleText(rule)+". Ask your administrator for access.")
		return
	}
	subject := UpstreamSubject(id, ident.Subject)
	rec := &storage.User{
		Subject: subject, Upstream: id, UpstreamSubject: ident.Subject,
		Name: strings.TrimSpace(cleanText(ident.Name)), Email: ident.Email, Groups: ident.Groups, Claims: ident.Claims,
		LastSeen: now, CheckedAt: now,
	}
	if ident.RefreshToken != "" && u.refreshSeal != nil {
		rec.UpstreamRefresh = u.refreshSeal.Seal([]byte(ident.RefreshToken), []byte(subject))
	}
	stored, err := u.cfg.UpstreamUsers.RecordLogin(ctx, rec)
	if err != nil {
		u.storageError(w, r, "recording the login", err)
		return
	}
	if !u.people.Active(subject, stored) {
		u.audit(ctx, "login.refused", "sub", subject, "upstream", id, "reason", "disabled")
		u.ErrorPage(w, http.StatusForbidden, "Account disabled", "Your account has been disabled on this service. Ask your administrator for access.")
		return
	}
	// Session fixation (OWASP): a new session id at every login, as for a
	// password login.
	if err := u.endSession(ctx, sess); err != nil {
		u.log.ErrorContext(ctx, "loginui: ending the previous session", "err", err)
	}
	ns, err := u.startSession(r, subject, now)
	if err != nil {
		u.storageError(w, r, "storing session", err)
		return
	}
	u.writeSession(w, ns)
	u.audit(ctx, "login.succeeded", "sub", subject, "upstream", id, "addr", u.cfg.ClientIP(r))
	if p.Txn != nil {
		p.Txn.RecordSignIn(subject, ns.ID)
		u.returnTo(w, r, p.Txn)
		return
	}
	http.Redirect(w, r, u.cfg.BasePath+"/"+p.Page, http.StatusSeeOther)
}

// upstreamFailure shows the page for a failed code exchange or ID token.
func (u *UI) upstreamFailure(w http.ResponseWriter, r *http.Request, up *Upstream, err error) {
	again := "Please start again from the application."
	reason, status, title, detail := "invalid_token", http.StatusBadGateway, "Sign-in failed", "The answer from "+up.Name+" was not valid. "+again
	switch {
	case errors.Is(err, upstream.ErrUnavailable):
		reason, title, detail = "unavailable", "Sign-in provider unavailable", up.Name+" cannot be reached right now. Please try again in a moment."
	case errors.Is(err, upstream.ErrWrongIssuer):
		reason, status, detail = "wrong_issuer", http.StatusBadRequest, "This sign-in answer did not come from "+up.Name+" (its iss parameter names another issuer, or is missing). "+again
	case errors.Is(err, upstream.ErrRefused):
		reason, status, detail = "refused", http.StatusBadRequest, up.Name+" did not accept this sign-in. "+again
	case errors.Is(err, upstream.ErrClockSkew):
		reason, title, detail = "clock_skew", "Clocks differ", "The clocks of "+up.Name+" and this service disagree by more than two minutes, so the sign-in cannot be trusted. Ask your administrator to check the time on this server."
	case errors.Is(err, upstream.ErrExpired):
		reason, title, detail = "expired", "Sign-in expired", "The answer from "+up.Name+" had expired when it arrived. "+again+" If this keeps happening, the clocks of "+up.Name+" and this service may disagree."
	}
	u.log.WarnContext(r.Context(), "loginui: upstream sign-in failed", "upstream", up.Provider.ID(), "reason", reason, "err", err)
	u.audit(r.Context(), "login.upstream_failed", "upstream", up.Provider.ID(), "reason", reason)
	u.ErrorPage(w, status, title, detail)
}

func ruleText(rule string) string {
	switch rule {
	case "allowed_domains":
		return "it needs a verified email address at one of the allowed domains"
	case "allowed_groups":
		return "it is not in any of the allowed groups"
	}
	return "it is not admitted by the sign-in rules"
}

// upstreamViews are the login page's buttons.
func (u *UI) upstreamViews() []upstreamView {
	out := make([]upstreamView, 0, len(u.cfg.Upstreams))
	for _, up := range u.cfg.Upstreams {
		out = append(out, upstreamView{ID: up.Provider.ID(), Name: up.Name})
	}
	return out
}

type upstreamView struct{ ID, Name string }

// handleUpstreamPost starts a sign-in through the provider chosen on the
// login page of one of Handler's pages (a form with CSRF and flow tokens,
// like the password form); page names it, bind is its flow binding.
func (u *UI) handleUpstreamPost(w http.ResponseWriter, r *http.Request, sess session, f *submittedForm, page, bind string) {
	ok, err := u.checkForm(r.Context(), sess, f, stepUpstream, bind)
	if err != nil {
		u.storageError(w, r, "using flow token", err)
		return
	}
	again := loginFor{page: bind}
	if !ok {
		u.renderLogin(w, r, sess, again, http.StatusForbidden, "This sign-in form has expired or was already used. Please try again.", "")
		return
	}
	if up := u.upstreamByID(f.Upstream); up != nil {
		u.startUpstream(w, r, sess, up, pendingFor{page: page}, -1)
		return
	}
	u.renderLogin(w, r, sess, again, http.StatusBadRequest, "Please choose one of the sign-in options.", "")
}

// upstreamByID returns the configured provider id, or nil.
func (u *UI) upstreamByID(id string) *Upstream {
	for i := range u.cfg.Upstreams {
		if u.cfg.Upstreams[i].Provider.ID() == id {
			return &u.cfg.Upstreams[i]
		}
	}
	return nil
}

// who names a signed-in person on the pages: for someone who signed in
// through a provider, the name (or email) it gave with their subject, as in
// "Alice Admin (corp:00u1a2b3c)"; for anyone else the subject.
func (u *UI) who(ctx context.Context, subject string) string {
	if _, ok := u.upstreamOf(subject); !ok {
		return subject
	}
	rec, err := u.cfg.UpstreamUsers.GetUser(ctx, subject)
	if err != nil {
		return subject
	}
	name := rec.Name
	if name == "" {
		name = rec.Email
	}
	if name = cleanText(name); name == "" {
		return subject
	}
	return name + " (" + subject + ")"
}
