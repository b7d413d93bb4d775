package loginui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/as/authflow"
	"github.com/mcpauth/mcpauth/storage"
)

// The steps of an authorization transaction this package serves. Each
// form posts the sealed transaction to its own path; the step records its
// outcome in the transaction and returns the browser to ContinuePath.
const (
	LoginPath    = "/authorize/login"
	UpstreamPath = "/authorize/upstream"
	ConsentPath  = "/authorize/consent"
	// ContinuePath is where every step returns to its transaction, with
	// the sealed transaction in the txn parameter (served by the AS).
	ContinuePath = "/authorize/continue"
)

// Session returns the browser session, giving an anonymous visitor one
// (and its cookie) so that a transaction has a session to belong to.
func (u *UI) Session(w http.ResponseWriter, r *http.Request) authflow.Session {
	s := u.ensureSession(w, u.readSession(r))
	as := authflow.Session{ID: s.ID, Subject: s.Subject}
	if s.AuthTime != 0 {
		as.AuthTime = time.Unix(s.AuthTime, 0)
	}
	return as
}

// OnlyProvider reports whether signing in means the one configured
// provider, with no password form to choose it from.
func (u *UI) OnlyProvider() bool { return len(u.cfg.Upstreams) == 1 && len(u.users) == 0 }

// SignIn shows the login page for transaction t (authflow.SignIn), or
// sends the person to the only provider (authflow.SignInAt) with d's
// max_age. as is the browser session Session returned for this request.
func (u *UI) SignIn(w http.ResponseWriter, r *http.Request, as authflow.Session, t *authflow.Transaction, d authflow.Decision) {
	setPageHeaders(w.Header())
	sess := fromFlow(as)
	if d.Step == authflow.SignInAt && len(u.cfg.Upstreams) > 0 {
		u.startUpstream(w, r, sess, &u.cfg.Upstreams[0], pendingFor{txn: t}, d.MaxAge)
		return
	}
	u.renderLogin(w, r, sess, loginFor{txn: t}, http.StatusOK, "", "")
}

// Ask shows the consent page (authflow.Consent) or the one-click continue
// page (authflow.Confirm) for t, and records in t what it asks. as is the
// browser session Session returned for this request.
func (u *UI) Ask(w http.ResponseWriter, r *http.Request, as authflow.Session, t *authflow.Transaction, d authflow.Decision) {
	setPageHeaders(w.Header())
	sess := fromFlow(as)
	t.RecordAsked(sess.Subject, d.Scopes)
	if d.Step == authflow.Confirm {
		u.renderContinue(w, r, sess, t, http.StatusOK)
		return
	}
	u.renderConsent(w, r, sess, t, d.Approved, http.StatusOK, "")
}

// fromFlow is the session Session read, without reading it again. Its
// cookie was written then, if it was new, so Exp is not needed.
func fromFlow(as authflow.Session) session {
	s := session{ID: as.ID, Subject: as.Subject}
	if !as.AuthTime.IsZero() {
		s.AuthTime = as.AuthTime.Unix()
	}
	return s
}

// returnTo sends the browser back to transaction t (303, RFC 9700 §4.12).
func (u *UI) returnTo(w http.ResponseWriter, r *http.Request, t *authflow.Transaction) {
	sealed, err := u.flow.Seal(t)
	if err != nil {
		u.log.ErrorContext(r.Context(), "loginui: sealing the transaction", "err", err)
		u.ErrorPage(w, http.StatusInternalServerError, "Something went wrong", "Please start again from the application.")
		return
	}
	http.Redirect(w, r, u.cfg.BasePath+ContinuePath+"?"+url.Values{"txn": {sealed}}.Encode(), http.StatusSeeOther)
}

// stepForm is a step's form, the browser session it came with and the
// transaction it carries.
type stepForm struct {
	sess session
	f    *submittedForm
	t    *authflow.Transaction
	// err is from authflow.Codec.Peek: nil, or ErrExpired.
	err error
}

