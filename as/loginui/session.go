package loginui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// session is the browser session, kept in an encrypted and authenticated
// cookie (gorilla/securecookie). ID is random and replaced at every login.
type session struct {
	ID       string `json:"id"`
	Subject  string `json:"sub,omitempty"`
	AuthTime int64  `json:"auth_time,omitempty"`
	Exp      int64  `json:"exp"`
}

// flowToken is the single-use token in the forms of the pages Handler
// serves (the login on /consents). It binds the form to the session and to
// the page it was served for. The forms of an authorization carry its
// transaction instead (authflow).
type flowToken struct {
	ID   string `json:"jti"`
	Sess string `json:"sid"`
	Step string `json:"step"`
	Bind string `json:"bind"`
	Exp  int64  `json:"exp"`
}

const flowCookieName = "mcpauth_flow" // securecookie MAC name, never set as a cookie

func randomID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("loginui: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// readSession returns the session from the cookie, or the zero session when
// there is none or it does not verify or has expired. A signed-in session
// must also still be stored (logout and the /consents page delete it) and
// within its idle and absolute lifetimes; otherwise it is the zero session.
func (u *UI) readSession(r *http.Request) session {
	c, err := r.Cookie(u.cookie.session)
	if err != nil {
		return session{}
	}
	var s session
	if err := u.cookies.Decode(u.cookie.session, c.Value, &s); err != nil || s.ID == "" {
		return session{}
	}
	now := u.now()
	if now.Unix() >= s.Exp {
		return session{}
	}
	if s.Subject == "" {
		return s
	}
	ctx := r.Context()
	rec, err := u.cfg.Sessions.GetSession(ctx, u.sessionKey(s.ID))
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			u.log.ErrorContext(ctx, "loginui: reading session", "err", err)
		}
		return session{}
	}
	if rec.Subject != s.Subject || !now.Before(rec.ExpiresAt) || !now.Before(rec.IdleExpiresAt) {
		return session{}
	}
	// Refresh the idle deadline, at most about once a minute per session.
	if now.Sub(rec.LastSeenAt) >= time.Minute {
		if err := u.cfg.Sessions.TouchSession(ctx, rec.ID, now, now.Add(u.cfg.SessionIdleTTL)); err != nil && !errors.Is(err, storage.ErrNotFound) {
			u.log.ErrorContext(ctx, "loginui: touching session", "err", err)
		}
	}
	return s
}

// sessionKey is the stored id of a session: an HMAC of the cookie's id, so
// the database never holds what a cookie carries.
func (u *UI) sessionKey(id string) string {
	m := hmac.New(sha256.New, u.sessionKeyMAC)
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// startSession stores a new signed-in session for subject and returns its
// cookie form.
func (u *UI) startSession(r *http.Request, subject string, now time.Time) (session, error) {
	s := session{ID: randomID(), Subject: subject, AuthTime: now.Unix(), Exp: now.Add(u.cfg.SessionTTL).Unix()}
	err := u.cfg.Sessions.CreateSession(r.Context(), &storage.Session{
		ID:            u.sessionKey(s.ID),
		Subject:       subject,
		CreatedAt:     now,
		LastSeenAt:    now,
		IdleExpiresAt: now.Add(u.cfg.SessionIdleTTL),
		ExpiresAt:     now.Add(u.cfg.SessionTTL),
		UserAgent:     cleanText(truncate(r.UserAgent(), 200)),
		Address:       u.cfg.ClientIP(r),
	})
	return s, err
}

// endSession deletes the stored session behind the cookie's session s.
func (u *UI) endSession(ctx context.Context, s session) error {
	if s.Subject == "" {
		return nil
	}
	return u.cfg.Sessions.DeleteSession(ctx, s.Subject, u.sessionKey(s.ID))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// ensureSession gives an anonymous visitor a session id, so the login form's
// CSRF and flow tokens have something to bind to.
func (u *UI) ensureSession(w http.ResponseWriter, s session) session {
	if s.ID != "" {
		return s
	}
	s = session{ID: randomID(), Exp: u.now().Add(u.cfg.FlowTTL * 3).Unix()}
	u.writeSession(w, s)
	return s
}

func (u *UI) writeSession(w http.ResponseWriter, s session) {
	v, err := u.cookies.Encode(u.cookie.session, s)
	if err != nil {
		u.log.Error("loginui: encoding session cookie", "err", err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     u.cookie.session,
		Value:    v,
		Path:     u.cookie.path,
		Expires:  time.Unix(s.Exp, 0),
		HttpOnly: true,
		Secure:   u.cfg.Secure,
		SameSite: http.SameSiteLaxMode,
	})
}

func (u *UI) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name:     u.cookie.session,
		Value:    "",
		Path:     u.cookie.path,
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   u.cfg.Secure,
		SameSite: http.SameSiteLaxMode,
	})
}

