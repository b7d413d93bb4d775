package policy

import (
	"errors"
	"slices"
)

// One rule decides the scopes of every grant (authorization, client
// credentials, refresh, token exchange, jwt-bearer):
//
//   - the ceiling is what the client may have on the resource: for a
//     pre-registered client its configured Scopes, for a registered or CIMD
//     client the registration policy, always within the resource's own
//     scopes;
//   - requested scopes are narrowed to the ceiling and unknown ones dropped
//     (RFC 6749 §3.3 lets the server grant fewer): clients send openid,
//     profile, scopes of other servers;
//   - a request that names no scope gets the defaults: the scope a
//     registered client registered with (RFC 7591 §2 leaves its meaning to
//     the server), else the resource's DefaultScopes;
//   - when nothing requested can be granted the answer is invalid_scope
//     (RFC 6749 §4.1.2.1, §5.2): ErrNoScope or ErrNoDefaultScope here; a
//     resource that has no scopes grants none and refuses nothing;
//   - offline_access (OpenID Connect Core §11) is accepted and granted when
//     asked for, and never the cause of invalid_scope: refresh tokens are
//     issued whatever the scope. A request whose only grantable scope is
//     offline_access is treated as naming no scope of the resource;
//   - the person's cap (Cap) bounds all of it for a person whose upstream
//     provider maps claims to scopes.

// OfflineAccess asks for a refresh token (OpenID Connect Core §11).
const OfflineAccess = "offline_access"

var (
	// ErrNoScope: none of the requested scopes can be granted (RFC 6749
	// §5.2 invalid_scope).
	ErrNoScope = errors.New("policy: none of the requested scopes can be granted")
	// ErrNoDefaultScope: the request names no scope and the client has no
	// default scope it may be granted on the resource (invalid_scope).
	ErrNoDefaultScope = errors.New("policy: no scope requested and no default scope may be granted")
	// ErrNoneLeft: the person's cap leaves none of a grant's scopes of its
	// resource (RFC 6749 §5.2 invalid_grant: the person signs in again).
	ErrNoneLeft = errors.New("policy: the person's cap leaves none of the grant's scopes")
	// ErrNotAllLeft: the person's cap leaves some of a grant's scopes out
	// where the caller cannot narrow the grant (invalid_grant).
	ErrNotAllLeft = errors.New("policy: the person's cap leaves some of the grant's scopes out")
)

// NotPermittedError is the person's cap refusing a grant (RFC 6749 §5.2,
// RFC 8693 §2.2.2 invalid_scope; access_denied at consent).
type NotPermittedError struct {
	// Scopes are the scopes beyond the cap: those the request named (Named)
	// or, naming none, the defaults it would have got.
	Scopes []string
	// Named tells whether the request named the refused scopes.
	Named bool
}

func (e *NotPermittedError) Error() string {
	return "policy: the person's claims do not permit the scopes " + join(e.Scopes)
}

// Client is what the rule needs of a client.
type Client struct {
	// Scopes are what it may be granted at most: its configured scopes, or
	// the registration policy for a registered or CIMD client. May list
	// offline_access.
	Scopes []string
	// DefaultScopes are what it registered with: its scopes for a request
	// naming none (nil: the resource's).
	DefaultScopes []string
	// Refresh: it may use the refresh_token grant (then offline_access is
	// in its ceiling).
	Refresh bool
}

// Resource is what the rule needs of a protected resource.
type Resource struct {
	Scopes        []string
	DefaultScopes []string
}

// Select applies the rule to requested (empty entries ignored): ceiling
// lists what may be granted, in the order the answer uses, and may include
// offline_access; defaults (a subset of ceiling without offline_access) is
// what a request naming no scope gets. The error is ErrNoScope or
// ErrNoDefaultScope.
func Select(requested, ceiling, defaults []string) ([]string, error) {
	named, offline := NamesScope(requested), slices.Contains(requested, OfflineAccess)
	var out []string
	if named {
		for _, sc := range ceiling {
			if sc != OfflineAccess && slices.Contains(requested, sc) {
				out = append(out, sc)
			}
		}
		if len(out) == 0 && !offline {
			return nil, ErrNoScope
		}
	}
	if len(out) == 0 {
		out = append(out, defaults...)
	}
	if offline && slices.Contains(ceiling, OfflineAccess) {
		out = append(out, OfflineAccess)
	}
	if len(out) == 0 {
		if !named {
			return nil, ErrNoDefaultScope
		}
		return nil, ErrNoScope
	}
	return out, nil
}

