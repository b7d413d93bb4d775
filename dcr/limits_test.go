package dcr_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestRegistrationAtEachCapIsAccepted: every limit refuses only what is
// beyond it (the refusals one past each cap are in TestRegistrationRefusals).
func TestRegistrationAtEachCapIsAccepted(t *testing.T) {
	list := func(n int, f func(i int) string) string {
		var parts []string
		for i := 0; i < n; i++ {
			parts = append(parts, `"`+f(i)+`"`)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	longURI := "https://a.example/" + strings.Repeat("p", 1024-len("https://a.example/"))
	cases := []struct {
		name string
		body string
	}{
		{"20 contacts", `{"redirect_uris":["https://a.example/cb"],"contacts":` + list(20, func(i int) string { return fmt.Sprintf("c%d@a.example", i) }) + `}`},
		{"20 grant types", `{"redirect_uris":["https://a.example/cb"],"grant_types":` + list(20, func(int) string { return "authorization_code" }) + `}`},
		{"20 response types", `{"redirect_uris":["https://a.example/cb"],"response_types":` + list(20, func(int) string { return "code" }) + `}`},
		{"10 redirect URIs", `{"redirect_uris":` + list(10, func(i int) string { return fmt.Sprintf("https://a.example/%d", i) }) + `}`},
		{"a client_name of 1024 characters", `{"redirect_uris":["https://a.example/cb"],"client_name":"` + strings.Repeat("n", 1024) + `"}`},
		{"a redirect URI of 1024 characters", `{"redirect_uris":["` + longURI + `"]}`},
	}
	for _, tc := range cases {
		t.Run("accepts "+tc.name, func(t *testing.T) {
			e := newEnv(t, defaultPolicy())
			if r := e.register(tc.body); r.status != http.StatusCreated {
				t.Fatalf("status %d, want 201: %s", r.status, r.body)
			}
		})
	}
}
