package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/storage"
)

// Cookie names. The session cookie is scoped to Prefix.
const (
	sessionCookie = "mcpauth_console"
	signInCookie  = "mcpauth_console_signin"
)

// signInTTL bounds how long a sign-in may take at the server.
const signInTTL = 10 * time.Minute

// session is what the session cookie holds (encrypted and authenticated).
type session struct {
	Subject  string `json:"sub"`
	SignedIn int64  `json:"iat"`
	// ASSession is the stored id of the person's sign-in session at the
	// server (storage.Session.ID, a keyed hash: no cookie can be made of it).
	ASSession string `json:"sid"`
	Access    string `json:"at"`
	Refresh   string `json:"rt,omitempty"`
	Expiry    int64  `json:"exp"`
	// CSRF is the token every form of this session carries.
	CSRF string `json:"csrf"`
}

// signInState is what the sign-in cookie holds between /signin and the
// callback.
type signInState struct {
	State    string `json:"state"`
	Verifier string `json:"verifier"`
	Expires  int64  `json:"exp"`
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// cookieName returns a cookie's name and path: over https with the __Host-
// prefix (RFC 6265bis §4.1.3.2: Secure, no Domain, path /), else scoped
// to the console's pages.
func (c *Console) cookieName(name string) (string, string) {
	if c.secure {
		return "__Host-" + name, "/"
	}
	return name, Prefix
}

func (c *Console) setCookie(w http.ResponseWriter, name string, v any, maxAge time.Duration) error {
	enc, err := c.cookie.Encode(name, v)
	if err != nil {
		return err
	}
	full, path := c.cookieName(name)
	http.SetCookie(w, &http.Cookie{Name: full, Value: enc, Path: path, MaxAge: int(maxAge / time.Second),
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode})
	return nil
}

func (c *Console) clearCookie(w http.ResponseWriter, name string) {
	full, path := c.cookieName(name)
	http.SetCookie(w, &http.Cookie{Name: full, Value: "", Path: path, MaxAge: -1, HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode})
}

func (c *Console) readCookie(r *http.Request, name string, v any) bool {
	full, _ := c.cookieName(name)
	ck, err := r.Cookie(full)
	if err != nil {
		return false
	}
	return c.cookie.Decode(name, ck.Value, v) == nil
}

// signIn starts the authorization code flow with PKCE (RFC 7636 S256) for
// the admin resource (RFC 8707) with scope admin.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	st := signInState{State: randomToken(), Verifier: oauth2.GenerateVerifier(), Expires: c.now().Add(signInTTL).Unix()}
	if err := c.setCookie(w, signInCookie, st, signInTTL); err != nil {
		c.fail(w, err)
		return
	}
	u := c.oauth.AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oauth2.SetAuthURLParam("resource", c.cfg.Resource))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// callback finishes the sign-in: state and iss (RFC 9207) checked, the
