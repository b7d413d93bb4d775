package as

import (
	"context"
	"slices"
	"strings"

	"github.com/ory/fosite"
)

// One rule decides the scopes of every grant (authorization, client
// credentials, refresh, token exchange):
//
//   - the ceiling is what the client may have on the resource: for a
//     pre-registered client its configured Scopes, for a registered or CIMD
//     client the registration policy (Config.RegistrationScopes), always
//     within the resource's own scopes;
//   - requested scopes are narrowed to the ceiling and unknown ones dropped
//     (RFC 6749 §3.3 lets the server grant fewer): clients send openid,
//     profile, scopes of other servers;
//   - a request that names no scope gets the defaults: the scope a
//     registered client registered with (RFC 7591 §2 leaves its meaning to
//     the server), else the resource's DefaultScopes;
//   - when nothing requested can be granted the answer is invalid_scope
//     (RFC 6749 §4.1.2.1, §5.2); a resource that has no scopes grants none
//     and refuses nothing;
//   - offline_access (OpenID Connect Core §11) is accepted and granted when
//     asked for, and never the cause of invalid_scope: refresh tokens are
//     issued whatever the scope. A request whose only grantable scope is
//     offline_access is treated as naming no scope of the resource.

// offlineAccess asks for a refresh token (OpenID Connect Core §11).
const offlineAccess = "offline_access"

// errNoScope is the invalid_scope answer when nothing requested can be granted.
func errNoScope() error {
	return fosite.ErrInvalidScope.WithHint("None of the requested scopes can be granted to this client for this resource.")
}

// errNoDefaultScope is the invalid_scope answer to a request naming no scope
// when the client has no default scope it may be granted on the resource.
func errNoDefaultScope() error {
	return fosite.ErrInvalidScope.WithHint("No scope was requested and this client has no default scope it may be granted for this resource.")
}

// selectScopes applies the rule to requested (empty entries ignored):
// ceiling lists what may be granted, in the order the answer uses, and may
// include offline_access; defaults (a subset of ceiling without
// offline_access) is what a request naming no scope gets.
func selectScopes(requested, ceiling, defaults []string) ([]string, error) {
	named, offline := namesScope(requested), slices.Contains(requested, offlineAccess)
	var out []string
	if named {
		for _, sc := range ceiling {
			if sc != offlineAccess && slices.Contains(requested, sc) {
				out = append(out, sc)
			}
		}
		if len(out) == 0 && !offline {
			return nil, errNoScope()
		}
	}
	if len(out) == 0 {
		out = append(out, defaults...)
	}
	if offline && slices.Contains(ceiling, offlineAccess) {
		out = append(out, offlineAccess)
	}
	if len(out) == 0 {
		if !named {
			return nil, errNoDefaultScope()
		}
		return nil, errNoScope()
	}
	return out, nil
}

// grantScopes decides the scopes of a new grant of client c on resource res.
func grantScopes(c *client, res *resource, requested []string) ([]string, error) {
	if len(res.Scopes) == 0 {
		// A resource without scopes grants none: whatever is named is
		// dropped, and there is nothing to refuse.
		if slices.Contains(requested, offlineAccess) && slices.Contains(c.scopes, offlineAccess) {
			return []string{offlineAccess}, nil
		}
		return nil, nil
	}
	if len(requested) == 0 {
		// The common case of client credentials: the defaults, without
		// building the ceiling.
		if d := defaultScopes(c, res); len(d) > 0 {
			return d, nil
		}
		return nil, errNoDefaultScope()
	}
	return selectScopes(requested, scopeCeiling(c, res), defaultScopes(c, res))
}

// scopeCeiling is what c may be granted on res: the resource's scopes the
// client may have, in the resource's order, then offline_access for a
// client that may refresh.
func scopeCeiling(c *client, res *resource) []string {
	out := make([]string, 0, len(res.Scopes)+1)
	for _, sc := range res.Scopes {
		if slices.Contains(c.scopes, sc) {
			out = append(out, sc)
		}
	}
	if slices.Contains(c.grantTypes, "refresh_token") {
		out = append(out, offlineAccess)
	}
	return out
}

// defaultScopes is what a request of c for res that names no scope gets:
// the scopes c registered with, when any of them can be granted on res,
// else the resource's DefaultScopes; always within the ceiling.
func defaultScopes(c *client, res *resource) []string {
	pick := func(from []string) []string {
		var out []string
		for _, sc := range res.Scopes {
			if slices.Contains(from, sc) && slices.Contains(c.scopes, sc) {
				out = append(out, sc)
			}
		}
		return out
	}
	if len(c.defaultScopes) > 0 {
		if out := pick(c.defaultScopes); len(out) > 0 {
			return out
		}
	}
	return pick(res.DefaultScopes)
}