// Grant decides the scopes of a new grant of c on r: an authorization
// request (RFC 6749 §4.1.1, the consent page then applies the person's cap)
// and client credentials (§4.4).
func Grant(c Client, r Resource, requested []string) ([]string, error) {
	if len(r.Scopes) == 0 {
		// A resource without scopes grants none: whatever is named is
		// dropped, and there is nothing to refuse.
		if slices.Contains(requested, OfflineAccess) && slices.Contains(c.Scopes, OfflineAccess) {
			return []string{OfflineAccess}, nil
		}
		return nil, nil
	}
	if len(requested) == 0 {
		// The common case of client credentials: the defaults, without
		// building the ceiling.
		if d := Defaults(c, r); len(d) > 0 {
			return d, nil
		}
		return nil, ErrNoDefaultScope
	}
	return Select(requested, Ceiling(c, r), Defaults(c, r))
}

// Ceiling is what c may be granted on r: the resource's scopes the client
// may have, in the resource's order, then offline_access for a client that
// may refresh.
func Ceiling(c Client, r Resource) []string {
	out := make([]string, 0, len(r.Scopes)+1)
	for _, sc := range r.Scopes {
		if slices.Contains(c.Scopes, sc) {
			out = append(out, sc)
		}
	}
	if c.Refresh {
		out = append(out, OfflineAccess)
	}
	return out
}

// Defaults is what a request of c for r that names no scope gets: the
// scopes c registered with, when any of them can be granted on r, else the
// resource's DefaultScopes; always within the ceiling.
func Defaults(c Client, r Resource) []string {
	pick := func(from []string) []string {
		var out []string
		for _, sc := range r.Scopes {
			if slices.Contains(from, sc) && slices.Contains(c.Scopes, sc) {
				out = append(out, sc)
			}
		}
		return out
	}
	if len(c.DefaultScopes) > 0 {
		if out := pick(c.DefaultScopes); len(out) > 0 {
			return out
		}
	}
	return pick(r.DefaultScopes)
}

// Refresh decides the scopes of a refresh (RFC 6749 §6): within the scope
// the person originally granted (and what the client may still have on r,
// nil when the grant has no single resource), which is also what a refresh
// naming no scope gets. A refresh may narrow, never widen. The person's cap
// is applied after it (CapRefresh).
func Refresh(c Client, r *Resource, original, requested []string) ([]string, error) {
	ceiling := make([]string, 0, len(original))
	for _, sc := range original {
		if sc == OfflineAccess || r != nil && slices.Contains(r.Scopes, sc) && slices.Contains(c.Scopes, sc) {
			ceiling = append(ceiling, sc)
		}
	}
	if !NamesScope(requested) || r == nil || len(r.Scopes) == 0 {
		return ceiling, nil
	}
	return Select(requested, ceiling, WithoutOffline(ceiling))
}

// Exchange decides the scopes of a token exchange (RFC 8693 §2.1) by c for
// r under an exchange rule granting at most rule: the one rule with rule as
// a further bound on the ceiling and the defaults, then the person's cap
// when capped (allowed: their mapped scopes). The error is a
// *NotPermittedError from the cap, else ErrNoScope or ErrNoDefaultScope.
func Exchange(c Client, r Resource, rule, requested, allowed []string, capped bool) ([]string, error) {
	ceiling, defaults := Intersect(Ceiling(c, r), rule), Intersect(Defaults(c, r), rule)
	if len(defaults) == 0 {
		defaults = ceiling
	}
	if capped {
		var err error
		if ceiling, defaults, err = Cap(requested, ceiling, defaults, allowed); err != nil {
			return nil, err
		}
	}
	return Select(requested, ceiling, defaults)
}

// IDJAG decides the scopes of a jwt-bearer grant of an ID-JAG (RFC 7523
// §2.1, draft-ietf-oauth-identity-assertion-authz-grant) by c for r: the one
// rule, bounded by the ID-JAG's scope claim when it has one (hasClaim), with
// no offline_access (the grant issues no refresh token).
func IDJAG(c Client, r Resource, claim []string, hasClaim bool, requested []string) ([]string, error) {
	ceiling, defaults := WithoutOffline(Ceiling(c, r)), Defaults(c, r)
	if hasClaim {
		ceiling = Intersect(ceiling, claim)
		defaults = Intersect(defaults, claim)
	}
	if len(defaults) == 0 {
		defaults = ceiling
	}
	return Select(WithoutOffline(requested), ceiling, defaults)
}

