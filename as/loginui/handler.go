package loginui

import (
	"io/fs"
	"net/http"
	"strings"
	"time"
)

// Handler serves the steps of an authorization transaction (LoginPath,
// UpstreamPath, ConsentPath), the providers' callbacks
// (/upstream/{id}/callback), /logout, /consents (list and revoke the
// logged-in person's consents and approvals), the approval pages
// (ApprovalPath) and the /ui/ assets. Paths may arrive with
// or without BasePath in front.
func (u *UI) Handler() http.Handler {
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // embedded at build time
	}
	assets := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if u.cfg.BasePath != "" {
			if rest, ok := strings.CutPrefix(path, u.cfg.BasePath); ok && strings.HasPrefix(rest, "/") {
				path = rest
			}
		}
		setPageHeaders(w.Header())
		switch {
		case path == LoginPath:
			u.serveLoginStep(w, r)
		case path == UpstreamPath && len(u.cfg.Upstreams) > 0:
			u.serveUpstreamStep(w, r)
		case path == ConsentPath:
			u.serveConsentStep(w, r)
		case path == "/logout":
			u.serveLogout(w, r)
		case path == "/consents":
			u.serveConsents(w, r)
		case strings.HasPrefix(path, ApprovalPath):
			u.serveApproval(w, r, strings.TrimPrefix(path, ApprovalPath))
		case strings.HasPrefix(path, "/upstream/") && strings.HasSuffix(path, "/callback") && len(u.cfg.Upstreams) > 0:
			u.serveCallback(w, r, strings.TrimSuffix(strings.TrimPrefix(path, "/upstream/"), "/callback"))
		case strings.HasPrefix(path, "/ui/"):
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				u.ErrorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
				return
			}
			name := strings.TrimPrefix(path, "/ui/")
			if st, err := fs.Stat(static, name); err != nil || st.IsDir() || !fs.ValidPath(name) {
				u.ErrorPage(w, http.StatusNotFound, "Not found", "There is no such page.")
				return
			}
			// Assets are versioned by the binary; let browsers cache them briefly.
			w.Header().Set("Cache-Control", "public, max-age=3600")
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + name
			assets.ServeHTTP(w, r2)
		default:
			u.ErrorPage(w, http.StatusNotFound, "Not found", "There is no such page.")
		}
	})
}

// serveLogout shows a sign-out button (GET) and clears the session (POST
// with the session's CSRF token).
func (u *UI) serveLogout(w http.ResponseWriter, r *http.Request) {
	sess := u.readSession(r)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if sess.Subject == "" {
			render(w, http.StatusOK, "message.html", &view{Title: "Signed out", Base: u.cfg.BasePath, Notice: "You are not signed in."})
			return
		}
		render(w, http.StatusOK, "logout.html", &view{
			Title: "Sign out", Base: u.cfg.BasePath, Action: selfURL(r), Step: "logout",
			CSRF: u.csrfToken(sess), Subject: u.who(r.Context(), sess.Subject),
		})
	case http.MethodPost:
		f, err := u.parseForm(w, r)
		if err != nil {
			u.ErrorPage(w, http.StatusBadRequest, "Bad request", "The form could not be read.")
			return
		}
		if f.Step != "logout" || !u.validCSRF(sess, f.CSRF) {
			u.ErrorPage(w, http.StatusForbidden, "Form expired", "This sign-out form has expired. Please open the sign-out page again.")
			return
		}
		// Ending the stored session is what makes a copy of the cookie
		// worthless; clearing the cookie only tidies this browser.
		if err := u.endSession(r.Context(), sess); err != nil {
			u.storageError(w, r, "ending session", err)
			return
		}
		u.clearSession(w)
		u.audit(r.Context(), "logout", "sub", sess.Subject)
		render(w, http.StatusOK, "message.html", &view{Title: "Signed out", Base: u.cfg.BasePath, Notice: "You are signed out."})
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		u.ErrorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
	}
}