// refreshScopes decides the scopes of a refresh (RFC 6749 §6): within the
// scope the person originally granted (and what the client may still have),
// which is also what a refresh naming no scope gets. A refresh may narrow,
// never widen.
func refreshScopes(c *client, res *resource, original, requested []string) ([]string, error) {
	ceiling := make([]string, 0, len(original))
	for _, sc := range original {
		if sc == offlineAccess || res != nil && slices.Contains(res.Scopes, sc) && slices.Contains(c.scopes, sc) {
			ceiling = append(ceiling, sc)
		}
	}
	if !namesScope(requested) || res == nil || len(res.Scopes) == 0 {
		return ceiling, nil
	}
	defaults := make([]string, 0, len(ceiling))
	for _, sc := range ceiling {
		if sc != offlineAccess {
			defaults = append(defaults, sc)
		}
	}
	return selectScopes(requested, ceiling, defaults)
}

// withoutOffline is scopes without offline_access, in a new slice.
func withoutOffline(scopes []string) []string {
	return slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return s == offlineAccess })
}

// intersect is the scopes of a that b also lists, in a's order.
func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// namesScope reports whether requested names a scope other than offline_access.
func namesScope(requested []string) bool {
	for _, sc := range requested {
		if sc != "" && sc != offlineAccess {
			return true
		}
	}
	return false
}

// The person's cap: someone who signed in through an upstream provider with
// a claim mapping (claim_scopes) may never be granted a scope their claims
// do not allow, whatever the client or the exchange policy may have. The
// consent page applies it at authorization (loginui); token exchange and
// refresh apply it to every token they mint for that person, with the claims
// the person's record holds then.

// personCap returns the scopes the person subject may be granted and
// whether anything caps them (loginui.UI.ScopeCap). No subject (client
// credentials), a federated one (an assertion's subject, no person of ours)
// and a server without a UI are not capped.
func (s *Server) personCap(ctx context.Context, subject string, federated bool) ([]string, bool, error) {
	if subject == "" || federated || s.ui == nil {
		return nil, false, nil
	}
	return s.ui.ScopeCap(ctx, subject)
}

// capToPerson bounds ceiling and defaults (as selectScopes takes them) by
// allowed, the person's mapped scopes; offline_access is never capped, it is
// no resource's scope. A request that names a scope the ceiling holds and
// allowed does not is refused with invalid_scope (RFC 6749 §5.2, RFC 8693
// §2.2.2) naming those scopes: a narrowed answer would send the client back
// for the same scope. Defaults beyond allowed are left out; when none is
// left for a request naming no scope, that is invalid_scope too.
func capToPerson(requested, ceiling, defaults, allowed []string) (cappedCeiling, cappedDefaults []string, err error) {
	var beyond []string
	for _, sc := range requested {
		if sc != offlineAccess && slices.Contains(ceiling, sc) && !slices.Contains(allowed, sc) && !slices.Contains(beyond, sc) {
			beyond = append(beyond, sc)
		}
	}
	if len(beyond) > 0 {
		return nil, nil, fosite.ErrInvalidScope.WithHintf("The person's organisation does not permit the scope %s: their sign-in provider's claims do not map to it.", strings.Join(beyond, " "))
	}
	keep := func(sc string) bool { return sc == offlineAccess || slices.Contains(allowed, sc) }
	cappedCeiling = slices.DeleteFunc(slices.Clone(ceiling), func(sc string) bool { return !keep(sc) })
	cappedDefaults = slices.DeleteFunc(slices.Clone(defaults), func(sc string) bool { return !keep(sc) })
	if !namesScope(requested) && len(withoutOffline(defaults)) > 0 && len(withoutOffline(cappedDefaults)) == 0 {
		return nil, nil, fosite.ErrInvalidScope.WithHint("None of the scopes this request would get is permitted by the person's organisation: their sign-in provider's claims do not map to any.")
	}
	return cappedCeiling, cappedDefaults, nil
}

// beyondCap returns the scopes of scopes, other than offline_access, that
// allowed does not hold: what the person's claims do not permit, as the
// audit events of a refused refresh or exchange name them.
func beyondCap(scopes, allowed []string) []string {
	var out []string
	for _, sc := range scopes {
		if sc != offlineAccess && !slices.Contains(allowed, sc) && !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out
}
