package loginui

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/storage"
)

// handleLoginPost checks a login form of the pages Handler serves (bind
// names the page). On success it answers 303 See Other to the same page
// (RFC 9700 §4.12).
func (u *UI) handleLoginPost(w http.ResponseWriter, r *http.Request, sess session, f *submittedForm, bind string) {
	ok, err := u.checkForm(r.Context(), sess, f, stepLogin, bind)
	if err != nil {
		u.storageError(w, r, "using flow token", err)
		return
	}
	again := loginFor{page: bind}
	if !ok {
		u.renderLogin(w, r, sess, again, http.StatusForbidden, "This sign-in form has expired or was already used. Please try again.", f.Username)
		return
	}
	if _, ok := u.checkLogin(w, r, sess, f, again); ok {
		http.Redirect(w, r, selfURL(r), http.StatusSeeOther)
	}
}

// checkLogin checks the username and password of a login form whose own
// tokens were checked: the throttle first, then the password, then the
// person's record. On success it ends the browser's previous session,
// starts a new one (a new id: session fixation) and returns it; otherwise
// it shows the login page of again with the reason and returns false.
func (u *UI) checkLogin(w http.ResponseWriter, r *http.Request, sess session, f *submittedForm, again loginFor) (session, bool) {
	now := u.now()
	acct := u.throttleName(f.Username)
	addr := u.cfg.ClientAddr(r)
	ip := u.cfg.ClientIP(r)
	// Three counters, reserved together before the password is checked: the
	// account from this address (the tight one), the address across
	// accounts (looser: many people may share it behind one NAT or proxy),
	// and the account across addresses (a distributed guess).
	keyAcctAddr := "login:acct+addr:" + acct + "|" + addr
	keyAddr := "login:addr:" + addr
	keyAcct := "login:acct:" + acct
	wait, err := u.throttle.reserve(r.Context(), now, []throttleKey{
		{keyAcctAddr, u.cfg.AccountFreeAttempts},
		{keyAddr, u.cfg.AddressFreeAttempts},
		{keyAcct, u.cfg.AccountTotalFreeAttempts},
	})
	if err != nil {
		u.storageError(w, r, "reserving a login attempt", err)
		return session{}, false
	}
	if wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		u.audit(r.Context(), "login.throttled", "user_digest", digest(acct), "addr", ip, "retry_after_s", secs)
		u.renderLogin(w, r, sess, again, http.StatusTooManyRequests,
			fmt.Sprintf("Too many sign-in attempts. Please wait %s and try again.", humanSeconds(secs)), f.Username)
		return session{}, false
	}
	good, err := u.checkPassword(r.Context(), f.Username, f.Password)
	if err != nil {
		u.ErrorPage(w, http.StatusServiceUnavailable, "Temporarily unavailable", "Too many sign-ins are in progress. Please try again in a moment.")
		return session{}, false
	}
	if !good {
		u.audit(r.Context(), "login.failed", "user_digest", digest(acct), "addr", ip)
		u.renderLogin(w, r, sess, again, http.StatusUnauthorized, "Incorrect username or password.", f.Username)
		return session{}, false
	}
	if u.cfg.Records != nil {
		// The stored record says whether an operator disabled the person;
		// its attempts keep counting against the throttle like wrong ones.
		rec, err := u.cfg.Records.RecordLogin(r.Context(), &storage.User{Subject: f.Username, LastSeen: now})
		if err != nil {
			u.storageError(w, r, "recording the login", err)
			return session{}, false
		}
		if !u.people.Active(f.Username, rec) {
			u.audit(r.Context(), "login.refused", "sub", f.Username, "addr", ip, "reason", "disabled")
			u.renderLogin(w, r, sess, again, http.StatusUnauthorized, "Incorrect username or password.", f.Username)
			return session{}, false
		}
	}
	if err := u.throttle.succeed(r.Context(), now, []string{keyAcctAddr, keyAcct}, []string{keyAddr}); err != nil {
		u.log.ErrorContext(r.Context(), "loginui: clearing login counters", "err", err)
	}
	// Session fixation (OWASP): a new random id at every login, stored so
	// that logging out ends it everywhere. A session this browser had
	// before (prompt=login) ends.
	if err := u.endSession(r.Context(), sess); err != nil {
		u.log.ErrorContext(r.Context(), "loginui: ending the previous session", "err", err)
	}
	ns, err := u.startSession(r, f.Username, now)
	if err != nil {
		u.storageError(w, r, "storing session", err)
		return session{}, false
	}
	u.writeSession(w, ns)
	u.audit(r.Context(), "login.succeeded", "sub", f.Username, "addr", ip)
	return ns, true
}

// throttleName is the name a username is counted under: a keyed hash of
// its lower-case form, so the counters (which may be in a shared database)
// never hold what someone typed into the username field, which is sometimes
// a password.
func (u *UI) throttleName(username string) string {
	m := hmac.New(sha256.New, u.throttleKey)
	m.Write([]byte(strings.ToLower(username)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// checkPassword compares pw with the user's hash, or with a dummy hash for an
// unknown user so both answers take about the same time; a disabled user
// is refused like a wrong password, after the same work. At most
// MaxConcurrentChecks run at once.
func (u *UI) checkPassword(ctx context.Context, username, pw string) (bool, error) {
	select {
	case u.checks <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-u.checks }()
	hash, known := u.users[username]
	if !known {
		hash = u.dummyHash
	}
	ok, err := password.Check(hash, pw)
	if err != nil {
		// Hashes were checked in New; this is unreachable in practice.
		u.log.ErrorContext(ctx, "loginui: stored password hash unreadable", "err", err)
		return false, nil
	}
	// A disabled account gets the answer of a wrong password.
	return ok && known && u.people.Active(username, nil), nil
}

func humanSeconds(s int) string {
	switch {
	case s == 1:
		return "1 second"
	case s < 120:
		return fmt.Sprintf("%d seconds", s)
	default:
		return fmt.Sprintf("%d minutes", (s+59)/60)
	}
}
