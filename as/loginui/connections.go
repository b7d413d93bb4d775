package loginui

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/upstream"
)

// ConnectionsPath is the page where a signed-in person connects, reconnects
// and disconnects their accounts at third-party services; each provider
// returns the browser to ConnectionsPath + "/{id}/callback".
const ConnectionsPath = "/connections"

// pendingConnection is what connecting an account carries from
// /connections to the provider's callback, sealed into our state parameter
// (encrypted and authenticated with the session cookie's keys): bound to
// the browser session and the person, single use (ID), expiring with the
// flow lifetime. The PKCE verifier never appears in clear anywhere else.
type pendingConnection struct {
	ID         string `json:"jti"`
	Connection string `json:"conn"`
	Sess       string `json:"sid"`
	Subject    string `json:"sub"`
	Verifier   string `json:"pkce"`
	Exp        int64  `json:"exp"`
}

const connectionStateName = "mcpauth_connection_state" // securecookie MAC name, never set as a cookie

// connectionView is one row of the /connections page.
type connectionView struct {
	ID, Name       string
	Connected      bool
	NeedsReconnect bool
	Since          string
	Scopes         []string
	Highlight      bool
}

// serveConnections is /connections: the person's connected accounts (GET),
// connect and disconnect (POST with CSRF), and the login form for an
// anonymous visitor, which posts back here.
func (u *UI) serveConnections(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, HEAD, POST")
		u.ErrorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	sess := u.readSession(r)
	bind := pageBinding("connections")
	var f *submittedForm
	if r.Method == http.MethodPost {
		var err error
		if f, err = u.parseForm(w, r); err != nil {
			u.ErrorPage(w, http.StatusBadRequest, "Bad request", "The form could not be read.")
			return
		}
		switch f.Step {
		case stepLogin:
			u.handleLoginPost(w, r, sess, f, bind)
			return
		case stepUpstream:
			u.handleUpstreamPost(w, r, sess, f, "connections", bind)
			return
		}
	}
	if sess.Subject == "" || !u.active(r.Context(), sess.Subject) {
		u.renderLogin(w, r, sess, loginFor{page: bind}, http.StatusOK, "", "")
		return
	}
	vault := u.cfg.Connections
	if f != nil {
		p := vault.Provider(f.Connection)
		if (f.Step != "connect" && f.Step != "disconnect") || !u.validCSRF(sess, f.CSRF) || p == nil {
			u.ErrorPage(w, http.StatusForbidden, "Form expired", "This form has expired. Please open the page again.")
			return
		}
		if f.Step == "connect" {
			u.startConnection(w, r, sess, p)
			return
		}
		found, err := vault.Disconnect(r.Context(), sess.Subject, p.ID())
		if err != nil {
			u.storageError(w, r, "disconnecting", err)
			return
		}
		if found {
			u.audit(r.Context(), "connection.disconnected", "sub", sess.Subject, "connection", p.ID())
		}
		http.Redirect(w, r, u.cfg.BasePath+ConnectionsPath, http.StatusSeeOther)
		return
	}
	list, err := vault.List(r.Context(), sess.Subject)
	if err != nil {
		u.storageError(w, r, "listing connections", err)
		return
	}
	v := &view{
		Title: "Connected accounts", Base: u.cfg.BasePath, Action: u.cfg.BasePath + ConnectionsPath,
		CSRF: u.csrfToken(sess), Subject: u.who(r.Context(), sess.Subject),
	}
	highlight := r.URL.Query().Get("connection")
	for _, p := range vault.Providers() {
		cv := connectionView{ID: p.ID(), Name: p.Name(), Highlight: p.ID() == highlight}
		for _, s := range list {
			if s.ConnectionID == p.ID() {
				cv.Connected, cv.NeedsReconnect, cv.Scopes = true, s.NeedsReconnect, s.Scopes
				cv.Since = s.CreatedAt.UTC().Format(time.DateOnly)
			}
		}
		v.Connections = append(v.Connections, cv)
	}
	render(w, http.StatusOK, "connections.html", v)
}

// startConnection sends the person to provider p's authorization endpoint
// (RFC 6749 §4.1.1) with our sealed state and a PKCE S256 challenge.
func (u *UI) startConnection(w http.ResponseWriter, r *http.Request, sess session, p *connections.Provider) {
	pc := pendingConnection{ID: randomID(), Connection: p.ID(), Sess: sess.ID, Subject: sess.Subject,
		Verifier: upstream.NewVerifier(), Exp: u.now().Add(u.cfg.FlowTTL).Unix()}
	state, err := u.cookies.Encode(connectionStateName, pc)
	if err != nil {
		u.log.ErrorContext(r.Context(), "loginui: encoding connection state", "err", err)
		u.ErrorPage(w, http.StatusInternalServerError, "Connection failed", "The connection could not be started. Please try again.")
		return
	}
	dest, err := p.AuthCodeURL(r.Context(), state, pc.Verifier)
	if err != nil {
		u.log.WarnContext(r.Context(), "loginui: connection provider unavailable", "connection", p.ID(), "err", err)
		u.ErrorPage(w, http.StatusBadGateway, "Service unavailable", p.Name()+" cannot be reached right now. Please try again in a moment.")
		return
	}
	u.audit(r.Context(), "connection.started", "sub", sess.Subject, "connection", p.ID())
	http.Redirect(w, r, dest, http.StatusSeeOther)
}

