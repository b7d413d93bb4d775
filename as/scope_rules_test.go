package as

import (
	"slices"
	"testing"
)

// TestRefreshScopesDirectly pins refreshScopes (RFC 6749 §6): the ceiling
// is the original grant's scopes that are still the resource's and the
// client's, plus offline_access, in the original order; a refresh naming
// no scope of the resource gets that ceiling as it is.
func TestRefreshScopesDirectly(t *testing.T) {
	c := &client{scopes: []string{"mcp:tools", "mcp:admin", "other:read", offlineAccess}}
	narrow := &client{scopes: []string{"mcp:tools", "other:read", offlineAccess}}
	res := &resource{Scopes: []string{"mcp:tools", "mcp:admin"}, DefaultScopes: []string{"mcp:tools"}}
	for _, tc := range []struct {
		name                string
		c                   *client
		res                 *resource
		original, requested []string
		want                []string
	}{
		// Fails if a scope of another resource, or one the client lost,
		// passes into the ceiling.
		{"drops scopes not of the resource", c, res, []string{"mcp:tools", "other:read", offlineAccess, "gone:scope"}, nil, []string{"mcp:tools", offlineAccess}},
		{"drops scopes the client may no longer have", narrow, res, []string{"mcp:admin", "mcp:tools"}, nil, []string{"mcp:tools"}},
		{"keeps the original order with offline_access first", c, res, []string{offlineAccess, "mcp:tools"}, nil, []string{offlineAccess, "mcp:tools"}},
		{"offline_access alone names no scope", c, res, []string{offlineAccess, "mcp:admin"}, []string{offlineAccess}, []string{offlineAccess, "mcp:admin"}},
		{"without a resource only offline_access is left", c, nil, []string{"mcp:tools", offlineAccess}, nil, []string{offlineAccess}},
		{"narrows to the named scope", c, res, []string{"mcp:tools", "mcp:admin", offlineAccess}, []string{"mcp:admin"}, []string{"mcp:admin"}},
		// Fails if the defaults of a refresh are built of the wrong scopes.
		{"a named unknown scope with offline_access gets the defaults", c, res, []string{"mcp:tools", offlineAccess}, []string{"openid", offlineAccess}, []string{"mcp:tools", offlineAccess}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := refreshScopes(tc.c, tc.res, tc.original, tc.requested)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("refreshScopes = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDefaultScopesDirectly pins defaultScopes: the scopes the client
// registered with when any may be granted on the resource, else the
// resource's DefaultScopes, always within the client's ceiling.
func TestDefaultScopesDirectly(t *testing.T) {
	res := &resource{Scopes: []string{"mcp:tools", "mcp:admin"}, DefaultScopes: []string{"mcp:tools"}}
	all := []string{"mcp:tools", "mcp:admin", "other:read"}
	for _, tc := range []struct {
		name             string
		scopes, defaults []string
		want             []string
	}{
		{"none registered: the resource's", all, nil, []string{"mcp:tools"}},
		{"registered on the resource: those", all, []string{"mcp:admin"}, []string{"mcp:admin"}},
		// Fails if an empty pick of the registered scopes is returned.
		{"registered only of another resource: the resource's", all, []string{"other:read"}, []string{"mcp:tools"}},
		{"registered beyond the ceiling: the resource's", []string{"mcp:tools"}, []string{"mcp:admin"}, []string{"mcp:tools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := defaultScopes(&client{scopes: tc.scopes, defaultScopes: tc.defaults}, res)
			if !slices.Equal(got, tc.want) {
				t.Errorf("defaultScopes = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNamesScope: empty entries and offline_access name no scope.
func TestNamesScope(t *testing.T) {
	for _, tc := range []struct {
		requested []string
		want      bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{offlineAccess}, false},
		{[]string{"", offlineAccess}, false},
		{[]string{offlineAccess, "mcp:tools"}, true},
		{[]string{"openid"}, true},
	} {
		if got := namesScope(tc.requested); got != tc.want {
			t.Errorf("namesScope(%q) = %v, want %v", tc.requested, got, tc.want)
		}
	}
}

// TestScopeCeilingOfAResourceWithoutScopes: nothing, and no panic.
func TestScopeCeilingOfAResourceWithoutScopes(t *testing.T) {
	if got := scopeCeiling(&client{scopes: []string{"mcp:tools"}}, &resource{URI: mcpURI}); len(got) != 0 {
		t.Errorf("scopeCeiling = %q, want none", got)
	}
}
