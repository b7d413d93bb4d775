package authflow

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// Request is an authorization request as the authorization endpoint
// validated it (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2, RFC 9449
// §10): the client and where its answer goes, what it asks for, and how
// the person is to be asked. Every field was checked before it was
// recorded; the strings stay untrusted for display.
type Request struct {
	ClientID string `json:"cid"`
	// RedirectURI is where the answer goes: the redirect_uri parameter, or
	// the client's only registered URI when it sent none.
	RedirectURI string `json:"ru"`
	// RedirectURISent tells whether redirect_uri was a parameter: the
	// token request must then repeat it (RFC 6749 §4.1.3).
	RedirectURISent bool `json:"rus,omitempty"`
	// State is the client's state, returned as sent (absent when none).
	State string `json:"st,omitempty"`
	// CodeChallenge is the S256 PKCE challenge (RFC 7636 §4.2).
	CodeChallenge string `json:"cc"`
	// Resource is the canonical URI of the one resource the grant is for
	// (RFC 8707); ResourceParams are the resource parameters as sent.
	Resource       string   `json:"res"`
	ResourceParams []string `json:"resp,omitempty"`
	// Scopes are those requested, already narrowed to what the client may
	// have on the resource, or its defaults (ScopesNamed false).
	Scopes      []string `json:"sc,omitempty"`
	ScopesNamed bool     `json:"scn,omitempty"`
	// DPoPJKT binds the code to a DPoP key (RFC 9449 §10).
	DPoPJKT string `json:"jkt,omitempty"`
	// ForceLogin is prompt=login, ForceConsent prompt=consent (OpenID
	// Connect Core §3.1.2.1).
	ForceLogin   bool `json:"pl,omitempty"`
	ForceConsent bool `json:"pc,omitempty"`
	// MaxAge is max_age in seconds (OpenID Connect Core §3.1.2.1): a
	// sign-in older than this is asked for again. -1 when absent.
	MaxAge int64 `json:"ma"`
	// ConfirmRemembered makes a remembered consent still take one click:
	// the AS sets it for a public client returning to loopback or a
	// private-use scheme, which any local program can present (RFC 8252
	// §8.6).
	ConfirmRemembered bool `json:"cr,omitempty"`
	// ClientRedirectURIs are all the redirect URIs the client has
	// registered: a consent is remembered for this set, since the page
	// told the person where codes would go.
	ClientRedirectURIs []string `json:"cru,omitempty"`
	// ErrorsToClient is true for a client the operator configured: an
	// error is redirected to it even before the person answered a page.
	// Others see an error on our page first (RFC 9700 §4.11.2).
	ErrorsToClient bool `json:"etc,omitempty"`
	// RequestedAt is when the request was validated (Unix seconds).
	RequestedAt int64 `json:"at"`
}

// Display is what the pages show of the request, worked out once by the
// authorization endpoint. All of it is untrusted text and escaped.
type Display struct {
	ClientName   string `json:"cn,omitempty"`
	RedirectHost string `json:"rh,omitempty"`
	// CIMDHost is the host of a Client ID Metadata Document client's id.
	CIMDHost string `json:"ch,omitempty"`
	// LoopbackOnly: every registered redirect URI is loopback.
	LoopbackOnly bool   `json:"lo,omitempty"`
	ResourceName string `json:"rn,omitempty"`
}

// Answer is the person's answer on the consent or continue page.
type Answer string

// The answers a consent page records.
const (
	Approved Answer = "approve"
	Denied   Answer = "deny"
)

// Transaction is one authorization request from validation to its answer.
type Transaction struct {
	// ID names the transaction.
	ID string `json:"id"`
	// Step names one sealed copy: each is usable once (Codec.Open).
	Step string `json:"n"`
	// Session is the id of the browser session it belongs to.
	Session string `json:"sid"`
	// Expires is when this sealed copy stops being accepted (Unix seconds).
	Expires int64 `json:"exp"`

	Request Request `json:"req"`
	Display Display `json:"d"`

	// SignedIn is the subject who signed in during this transaction: it
	// satisfies prompt=login and max_age for this transaction only.
	SignedIn string `json:"si,omitempty"`
	// Asked are the scopes the consent or continue page put to AskedOf.
	Asked   []string `json:"ask,omitempty"`
	AskedOf string   `json:"ako,omitempty"`
	// Answer is what AskedOf answered; empty until then.
	Answer Answer `json:"ans,omitempty"`
}

// RecordSignIn records that subject signed in during this transaction, in
// the (rotated) browser session sessionID.
func (t *Transaction) RecordSignIn(subject, sessionID string) {
	t.SignedIn = subject
	t.Session = sessionID
	// Whatever was asked was asked of whoever was signed in before.
	t.Asked, t.AskedOf, t.Answer = nil, "", ""
}

// RecordAsked records the scopes a consent or continue page is about to
// put to subject.
func (t *Transaction) RecordAsked(subject string, scopes []string) {
	t.Asked, t.AskedOf, t.Answer = slices.Clone(scopes), subject, ""
}

// RecordAnswer records the person's answer to what was asked.
func (t *Transaction) RecordAnswer(a Answer) { t.Answer = a }

// Interacted reports whether the person answered a page of this
// transaction: from then on errors go back to the client by redirect.
func (t *Transaction) Interacted() bool { return t.Answer != "" }

// FositeForm is the request form the OAuth engine records with the code:
// the parameters it checks again at the token endpoint (redirect_uri,
// resource) and those it reads to issue the code.
func (r *Request) FositeForm() url.Values {
	f := url.Values{
		"response_type":         {"code"},
		"client_id":             {r.ClientID},
		"scope":                 {strings.Join(r.Scopes, " ")},
		"code_challenge":        {r.CodeChallenge},
		"code_challenge_method": {"S256"},
	}
	if r.RedirectURISent {
		f.Set("redirect_uri", r.RedirectURI)
	}
	if len(r.ResourceParams) > 0 {
		f["resource"] = slices.Clone(r.ResourceParams)
	}
	if r.State != "" {
		f.Set("state", r.State)
	}
	return f
}

// RedirectSet is the sorted, de-duplicated form of a client's redirect
// URIs that a consent is remembered with; nil for none.
func RedirectSet(uris []string) []string {
	if len(uris) == 0 {
		return nil
	}
	out := slices.Clone(uris)
	slices.Sort(out)
	return slices.Compact(out)
}

// Remembered returns the scopes of consent c when it still stands at now
// for a client whose redirect URIs are clientRedirectURIs: not expired,
// and given for the same set (the page told the person where codes would
// go). Otherwise, and for a nil c, it returns nil.
func Remembered(c *storage.Consent, now time.Time, clientRedirectURIs []string) []string {
	if c == nil || (!c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt)) {
		return nil
	}
	if !slices.Equal(c.RedirectURIs, RedirectSet(clientRedirectURIs)) {
		return nil
	}
	return c.Scopes
}