// csrfToken is an HMAC of the session id: it changes when the session id
// rotates and cannot be computed without the server's key.
func (u *UI) csrfToken(s session) string {
	m := hmac.New(sha256.New, u.csrfKey)
	m.Write([]byte("csrf\x00"))
	m.Write([]byte(s.ID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (u *UI) validCSRF(s session, got string) bool {
	if s.ID == "" || got == "" {
		return false
	}
	return hmac.Equal([]byte(got), []byte(u.csrfToken(s)))
}

func (u *UI) newFlow(s session, step, bind string) string {
	f := flowToken{ID: randomID(), Sess: s.ID, Step: step, Bind: bind, Exp: u.now().Add(u.cfg.FlowTTL).Unix()}
	v, err := u.cookies.Encode(flowCookieName, f)
	if err != nil {
		u.log.Error("loginui: encoding flow token", "err", err)
		return ""
	}
	return v
}

// checkForm verifies the CSRF token and the flow token of a submitted form
// and uses the flow token up. It returns (false, nil) for a form that must be
// refused and an error only when the JTI store fails.
func (u *UI) checkForm(ctx context.Context, s session, f *submittedForm, step, bind string) (bool, error) {
	if !u.validCSRF(s, f.CSRF) || f.Flow == "" {
		return false, nil
	}
	var ft flowToken
	if err := u.cookies.Decode(flowCookieName, f.Flow, &ft); err != nil {
		return false, nil
	}
	now := u.now().Unix()
	if ft.ID == "" || ft.Sess != s.ID || ft.Step != step || ft.Bind != bind || now >= ft.Exp {
		return false, nil
	}
	err := u.cfg.JTIs.UseJTI(ctx, "loginui-flow:"+ft.ID, time.Unix(ft.Exp, 0))
	if errors.Is(err, storage.ErrAlreadyUsed) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// pageBinding is the binding for forms on the pages Handler serves.
func pageBinding(name string) string {
	h := sha256.Sum256([]byte("page\x00" + name))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// submittedForm holds the fields of a posted form.
type submittedForm struct {
	Step     string
	CSRF     string
	Flow     string
	Username string
	Password string
	Action   string
	ClientID string
	// SessionID names a stored session to end (the stored, hashed id).
	SessionID string
	// Upstream is the id of the provider chosen on the login page.
	Upstream string
	// Txn is the sealed authorization transaction the form belongs to.
	Txn string
	// ApprovalID names an approval to revoke (/consents).
	ApprovalID string
}

var errBadForm = errors.New("loginui: bad form")

// Field length limits; anything longer is refused.
const (
	maxTokenLen    = 2048
	maxUsernameLen = 256
	maxPasswordLen = 1024
	maxClientIDLen = 2048
	maxTxnLen      = 12 << 10
)

// parseFields reads a posted form. Every field may appear at most once;
// unknown fields are ignored.
func parseFields(v url.Values) (*submittedForm, error) {
	var f submittedForm
	for _, fd := range []struct {
		name string
		dst  *string
		max  int
	}{
		{stepField, &f.Step, 32},
		{"csrf", &f.CSRF, maxTokenLen},
		{"flow", &f.Flow, maxTokenLen},
		{"username", &f.Username, maxUsernameLen},
		{"password", &f.Password, maxPasswordLen},
		{"action", &f.Action, 32},
		{"client_id", &f.ClientID, maxClientIDLen},
		{"session_id", &f.SessionID, 128},
		{"upstream", &f.Upstream, 64},
		{"txn", &f.Txn, maxTxnLen},
		{"approval_id", &f.ApprovalID, 64},
	} {
		vs := v[fd.name]
		if len(vs) > 1 || (len(vs) == 1 && len(vs[0]) > fd.max) {
			return nil, errBadForm
		}
		if len(vs) == 1 {
			*fd.dst = vs[0]
		}
	}
	switch f.Step {
	case "", stepLogin, stepConsent, stepUpstream, stepApproval, "logout", "revoke", "end_session", "revoke_approval":
	default:
		return nil, errBadForm
	}
	return &f, nil
}

// parseForm reads the body of a POST (urlencoded, at most maxFormBytes). If
// the caller parsed the form already, its PostForm is used.
func (u *UI) parseForm(w http.ResponseWriter, r *http.Request) (*submittedForm, error) {
	if r.PostForm == nil {
		ct := r.Header.Get("Content-Type")
		if ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
			return nil, errBadForm
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			return nil, errBadForm
		}
	}
	return parseFields(r.PostForm)
}

// selfURL is where forms post back to: the request target as the browser
// sent it, query intact.
// It is always a path on this host: never "//host" or "/\host", which
// browsers would follow to another site.
func selfURL(r *http.Request) string {
	u := r.RequestURI
	if !localPath(u) {
		u = r.URL.RequestURI()
	}
	if !localPath(u) {
		u = "/" + strings.TrimLeft(u, "/\\")
	}
	return u
}

func localPath(u string) bool {
	return strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "//") && !strings.HasPrefix(u, "/\\")
}
