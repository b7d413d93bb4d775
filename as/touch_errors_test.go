package as

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// touchFailingStore answers TouchClient with err and passes everything else
// to its countingStore.
type touchFailingStore struct {
	*countingStore
	err error
}

func (s *touchFailingStore) TouchClient(ctx context.Context, id string, at time.Time) error {
	if s.err != nil {
		return s.err
	}
	return s.countingStore.TouchClient(ctx, id, at)
}

// TestClientTouchErrorsAreLoggedNotAnswered: updating a stored client's
// LastUsedAt after a token is issued never changes the answer; a failure is
// logged as an error, a client gone meanwhile (storage.ErrNotFound) and a
// successful update are not.
func TestClientTouchErrorsAreLoggedNotAnswered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantLog bool
	}{
		{"a successful update logs nothing", nil, false},
		{"a client deleted meanwhile logs nothing", storage.ErrNotFound, false},
		{"a failed update is logged", errors.New("disk full"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &touchFailingStore{countingStore: newCountingStore(), err: tc.err}
			h, logs := newLoggedHarness(t, func(c *Config) { c.Store = fs })
			const secret = "touch-secret-0123456789abcdefghij"
			if err := fs.CreateClient(context.Background(), &storage.Client{
				ID: "dcr-app", SecretHash: h.as.clients.hasher.Hash(secret), GrantTypes: []string{"client_credentials"},
				TokenEndpointAuthMethod: "client_secret_basic", Source: "dcr", Resources: []string{mcpURI},
			}); err != nil {
				t.Fatal(err)
			}
			resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "dcr-app", secret)
			if resp.StatusCode != 200 || body["access_token"] == nil {
				t.Fatalf("token request: %d %v", resp.StatusCode, body)
			}
			logged := strings.Contains(logs.String(), `"msg":"touching client"`)
			if logged != tc.wantLog {
				t.Fatalf("\"touching client\" logged = %v, want %v; log:\n%s", logged, tc.wantLog, logs)
			}
			if tc.wantLog && !strings.Contains(logs.String(), "disk full") {
				t.Errorf("the logged error does not carry the cause; log:\n%s", logs)
			}
		})
	}
}
