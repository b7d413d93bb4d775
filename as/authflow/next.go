package authflow

import (
	"errors"
	"slices"
	"time"

	"github.com/mcpauth/mcpauth/as/policy"
)

// Session is the browser session as the pages read it.
type Session struct {
	// ID is the session's id; an anonymous visitor has one too.
	ID string
	// Subject is who is signed in, "" for nobody.
	Subject string
	// AuthTime is when Subject signed in.
	AuthTime time.Time
}

// Cap is the person's scope cap: with Capped, the only scopes they may be
// granted (their provider's claim mapping); without, none is capped.
type Cap struct {
	Scopes []string
	Capped bool
}

// Input is everything Next decides on.
type Input struct {
	Txn     *Transaction
	Session Session
	// Active: Session.Subject may sign in and use what they grant.
	Active bool
	// Cap is Session.Subject's scope cap.
	Cap Cap
	// Remembered are the scopes of Session.Subject's remembered consent
	// for this client, resource and set of redirect URIs; nil when none.
	Remembered []string
	// OnlyProvider: signing in means one provider, there is no password
	// form to choose it from.
	OnlyProvider bool
	Now          time.Time
}

// Step is what comes next for a transaction.
type Step int

// The steps, in the order a transaction usually meets them.
const (
	// SignIn shows the login page (password, providers' buttons).
	SignIn Step = iota + 1
	// SignInAt sends the person straight to the only provider.
	SignInAt
	// NotPermitted: the person's cap refuses a scope the client named, or
	// leaves none of its defaults; our page says so, and the way back is
	// access_denied.
	NotPermitted
	// Consent asks the person about Scopes.
	Consent
	// Confirm asks for one click where a remembered consent covers the
	// request but may not be used silently (Request.ConfirmRemembered).
	Confirm
	// Issue redirects with a code for Scopes (RFC 6749 §4.1.2).
	Issue
	// Deny redirects with access_denied (RFC 6749 §4.1.2.1).
	Deny
)

var stepNames = [...]string{"", "sign_in", "sign_in_at_provider", "not_permitted", "consent", "confirm", "issue", "deny"}

func (s Step) String() string {
	if s > 0 && int(s) < len(stepNames) {
		return stepNames[s]
	}
	return "unknown"
}

// Decision is Next's answer.
type Decision struct {
	Step Step
	// Scopes: asked about (Consent, Confirm) or granted (Issue).
	Scopes []string
	// Approved (Consent): the remembered consent covers these already;
	// the page lists them apart.
	Approved []string
	// NotPermitted: the scopes beyond the person's cap.
	NotPermitted []string
	// MaxAge (SignIn, SignInAt): how old, in seconds, the sign-in may be
	// at a provider (0: a new one, prompt=login); -1 for any.
	MaxAge int64
}

// Next decides what comes next for a transaction. It is the only place
// that does:
//
//  1. Nobody active is signed in, or the request needs a sign-in newer
//     than the session's (prompt=login, max_age) and none happened in this
//     transaction: SignIn, or SignInAt the only provider.
//  2. The person's cap refuses the request: NotPermitted.
//  3. The person answered this transaction's page: Deny, or Issue what
//     was asked and the cap still allows.
//  4. prompt=consent: Consent, whatever is remembered.
//  5. A remembered consent covers every scope: Confirm where it may not be
//     used silently, else Issue.
//  6. Otherwise Consent, about the scopes not yet remembered.
func Next(in Input) Decision {
	t, req := in.Txn, &in.Txn.Request
	sub := in.Session.Subject
	if sub == "" || !in.Active || needsNewSignIn(in) {
		if in.OnlyProvider {
			return Decision{Step: SignInAt, MaxAge: req.SignInMaxAge()}
		}
		return Decision{Step: SignIn, MaxAge: req.SignInMaxAge()}
	}
	scopes := req.Scopes
	if in.Cap.Capped {
		kept, err := policy.Consent(scopes, req.ScopesNamed, in.Cap.Scopes)
		if np := (*policy.NotPermittedError)(nil); errors.As(err, &np) {
			return Decision{Step: NotPermitted, NotPermitted: np.Scopes}
		}
		scopes = kept
	}
	if t.AskedOf == sub {
		switch t.Answer {
		case Denied:
			return Decision{Step: Deny}
		case Approved:
			return Decision{Step: Issue, Scopes: policy.Intersect(scopes, t.Asked)}
		}
	}
	if req.ForceConsent {
		return Decision{Step: Consent, Scopes: scopes}
	}
	if covers(in.Remembered, scopes) {
		if req.ConfirmRemembered {
			return Decision{Step: Confirm, Scopes: scopes}
		}
		return Decision{Step: Issue, Scopes: scopes}
	}
	return Decision{Step: Consent, Scopes: scopes, Approved: in.Remembered}
}

// SignInMaxAge is how old, in seconds, a sign-in at a provider may be for
// this request: 0 for prompt=login, else max_age, -1 for any.
func (r *Request) SignInMaxAge() int64 {
	if r.ForceLogin {
		return 0
	}
	return r.MaxAge
}

// needsNewSignIn: the request asks for a sign-in newer than the session's
// (prompt=login: any before this transaction; max_age: older than that),
// and the person did not sign in during this transaction.
func needsNewSignIn(in Input) bool {
	req := &in.Txn.Request
	if in.Txn.SignedIn != "" && in.Txn.SignedIn == in.Session.Subject {
		return false
	}
	if req.ForceLogin {
		return true
	}
	return req.MaxAge >= 0 && in.Now.Sub(in.Session.AuthTime) > time.Duration(req.MaxAge)*time.Second
}

// covers reports whether approved is not nil and holds every scope of
// requested.
func covers(approved, requested []string) bool {
	if approved == nil {
		return false
	}
	for _, s := range requested {
		if !slices.Contains(approved, s) {
			return false
		}
	}
	return true
}