// readStep reads a step's form and the transaction it carries, for the
// current session, without spending it. It writes a page and returns false
// when the form cannot be read or the transaction is not this session's.
// A transaction of an ended session goes on from the sign-in in a new one:
// it is one the browser was shown, and anyone may start an authorization
// in it with a link anyway.
func (u *UI) readStep(w http.ResponseWriter, r *http.Request, step string) (*stepForm, bool) {
	setPageHeaders(w.Header())
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		u.ErrorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return nil, false
	}
	f, err := u.parseForm(w, r)
	if err != nil || (f.Step != "" && f.Step != step) {
		u.ErrorPage(w, http.StatusBadRequest, "Bad request", "The form could not be read. Please start again from the application.")
		return nil, false
	}
	sf := &stepForm{sess: u.readSession(r), f: f}
	sf.t, sf.err = u.flow.Peek(f.Txn, sf.sess.ID)
	switch {
	case sf.t == nil:
		u.formExpired(w, step)
		return nil, false
	case errors.Is(sf.err, authflow.ErrOtherSession) && sf.sess.Subject == "" && step != stepLogin && step != stepUpstream:
		// The session ended between the pages: the transaction goes on in
		// a new one, from the sign-in.
		sf.sess = u.ensureSession(w, sf.sess)
		sf.t.Session = sf.sess.ID
		u.renderLogin(w, r, sf.sess, loginFor{txn: sf.t}, http.StatusForbidden, "Your session expired. Please sign in again.", "")
		return nil, false
	case errors.Is(sf.err, authflow.ErrOtherSession):
		u.formExpired(w, step)
		return nil, false
	}
	return sf, true
}

// spend checks the form's CSRF token and spends the transaction's step.
// It returns false, with the error for the page to show again, when the
// form must be refused; a storage failure writes its page and returns
// false with nil.
func (u *UI) spend(w http.ResponseWriter, r *http.Request, sf *stepForm) (bool, error) {
	if sf.err != nil || !u.validCSRF(sf.sess, sf.f.CSRF) {
		return false, authflow.ErrUsed
	}
	t, err := u.flow.Open(r.Context(), sf.f.Txn, sf.sess.ID)
	switch {
	case err == nil:
		sf.t = t
		return true, nil
	case errors.Is(err, authflow.ErrUsed), errors.Is(err, authflow.ErrExpired), errors.Is(err, authflow.ErrInvalid), errors.Is(err, authflow.ErrOtherSession):
		return false, err
	default:
		u.storageError(w, r, "using the transaction", err)
		return false, nil
	}
}

func (u *UI) formExpired(w http.ResponseWriter, step string) {
	says := "This form has expired or was already used. Please start again from the application."
	if step == stepLogin || step == stepUpstream {
		says = "This sign-in form has expired or was already used. Please start again from the application."
	}
	u.ErrorPage(w, http.StatusForbidden, "Form expired", says)
}

// signInStep reads and spends the form of a login page's step (password
// or provider); a refused form shows the login page again, with a fresh
// copy of the transaction.
func (u *UI) signInStep(w http.ResponseWriter, r *http.Request, step string) (*stepForm, bool) {
	sf, ok := u.readStep(w, r, step)
	if !ok {
		return nil, false
	}
	if ok, err := u.spend(w, r, sf); !ok {
		if err != nil {
			u.renderLogin(w, r, sf.sess, loginFor{txn: sf.t}, http.StatusForbidden, "This sign-in form has expired or was already used. Please try again.", sf.f.Username)
		}
		return nil, false
	}
	return sf, true
}

// serveLoginStep is the password form of a transaction: on success the
// person is signed in (a new session), the transaction records it, and the
// browser returns to it.
func (u *UI) serveLoginStep(w http.ResponseWriter, r *http.Request) {
	sf, ok := u.signInStep(w, r, stepLogin)
	if !ok {
		return
	}
	ns, ok := u.checkLogin(w, r, sf.sess, sf.f, loginFor{txn: sf.t})
	if !ok {
		return
	}
	sf.t.RecordSignIn(ns.Subject, ns.ID)
	u.returnTo(w, r, sf.t)
}

