package as

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// TestTokenTouchesOnlyStoredClients counts the TouchClient calls of a token
// request: a stored client is touched when its LastUsedAt is
// storage.TouchGranularity old or older, not when it is younger; a
// configured client and a workload rule's client, which have no record, are
// never touched (the call would cost a store round trip to find nothing).
func TestTokenTouchesOnlyStoredClients(t *testing.T) {
	cs := newCountingStore()
	w := newFedWorld(t, func(c *Config) { c.Store = cs })
	ctx := context.Background()
	const secret = "touch-secret-0123456789abcdefghij"
	now := w.clock.Now()
	for id, last := range map[string]time.Time{
		"stale-app": now.Add(-storage.TouchGranularity),
		"fresh-app": now.Add(-storage.TouchGranularity + time.Second),
	} {
		if err := cs.CreateClient(ctx, &storage.Client{
			ID: id, SecretHash: w.as.clients.hasher.Hash(secret), GrantTypes: []string{"client_credentials"},
			TokenEndpointAuthMethod: "client_secret_basic", Source: "dcr", Resources: []string{mcpURI},
			CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour), LastUsedAt: last,
		}); err != nil {
			t.Fatal(err)
		}
	}
	cc := url.Values{"grant_type": {"client_credentials"}}
	for _, tc := range []struct {
		name       string
		form       url.Values
		user, pass string
		touches    int
	}{
		// Fails if the age check becomes <=.
		{"a stored client last used exactly TouchGranularity ago", cc, "stale-app", secret, 1},
		{"a stored client last used less than TouchGranularity ago", cc, "fresh-app", secret, 0},
		// Fail if the source checks are dropped or joined by ||.
		{"a configured client", cc, "ci-bot", ciSecret, 0},
		{"a workload rule's client", jwtBearer(w.wlKey.mint(t, "", w.workloadJWT("conformance-workload")), "resource", mcpURI), "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs.reset()
			resp, body := w.post("/token", tc.form, tc.user, tc.pass)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %v", resp.StatusCode, body)
			}
			cs.mu.Lock()
			touches := cs.touches
			cs.mu.Unlock()
			if touches != tc.touches {
				t.Errorf("TouchClient called %d times, want %d", touches, tc.touches)
			}
		})
	}
}
