package upstream_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/upstream"
)

// FuzzMapScopes checks that the mapping never grants a scope that no value
// the person holds maps to, and grants every scope one of them does.
func FuzzMapScopes(f *testing.F) {
	f.Add("groups", "mcp-admins", "mcp:admin mcp:tools", "mcp-admins,sales")
	f.Add("groups", "", "x", "")
	f.Add("roles", "a b", "s", "a b,a")
	f.Fuzz(func(t *testing.T, claim, value, scopes, held string) {
		mapping := map[string]map[string][]string{claim: {value: strings.Fields(scopes)}, "other": {"v": {"other:scope"}}}
		claims := map[string][]string{claim: strings.Split(held, ",")}
		got := upstream.MapScopes(mapping, claims)
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("not sorted and unique: %q", got)
		}
		holds := slices.Contains(claims[claim], value)
		for _, s := range got {
			if !holds || !slices.Contains(strings.Fields(scopes), s) {
				t.Fatalf("scope %q granted; mapping %q, claims %q", s, mapping, claims)
			}
		}
		if holds {
			for _, s := range strings.Fields(scopes) {
				if !slices.Contains(got, s) {
					t.Fatalf("scope %q of a held value not granted: %q", s, got)
				}
			}
		}
	})
}