// Workload decides the scopes of a jwt-bearer grant of a workload token
// under a workload rule granting at most rule on r: everything the rule
// and the resource share, or fewer when named; no offline_access.
func Workload(r Resource, rule, requested []string) ([]string, error) {
	ceiling := Intersect(r.Scopes, rule)
	return Select(WithoutOffline(requested), ceiling, ceiling)
}

// Registration decides the scope a client registers with (RFC 7591 §2):
// the requested scopes the registration policy allows, in the request's
// order, without repeats; when none is left, every scope of the policy and
// defaulted true (the client then has no default scope of its own).
func Registration(requested, allowed []string) (scopes []string, defaulted bool) {
	for _, s := range requested {
		if slices.Contains(allowed, s) && !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	if len(scopes) == 0 {
		return slices.Clone(allowed), true
	}
	return scopes, false
}

// Cap is the person's cap, the one place it is applied: it bounds ceiling
// and defaults (as Select takes them) by allowed, the scopes the person's
// claims map to; offline_access is never capped, it is no resource's scope.
//
// A request that names a scope the ceiling holds and allowed does not is
// refused, with a *NotPermittedError naming those scopes: a narrowed
// answer would send the client back for the same scope in a loop (and
// cannot be told from a step-up). Defaults beyond allowed are left out;
// when none is left for a request naming no scope, that is a
// *NotPermittedError naming the defaults beyond the cap.
func Cap(requested, ceiling, defaults, allowed []string) (cappedCeiling, cappedDefaults []string, err error) {
	var beyond []string
	for _, sc := range requested {
		if sc != OfflineAccess && slices.Contains(ceiling, sc) && !slices.Contains(allowed, sc) && !slices.Contains(beyond, sc) {
			beyond = append(beyond, sc)
		}
	}
	if len(beyond) > 0 {
		return nil, nil, &NotPermittedError{Scopes: beyond, Named: true}
	}
	keep := func(sc string) bool { return sc == OfflineAccess || slices.Contains(allowed, sc) }
	cappedCeiling = slices.DeleteFunc(slices.Clone(ceiling), func(sc string) bool { return !keep(sc) })
	cappedDefaults = slices.DeleteFunc(slices.Clone(defaults), func(sc string) bool { return !keep(sc) })
	if !NamesScope(requested) && len(WithoutOffline(defaults)) > 0 && len(WithoutOffline(cappedDefaults)) == 0 {
		return nil, nil, &NotPermittedError{Scopes: Beyond(defaults, allowed)}
	}
	return cappedCeiling, cappedDefaults, nil
}

// Consent applies the person's cap to the scopes an authorization request
// asks the person to approve (already within the client's ceiling): named
// tells whether the client named them (a refusal) or they are the
// defaults (narrowed, refused only when none is left). The error is a
// *NotPermittedError.
func Consent(scopes []string, named bool, allowed []string) ([]string, error) {
	var requested []string
	if named {
		requested = scopes
	}
	kept, _, err := Cap(requested, scopes, scopes, allowed)
	return kept, err
}

// CapRefresh applies the person's cap to a refresh of a grant holding
// granted: a scope the refresh names beyond it is a *NotPermittedError;
// the grant's other scopes beyond it are left out of the new tokens, and a
// grant left with none of its resource's scopes is ErrNoneLeft. With
// narrowable false (the caller cannot replace the request's scopes), a
// grant losing any scope is ErrNotAllLeft rather than let through uncapped.
func CapRefresh(requested, granted, allowed []string, narrowable bool) ([]string, error) {
	kept, _, err := Cap(requested, granted, nil, allowed)
	if err == nil && len(WithoutOffline(granted)) > 0 && len(WithoutOffline(kept)) == 0 {
		err = ErrNoneLeft
	}
	if err == nil && !narrowable && !slices.Equal(kept, granted) {
		err = ErrNotAllLeft
	}
	if err != nil {
		return nil, err
	}
	return kept, nil
}

// Beyond returns the scopes of scopes, other than offline_access, that
// allowed does not hold, without repeats: what the person's claims do not
// permit.
func Beyond(scopes, allowed []string) []string {
	var out []string
	for _, sc := range scopes {
		if sc != OfflineAccess && !slices.Contains(allowed, sc) && !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// NamesScope reports whether requested names a scope other than
// offline_access.
func NamesScope(requested []string) bool {
	for _, sc := range requested {
		if sc != "" && sc != OfflineAccess {
			return true
		}
	}
	return false
}

// WithoutOffline is scopes without offline_access, in a new slice.
func WithoutOffline(scopes []string) []string {
	return slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return s == OfflineAccess })
}

// Intersect is the scopes of a that b also lists, in a's order.
func Intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}
