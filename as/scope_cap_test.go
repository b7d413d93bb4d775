package as

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ory/fosite"
)

// TestCapToPerson: the person's mapped scopes bound an exchange's or a
// refresh's ceiling and defaults; a named scope beyond them is refused.
func TestCapToPerson(t *testing.T) {
	ceiling := []string{"mcp:tools", "mcp:admin", offlineAccess}
	defaults := []string{"mcp:tools", "mcp:admin"}
	for _, tc := range []struct {
		name                   string
		requested, allowed     []string
		wantCeiling, wantDeflt []string
		refused                string // a scope the error must name; "" for no error
	}{
		{"names a scope within the mapping", []string{"mcp:tools"}, []string{"mcp:tools"}, []string{"mcp:tools", offlineAccess}, []string{"mcp:tools"}, ""},
		{"refuses a named scope beyond the mapping", []string{"mcp:tools", "mcp:admin"}, []string{"mcp:tools"}, nil, nil, "mcp:admin"},
		{"leaves unrequested defaults beyond the mapping out", nil, []string{"mcp:tools"}, []string{"mcp:tools", offlineAccess}, []string{"mcp:tools"}, ""},
		{"refuses a request naming no scope when no default is mapped", nil, nil, nil, nil, "organisation"},
		{"never caps offline_access", []string{offlineAccess}, []string{"mcp:admin"}, []string{"mcp:admin", offlineAccess}, []string{"mcp:admin"}, ""},
		{"drops a named scope outside the ceiling as before", []string{"openid", "mcp:tools"}, []string{"mcp:tools"}, []string{"mcp:tools", offlineAccess}, []string{"mcp:tools"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, d, err := capToPerson(tc.requested, ceiling, defaults, tc.allowed)
			if tc.refused != "" {
				var rfc *fosite.RFC6749Error
				if !errors.As(err, &rfc) || rfc.ErrorField != "invalid_scope" || !strings.Contains(rfc.GetDescription(), tc.refused) {
					t.Fatalf("error %v; want invalid_scope naming %q", err, tc.refused)
				}
				return
			}
			if err != nil || !slices.Equal(c, tc.wantCeiling) || !slices.Equal(d, tc.wantDeflt) {
				t.Fatalf("ceiling %v defaults %v err %v; want %v %v", c, d, err, tc.wantCeiling, tc.wantDeflt)
			}
		})
	}
}
