package as

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/upstream"
)

// wrappedRequest is a fosite.AccessRequester that is not a
// *fosite.AccessRequest: its GrantedScope cannot be replaced by capRefresh.
type wrappedRequest struct{ *fosite.AccessRequest }

// TestCapRefreshFailsClosedForOtherRequesters: the claim cap of a refresh
// (RFC 6749 §6, §5.2) is applied whatever fosite.AccessRequester carries
// the request. A *fosite.AccessRequest is narrowed to the cap; any other
// requester whose grant holds a scope beyond the cap, which cannot be
// narrowed, is refused with invalid_grant rather than let through.
func TestCapRefreshFailsClosedForOtherRequesters(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	p, err := upstream.New(upstream.Config{ID: "corp", Issuer: "https://op.example", ClientID: "c", ClientSecret: "s",
		RedirectURL: h.issuer + "/login/upstream/callback", Scopes: []string{"openid"},
		ClaimScopes: map[string]map[string][]string{"groups": {"staff": {"mcp:tools"}, "admins": {"mcp:admin"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := loginui.New(loginui.Config{Upstreams: []loginui.Upstream{{Provider: p, Name: "Corp"}}, UpstreamUsers: h.store,
		Consents: h.store, JTIs: h.store, Secret: []byte("0123456789abcdef0123456789abcdef-test-secret"), Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	const sub = "corp:u-carol"
	if _, err := h.store.RecordLogin(ctx, &storage.User{Subject: sub, Upstream: "corp", UpstreamSubject: "u-carol",
		Claims: map[string][]string{"groups": {"staff"}}}); err != nil {
		t.Fatal(err)
	}
	h.as.ui, h.as.people = ui, ui.People()
	g := &userGate{s: h.as}
	request := func(granted ...string) *fosite.AccessRequest {
		ar := fosite.NewAccessRequest(&session{Subject: sub})
		ar.Client = &fosite.DefaultClient{ID: "demo-app"}
		ar.Form = url.Values{"grant_type": {"refresh_token"}}
		ar.GrantTypes = fosite.Arguments{"refresh_token"}
		ar.GrantedScope = fosite.Arguments(granted)
		return ar
	}

	// A *fosite.AccessRequest is narrowed to the cap.
	ar := request("mcp:tools", "mcp:admin", "offline_access")
	if err := g.capRefresh(ctx, ar, sub); err != nil {
		t.Fatalf("*fosite.AccessRequest: %v", err)
	}
	if want := []string{"mcp:tools", "offline_access"}; !slices.Equal(ar.GrantedScope, want) {
		t.Errorf("*fosite.AccessRequest granted %q after the cap, want %q", ar.GrantedScope, want)
	}

	for _, tc := range []struct {
		name    string
		granted []string
		refuse  bool
	}{
		{"a scope beyond the cap", []string{"mcp:tools", "mcp:admin", "offline_access"}, true},
		{"only scopes beyond the cap", []string{"mcp:admin"}, true},
		{"scopes within the cap", []string{"mcp:tools", "offline_access"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := wrappedRequest{request(tc.granted...)}
			err := g.capRefresh(ctx, w, sub)
			if !tc.refuse {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !slices.Equal(w.GetGrantedScopes(), tc.granted) {
					t.Errorf("granted %q, want %q", w.GetGrantedScopes(), tc.granted)
				}
				return
			}
			var rfc *fosite.RFC6749Error
			if !errors.As(err, &rfc) || rfc.ErrorField != "invalid_grant" {
				t.Fatalf("got %v; want invalid_grant", err)
			}
		})
	}
}
