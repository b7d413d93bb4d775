package as

import (
	"slices"
	"strings"
	"testing"
)

// FuzzSelectScopes checks the scope rule's invariants on any request: what
// is granted is within the ceiling, never empty, and either scopes the
// request named or the defaults (plus offline_access when asked for).
func FuzzSelectScopes(f *testing.F) {
	f.Add("mcp:tools mcp:admin", "mcp:tools mcp:admin offline_access", "mcp:tools")
	f.Add("openid profile", "mcp:tools offline_access", "mcp:tools")
	f.Add("offline_access", "mcp:tools", "mcp:tools")
	f.Add("", "mcp:tools", "")
	f.Fuzz(func(t *testing.T, requested, ceiling, defaults string) {
		req, ceil := strings.Split(requested, " "), strings.Fields(ceiling)
		var def []string
		for _, d := range strings.Fields(defaults) {
			if slices.Contains(ceil, d) && d != offlineAccess {
				def = append(def, d)
			}
		}
		out, err := selectScopes(req, ceil, def)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v with scopes %q", err, out)
			}
			return
		}
		if len(out) == 0 {
			t.Fatal("no error and no scope")
		}
		fromDefaults := true
		for _, sc := range out {
			if !slices.Contains(ceil, sc) {
				t.Fatalf("%q granted outside the ceiling %q", sc, ceil)
			}
			if sc != offlineAccess && !slices.Contains(def, sc) {
				fromDefaults = false
			}
		}
		if !fromDefaults {
			for _, sc := range out {
				if !slices.Contains(req, sc) {
					t.Fatalf("%q granted though not requested (request %q)", sc, req)
				}
			}
		}
		if slices.Contains(out, offlineAccess) && !slices.Contains(req, offlineAccess) {
			t.Fatalf("offline_access granted though not requested")
		}
	})
}