// code redeemed with the verifier, the access token introspected for its
// person, the person checked against the reservation, and the session
// cookie set.
func (c *Console) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var st signInState
	ok := c.readCookie(r, signInCookie, &st)
	c.clearCookie(w, signInCookie)
	if !ok || st.Expires < c.now().Unix() || subtle.ConstantTimeCompare([]byte(st.State), []byte(q.Get("state"))) != 1 {
		c.render(w, http.StatusBadRequest, "signin.html", &view{Title: "Sign-in did not complete", Detail: "This sign-in expired or was started in another browser. Sign in again."})
		return
	}
	if iss := q.Get("iss"); iss != "" && iss != c.cfg.Issuer {
		c.render(w, http.StatusBadRequest, "signin.html", &view{Title: "Sign-in did not complete", Detail: "The answer came from another server than this console's. Sign in again."})
		return
	}
	if e := q.Get("error"); e != "" {
		detail := "The server did not sign you in to the console."
		if e == "access_denied" {
			detail = "You are not permitted to use the console, or you declined. Ask an administrator to add you to admin.people or admin.groups."
		}
		c.render(w, http.StatusForbidden, "signin.html", &view{Title: "Not signed in", Detail: detail})
		return
	}
	ctx := c.tokenContext(r.Context())
	tok, err := c.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier), oauth2.SetAuthURLParam("resource", c.cfg.Resource))
	if err != nil {
		c.log.Warn("console: code redemption failed", "err", redactOAuthErr(err))
		c.render(w, http.StatusBadRequest, "signin.html", &view{Title: "Sign-in did not complete", Detail: "The server refused to finish this sign-in. Sign in again."})
		return
	}
	in, err := c.introspect(ctx, tok.AccessToken)
	if err != nil {
		c.fail(w, err)
		return
	}
	if !in.Active || in.Sub == "" || !slices.Contains(strings.Fields(in.Scope), "admin") {
		c.render(w, http.StatusForbidden, "signin.html", &view{Title: "Not signed in", Detail: "The server did not grant the console the admin scope for you."})
		return
	}
	if allowed, err := c.cfg.Allowed(r.Context(), in.Sub); err != nil {
		c.fail(w, err)
		return
	} else if !allowed {
		c.render(w, http.StatusForbidden, "signin.html", &view{Title: "Not signed in", Detail: "You are not permitted to use the console."})
		return
	}
	sid, err := c.latestSession(r.Context(), in.Sub)
	if err != nil {
		c.fail(w, err)
		return
	}
	if sid == "" {
		c.render(w, http.StatusForbidden, "signin.html", &view{Title: "Not signed in", Detail: "Your sign-in session at the server has already ended. Sign in again."})
		return
	}
	s := &session{Subject: in.Sub, SignedIn: c.now().Unix(), ASSession: sid, Access: tok.AccessToken, Refresh: tok.RefreshToken,
		Expiry: tok.Expiry.Unix(), CSRF: randomToken()}
	if err := c.setCookie(w, sessionCookie, s, c.cfg.SessionTTL); err != nil {
		c.fail(w, err)
		return
	}
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// latestSession is the stored id of subject's live sign-in session that
// was used last: the one the sign-in just went through.
func (c *Console) latestSession(ctx context.Context, subject string) (string, error) {
	ss, err := c.cfg.Sessions.ListSessions(ctx, subject)
	if err != nil {
		return "", err
	}
	now := c.now()
	var best *storage.Session
	for i := range ss {
		s := &ss[i]
		if !live(s, now) {
			continue
		}
		if best == nil || s.LastSeenAt.After(best.LastSeenAt) || s.LastSeenAt.Equal(best.LastSeenAt) && s.CreatedAt.After(best.CreatedAt) {
			best = s
		}
	}
	if best == nil {
		return "", nil
	}
	return best.ID, nil
}

func live(s *storage.Session, now time.Time) bool {
	return now.Before(s.ExpiresAt) && (s.IdleExpiresAt.IsZero() || now.Before(s.IdleExpiresAt))
}

func (c *Console) tokenContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.cfg.HTTPClient)
}

// introspection is the part of an RFC 7662 §2.2 answer the console reads.
type introspection struct {
	Active bool   `json:"active"`
	Sub    string `json:"sub"`
	Scope  string `json:"scope"`
}

// introspect asks the server about token (RFC 7662 §2.1), authenticated
// as the console's client.
func (c *Console) introspect(ctx context.Context, token string) (*introspection, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.cfg.Issuer, "/")+"/introspect", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.cfg.ClientID), url.QueryEscape(c.cfg.ClientSecret))
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("console: introspection answered %d", resp.StatusCode)
	}
	var in introspection
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		return nil, fmt.Errorf("console: introspection: %w", err)
	}
	return &in, nil
}

// errEnded: the console session ended (the reason is logged).
var errEnded = errors.New("console: session ended")

