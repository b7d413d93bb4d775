package as

import (
	"errors"
	"strings"
	"testing"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/policy"
)

// TestCapErrorsAreInvalidScope: the person's cap (policy.Cap, tested there
// case by case) refuses with invalid_scope (RFC 6749 §5.2, RFC 8693
// §2.2.2), naming the scopes a request named beyond it.
func TestCapErrorsAreInvalidScope(t *testing.T) {
	ceiling := []string{"mcp:tools", "mcp:admin", offlineAccess}
	defaults := []string{"mcp:tools", "mcp:admin"}
	for _, tc := range []struct {
		name               string
		requested, allowed []string
		refused            string // what the description must name
	}{
		{"refuses a named scope beyond the mapping", []string{"mcp:tools", "mcp:admin"}, []string{"mcp:tools"}, "mcp:admin"},
		{"refuses a request naming no scope when no default is mapped", nil, nil, "organisation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := policy.Cap(tc.requested, ceiling, defaults, tc.allowed)
			var rfc *fosite.RFC6749Error
			if err == nil || !errors.As(scopeError(err, "ignored for the cap"), &rfc) || rfc.ErrorField != "invalid_scope" || !strings.Contains(rfc.GetDescription(), tc.refused) {
				t.Fatalf("error %v; want invalid_scope naming %q", err, tc.refused)
			}
		})
	}
	var rfc *fosite.RFC6749Error
	if !errors.As(scopeError(policy.ErrNoDefaultScope, ""), &rfc) || !strings.Contains(rfc.GetDescription(), "No scope was requested") {
		t.Errorf("ErrNoDefaultScope answers %v", rfc)
	}
	if !errors.As(scopeError(policy.ErrNoScope, "Nothing for this exchange."), &rfc) || !strings.Contains(rfc.GetDescription(), "Nothing for this exchange.") {
		t.Errorf("a hint is not used: %v", rfc)
	}
}
