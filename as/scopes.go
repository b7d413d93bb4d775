package as

import (
	"errors"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/policy"
)

// The scopes of every grant are decided by package policy (the one rule,
// the person's cap); this file turns what the handlers hold into its
// inputs, and its answers into the RFC 6749 §5.2 errors.

// offlineAccess asks for a refresh token (OpenID Connect Core §11).
const offlineAccess = policy.OfflineAccess

// errNoScope is the invalid_scope answer when nothing requested can be granted.
func errNoScope() error {
	return fosite.ErrInvalidScope.WithHint("None of the requested scopes can be granted to this client for this resource.")
}

// errNoDefaultScope is the invalid_scope answer to a request naming no scope
// when the client has no default scope it may be granted on the resource.
func errNoDefaultScope() error {
	return fosite.ErrInvalidScope.WithHint("No scope was requested and this client has no default scope it may be granted for this resource.")
}

// scopeError maps an error of package policy to its answer: invalid_scope
// (RFC 6749 §5.2, RFC 8693 §2.2.2) for the one rule and the person's cap;
// with hint set, the rule's refusals carry it instead of the generic text.
func scopeError(err error, hint string) error {
	var np *policy.NotPermittedError
	switch {
	case errors.As(err, &np) && np.Named:
		return fosite.ErrInvalidScope.WithHintf("The person's organisation does not permit the scope %s: their sign-in provider's claims do not map to it.", strings.Join(np.Scopes, " "))
	case errors.As(err, &np):
		return fosite.ErrInvalidScope.WithHint("None of the scopes this request would get is permitted by the person's organisation: their sign-in provider's claims do not map to any.")
	case hint != "":
		return fosite.ErrInvalidScope.WithHint(hint)
	case errors.Is(err, policy.ErrNoDefaultScope):
		return errNoDefaultScope()
	default:
		return errNoScope()
	}
}

// policyClient is what package policy needs of c.
func policyClient(c *client) policy.Client {
	return policy.Client{Scopes: c.scopes, DefaultScopes: c.defaultScopes, Refresh: slices.Contains(c.grantTypes, "refresh_token")}
}

// policyResource is what package policy needs of res.
func policyResource(res *resource) policy.Resource {
	return policy.Resource{Scopes: res.Scopes, DefaultScopes: res.DefaultScopes}
}

// grantScopes decides the scopes of a new grant of client c on resource
// res (authorization request, client credentials): policy.Grant.
func grantScopes(c *client, res *resource, requested []string) ([]string, error) {
	scopes, err := policy.Grant(policyClient(c), policyResource(res), requested)
	if err != nil {
		return nil, scopeError(err, "")
	}
	return scopes, nil
}