// serveConnectionCallback is /connections/{id}/callback: it checks our
// state (sealed by us, for this connection, this browser session and
// person, not expired, not used before), the iss parameter (RFC 9207
// §2.4), redeems the code with the PKCE verifier and stores the tokens,
// then returns to /connections. GET only (RFC 6749 §4.1.2): any other
// method, HEAD included, is 405 before the state is read, so a link
// preview cannot use it up.
func (u *UI) serveConnectionCallback(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		u.ErrorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	p := u.cfg.Connections.Provider(id)
	if p == nil {
		u.ErrorPage(w, http.StatusNotFound, "Not found", "There is no such page.")
		return
	}
	ctx := r.Context()
	again := "Please start again from the connected accounts page."
	fail := func(status int, reason, title, detail string) {
		u.audit(ctx, "connection.failed", "connection", id, "reason", reason)
		u.ErrorPage(w, status, title, detail+" "+again)
	}
	cb, err := parseCallback(r.URL.Query())
	if err != nil {
		fail(http.StatusBadRequest, "parameters", "Connection failed", "The answer from "+p.Name()+" could not be read.")
		return
	}
	var pc pendingConnection
	if err := u.cookies.Decode(connectionStateName, cb.State, &pc); err != nil || pc.ID == "" || pc.Connection != id || pc.Subject == "" {
		fail(http.StatusBadRequest, "state", "Connection failed", "This answer does not belong to a connection started here.")
		return
	}
	sess := u.readSession(r)
	if sess.ID == "" || sess.ID != pc.Sess || sess.Subject != pc.Subject {
		fail(http.StatusBadRequest, "session", "Connection failed", "This connection was started in another browser, or your session ended.")
		return
	}
	now := u.now()
	if now.Unix() >= pc.Exp {
		fail(http.StatusBadRequest, "expired", "Connection expired", "The connection took too long.")
		return
	}
	switch err := u.cfg.JTIs.UseJTI(ctx, "loginui-connection:"+pc.ID, time.Unix(pc.Exp, 0)); {
	case errors.Is(err, storage.ErrAlreadyUsed):
		fail(http.StatusBadRequest, "replay", "Connection failed", "This answer was already used.")
		return
	case err != nil:
		u.storageError(w, r, "using connection state", err)
		return
	}
	if !u.active(ctx, sess.Subject) {
		fail(http.StatusForbidden, "disabled", "Account disabled", "Your account has been disabled on this service.")
		return
	}
	// Mix-up defence (RFC 9207 §2.4): an answer naming another issuer is
	// neither redeemed nor believed, error answers included.
	if err := p.CheckResponseIssuer(ctx, cb.Iss); err != nil {
		if errors.Is(err, connections.ErrWrongIssuer) {
			fail(http.StatusBadRequest, "wrong_issuer", "Connection failed", "This answer did not come from "+p.Name()+" (its iss parameter names another issuer, or is missing).")
			return
		}
		u.log.WarnContext(ctx, "loginui: connection provider unavailable", "connection", id, "err", err)
		fail(http.StatusBadGateway, "unavailable", "Service unavailable", p.Name()+" cannot be reached right now.")
		return
	}
	if cb.Error != "" {
		u.audit(ctx, "connection.failed", "connection", id, "reason", "provider_error", "error", cb.Error)
		u.ErrorPage(w, http.StatusForbidden, "Connection not completed", p.Name()+" did not complete the connection ("+cb.Error+"). "+again)
		return
	}
	tok, err := p.Exchange(ctx, cb.Code, pc.Verifier)
	if err != nil {
		u.log.WarnContext(ctx, "loginui: connection code exchange failed", "connection", id, "err", err)
		if errors.Is(err, connections.ErrRefused) {
			fail(http.StatusBadRequest, "refused", "Connection failed", p.Name()+" did not accept this connection.")
			return
		}
		fail(http.StatusBadGateway, "unavailable", "Service unavailable", p.Name()+" cannot be reached right now.")
		return
	}
	if err := u.cfg.Connections.Save(ctx, sess.Subject, id, tok); err != nil {
		u.storageError(w, r, "storing connection", err)
		return
	}
	u.audit(ctx, "connection.connected", "sub", sess.Subject, "connection", id, "scope", strings.Join(tok.Scopes, " "))
	http.Redirect(w, r, u.cfg.BasePath+ConnectionsPath, http.StatusSeeOther)
}