// serveConsents lists the person's remembered consents and revokes one
// client's (POST with CSRF), and lists their open approvals of tool calls
// and revokes one. Anonymous visitors get the login form, which
// posts back here.
func (u *UI) serveConsents(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, HEAD, POST")
		u.ErrorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	sess := u.readSession(r)
	bind := pageBinding("consents")
	var f *submittedForm
	if r.Method == http.MethodPost {
		var err error
		if f, err = u.parseForm(w, r); err != nil {
			u.ErrorPage(w, http.StatusBadRequest, "Bad request", "The form could not be read.")
			return
		}
		if f.Step == stepLogin {
			u.handleLoginPost(w, r, sess, f, bind)
			return
		}
		if f.Step == stepUpstream {
			u.handleUpstreamPost(w, r, sess, f, "consents", bind)
			return
		}
	}
	if sess.Subject == "" || !u.active(r.Context(), sess.Subject) {
		u.renderLogin(w, r, sess, loginFor{page: bind}, http.StatusOK, "", "")
		return
	}
	if f != nil && f.Step == "end_session" {
		u.serveEndSession(w, r, sess, f)
		return
	}
	if f != nil && f.Step == "revoke_approval" {
		u.revokeApproval(w, r, sess, f)
		return
	}
	if f != nil {
		if f.Step != "revoke" || !u.validCSRF(sess, f.CSRF) || f.ClientID == "" {
			u.ErrorPage(w, http.StatusForbidden, "Form expired", "This form has expired. Please open the page again.")
			return
		}
		revoke := u.cfg.Consents.DeleteConsents
		if u.cfg.Revoker != nil {
			revoke = u.cfg.Revoker.RevokeConsent
		}
		if err := revoke(r.Context(), sess.Subject, f.ClientID); err != nil {
			u.storageError(w, r, "revoking consents", err)
			return
		}
		u.audit(r.Context(), "consent.revoked", "sub", sess.Subject, "client_id", f.ClientID)
		// Post/Redirect/Get so a reload does not resubmit.
		http.Redirect(w, r, selfURL(r), http.StatusSeeOther)
		return
	}
	list, err := u.cfg.Consents.ListConsents(r.Context(), sess.Subject)
	if err != nil {
		u.storageError(w, r, "listing consents", err)
		return
	}
	v := &view{
		Title: "Applications with access", Base: u.cfg.BasePath, Action: selfURL(r), Step: "revoke",
		CSRF: u.csrfToken(sess), Subject: u.who(r.Context(), sess.Subject),
	}
	now := u.now()
	for _, c := range list {
		if expired(&c, now) {
			continue
		}
		cv := consentView{ClientID: c.ClientID, Resource: c.Resource, Scopes: c.Scopes, GrantedAt: c.GrantedAt.UTC().Format(time.DateOnly)}
		if !c.ExpiresAt.IsZero() {
			cv.ExpiresAt = c.ExpiresAt.UTC().Format(time.DateOnly)
		}
		if u.cfg.ClientNames != nil {
			cv.ClientName = u.cfg.ClientNames(r.Context(), c.ClientID)
		}
		v.Consents = append(v.Consents, cv)
	}
	if v.Approvals, err = u.openApprovals(r.Context(), sess.Subject); err != nil {
		u.storageError(w, r, "listing approvals", err)
		return
	}
	sessions, err := u.cfg.Sessions.ListSessions(r.Context(), sess.Subject)
	if err != nil {
		u.storageError(w, r, "listing sessions", err)
		return
	}
	current := u.sessionKey(sess.ID)
	for _, x := range sessions {
		if !now.Before(x.ExpiresAt) || !now.Before(x.IdleExpiresAt) {
			continue
		}
		v.Sessions = append(v.Sessions, sessionView{
			ID:        x.ID,
			Current:   x.ID == current,
			Since:     x.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"),
			LastSeen:  x.LastSeenAt.UTC().Format("2006-01-02 15:04 UTC"),
			UserAgent: cleanText(x.UserAgent),
			Address:   x.Address,
		})
	}
	render(w, http.StatusOK, "consents.html", v)
}

// serveEndSession ends one of the person's stored sessions (POST with CSRF
// from /consents); ending the current one signs this browser out.
func (u *UI) serveEndSession(w http.ResponseWriter, r *http.Request, sess session, f *submittedForm) {
	if !u.validCSRF(sess, f.CSRF) || f.SessionID == "" {
		u.ErrorPage(w, http.StatusForbidden, "Form expired", "This form has expired. Please open the page again.")
		return
	}
	if err := u.cfg.Sessions.DeleteSession(r.Context(), sess.Subject, f.SessionID); err != nil {
		u.storageError(w, r, "ending session", err)
		return
	}
	u.audit(r.Context(), "session.ended", "sub", sess.Subject)
	if f.SessionID == u.sessionKey(sess.ID) {
		u.clearSession(w)
		render(w, http.StatusOK, "message.html", &view{Title: "Signed out", Base: u.cfg.BasePath, Notice: "You are signed out."})
		return
	}
	http.Redirect(w, r, selfURL(r), http.StatusSeeOther)
}