// current reads and checks the session of r; a refreshed session is
// written back to w. errEnded when there is none or it ended.
func (c *Console) current(w http.ResponseWriter, r *http.Request) (*session, error) {
	var s session
	if !c.readCookie(r, sessionCookie, &s) || s.Subject == "" {
		return nil, errEnded
	}
	ctx := r.Context()
	now := c.now()
	end := func(why string) (*session, error) {
		c.log.Info("console session ended", "sub", s.Subject, "reason", why)
		c.clearCookie(w, sessionCookie)
		return nil, errEnded
	}
	if now.Sub(time.Unix(s.SignedIn, 0)) >= c.cfg.SessionTTL {
		return end("admin.console_session_ttl")
	}
	signIn, err := c.cfg.Sessions.GetSession(ctx, s.ASSession)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return end("sign-in session ended")
	case err != nil:
		return nil, err
	case signIn.Subject != s.Subject || !live(signIn, now):
		return end("sign-in session ended")
	}
	if now.Add(30 * time.Second).After(time.Unix(s.Expiry, 0)) {
		if s.Refresh == "" {
			return end("access token expired")
		}
		ts := c.oauth.TokenSource(c.tokenContext(ctx), &oauth2.Token{RefreshToken: s.Refresh, Expiry: now.Add(-time.Minute)})
		tok, err := ts.Token()
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) {
				return end("refresh refused: " + re.ErrorCode)
			}
			return nil, err
		}
		s.Access, s.Expiry = tok.AccessToken, tok.Expiry.Unix()
		if tok.RefreshToken != "" {
			s.Refresh = tok.RefreshToken
		}
		if err := c.setCookie(w, sessionCookie, &s, c.cfg.SessionTTL-now.Sub(time.Unix(s.SignedIn, 0))); err != nil {
			return nil, err
		}
	} else {
		in, err := c.introspect(ctx, s.Access)
		if err != nil {
			return nil, err
		}
		if !in.Active {
			return end("access token no longer active")
		}
	}
	allowed, err := c.cfg.Allowed(ctx, s.Subject)
	if err != nil {
		return nil, err
	}
	if !allowed {
		return end("no longer in admin.people or admin.groups")
	}
	return &s, nil
}

// page runs h for a signed-in person, with the person in the context of
// the operations it calls; POSTs must carry the session's CSRF token.
// Without a session a GET is sent to sign in, a POST refused.
func (c *Console) page(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.current(w, r)
		if errors.Is(err, errEnded) {
			if r.Method == http.MethodGet {
				c.render(w, http.StatusUnauthorized, "signin.html", &view{Title: "Sign in to the console", Detail: "Sign in with your account to manage this server."})
				return
			}
			c.render(w, http.StatusForbidden, "message.html", &view{Title: "Not signed in", Detail: "Your console session has ended. Sign in again and repeat the action."})
			return
		}
		if err != nil {
			c.fail(w, err)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 256<<10)
			if err := r.ParseForm(); err != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.CSRF)) != 1 {
				c.render(w, http.StatusForbidden, "message.html", &view{Title: "Request refused", Detail: "The form was not sent from this console session (CSRF check failed). Go back, reload the page and try again."})
				return
			}
		}
		if !plainText(r.URL.Query()) || !plainText(r.PostForm) {
			c.render(w, http.StatusBadRequest, "message.html", &view{Title: "Bad request", Nav: "overview", Who: s.Subject, CSRF: s.CSRF,
				Detail: fmt.Sprintf("Every field must be UTF-8 text without control characters, of at most %d bytes.", maxField)})
			return
		}
		r = r.WithContext(ops.WithAdminSubject(r.Context(), s.Subject))
		h(w, r, s)
	}
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, s *session) {
	c.clearCookie(w, sessionCookie)
	c.render(w, http.StatusOK, "signin.html", &view{Title: "Signed out", Detail: "You signed out of the console. Your sign-in at the server itself stays until you log out there."})
}

// redactOAuthErr keeps an OAuth error's code and drops the rest (the body
// may echo what was sent).
func redactOAuthErr(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return "oauth error " + re.ErrorCode
	}
	return err.Error()
}

// maxField bounds the length of a field of a page's query or form.
const maxField = 1024

// plainText reports whether every value of vs is UTF-8 text without NUL
// or other C0 control characters, of at most maxField bytes: what a
// subject, client id, key id or search names.
func plainText(vs url.Values) bool {
	ok := func(v string) bool {
		return len(v) <= maxField && utf8.ValidString(v) && strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0
	}
	for k, list := range vs {
		if !ok(k) {
			return false
		}
		for _, v := range list {
			if !ok(v) {
				return false
			}
		}
	}
	return true
}