// serveUpstreamStep starts a sign-in through the provider chosen on the
// login page of a transaction.
func (u *UI) serveUpstreamStep(w http.ResponseWriter, r *http.Request) {
	sf, ok := u.signInStep(w, r, stepUpstream)
	if !ok {
		return
	}
	up := u.upstreamByID(sf.f.Upstream)
	if up == nil {
		u.renderLogin(w, r, sf.sess, loginFor{txn: sf.t}, http.StatusBadRequest, "Please choose one of the sign-in options.", "")
		return
	}
	u.startUpstream(w, r, sf.sess, up, pendingFor{txn: sf.t}, sf.t.Request.SignInMaxAge())
}

// serveConsentStep records the person's answer on the consent or continue
// page: an approval is remembered (per client, resource and set of
// redirect URIs, joined with what was remembered before) and audited, a
// denial audited; then the browser returns to the transaction.
func (u *UI) serveConsentStep(w http.ResponseWriter, r *http.Request) {
	sf, ok := u.readStep(w, r, stepConsent)
	if !ok {
		return
	}
	t := sf.t
	if sf.sess.Subject == "" || t.AskedOf != sf.sess.Subject {
		// Signed in as someone else since the page was shown: the answer
		// is not theirs to give.
		u.formExpired(w, stepConsent)
		return
	}
	if ok, err := u.spend(w, r, sf); !ok {
		if err != nil {
			u.renderConsent(w, r, sf.sess, t, nil, http.StatusForbidden, "This form has expired or was already used. Please review the request again.")
		}
		return
	}
	t = sf.t
	req := &t.Request
	ctx := r.Context()
	switch sf.f.Action {
	case "deny":
		t.RecordAnswer(authflow.Denied)
		u.audit(ctx, "consent.denied", "sub", sf.sess.Subject, "client_id", req.ClientID, "resource", req.Resource, "scope", strings.Join(t.Asked, " "))
		u.returnTo(w, r, t)
		return
	case "approve":
	default:
		u.ErrorPage(w, http.StatusBadRequest, "Bad request", "Please choose Allow or Deny.")
		return
	}
	if err := u.remember(ctx, sf.sess.Subject, t); err != nil {
		u.storageError(w, r, "storing consent", err)
		return
	}
	t.RecordAnswer(authflow.Approved)
	u.audit(ctx, "consent.granted", "sub", sf.sess.Subject, "client_id", req.ClientID, "resource", req.Resource, "scope", strings.Join(t.Asked, " "))
	u.returnTo(w, r, t)
}

// remember stores the consent subject gave on t's page, joined with an
// unexpired one for the same redirect URIs.
func (u *UI) remember(ctx context.Context, subject string, t *authflow.Transaction) error {
	req := &t.Request
	scopes := slices.Clone(t.Asked)
	redirects := authflow.RedirectSet(req.ClientRedirectURIs)
	old, err := u.cfg.Consents.GetConsent(ctx, subject, req.ClientID, req.Resource)
	switch {
	case err == nil && authflow.Remembered(old, u.now(), req.ClientRedirectURIs) != nil:
		scopes = union(old.Scopes, scopes)
	case err != nil && !errors.Is(err, storage.ErrNotFound):
		return err
	}
	c := &storage.Consent{
		Subject:      subject,
		ClientID:     req.ClientID,
		Resource:     req.Resource,
		Scopes:       scopes,
		RedirectURIs: redirects,
		GrantedAt:    u.now(),
	}
	if u.cfg.ConsentTTL > 0 {
		c.ExpiresAt = c.GrantedAt.Add(u.cfg.ConsentTTL)
	}
	return u.cfg.Consents.PutConsent(ctx, c)
}
