package as

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpauth/mcpauth/upstream"
)

// recheckStub is an UpstreamRecheck that answers what the test sets and
// records whom it was asked about.
type recheckStub struct {
	mu     sync.Mutex
	ok     bool
	err    error
	asked  []string
	scopes [][]string
}

func (r *recheckStub) Recheck(_ context.Context, subject string, scopes []string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, subject)
	r.scopes = append(r.scopes, slices.Clone(scopes))
	return r.ok, r.err
}

func (r *recheckStub) set(ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ok, r.err, r.asked, r.scopes = ok, err, nil, nil
}

// TestRefreshAsksTheUpstreamRecheck: with Config.Recheck set, a refresh of
// a person's grant goes on only when Recheck confirms them; a refusal is
// invalid_grant (RFC 6749 §5.2) with an audit event naming the reason, an
// error temporarily_unavailable. A code redemption and a client
// credentials grant do not ask.
func TestRefreshAsksTheUpstreamRecheck(t *testing.T) {
	stub := &recheckStub{ok: true}
	h, logs := newLoggedHarness(t, func(c *Config) { c.Recheck = stub })
	refresh := func(rt string) (int, map[string]any) {
		resp, body := h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"demo-app"}}, "", "")
		return resp.StatusCode, body
	}

	stub.set(true, nil)
	tok := h.codeFlow("mcp:tools")
	h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	if len(stub.asked) != 0 {
		t.Fatalf("Recheck asked about %q at a code redemption or client credentials grant", stub.asked)
	}
	if status, body := refresh(tok.RefreshToken); status != 200 {
		t.Fatalf("confirmed refresh: %d %v", status, body)
	}
	// Fails if the recheck is skipped for a person's grant.
	if !slices.Equal(stub.asked, []string{"alice"}) || !slices.Equal(stub.scopes[0], []string{"mcp:tools"}) {
		t.Errorf("Recheck asked about %q with scopes %q; want alice with mcp:tools", stub.asked, stub.scopes)
	}

	for _, tc := range []struct {
		name         string
		err          error
		status       int
		code, reason string
	}{
		{"a refusal without reason", nil, 400, "invalid_grant", "refused"},
		{"a refusal with a reason", &upstream.Refusal{Reason: "allow rules"}, 400, "invalid_grant", "allow rules"},
		{"a failure to tell", errors.New("provider unreachable"), 503, "temporarily_unavailable", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub.set(true, nil)
			rt := h.codeFlow("mcp:tools").RefreshToken
			stub.set(false, tc.err)
			status, body := refresh(rt)
			if status != tc.status || body["error"] != tc.code || body["access_token"] != nil {
				t.Fatalf("%d %v; want %d %s", status, body, tc.status, tc.code)
			}
			if len(stub.asked) != 1 {
				t.Errorf("Recheck asked %d times, want once", len(stub.asked))
			}
			refused := false
			for _, e := range logs.events(t) {
				if e["event"] == "grant.upstream_refused" && e["reason"] == tc.reason && e["sub"] == "alice" {
					refused = true
				}
			}
			if refused != (tc.reason != "") {
				t.Errorf("grant.upstream_refused with reason %q logged: %v", tc.reason, refused)
			}
			if tc.reason == "" && !strings.Contains(logs.String(), "upstream recheck") {
				t.Errorf("the recheck failure is not logged")
			}
		})
	}
}
