package rsmiddleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A request without a body (GET) can always be sent again: a 401 from the
// resource is followed by one more send with a token exchanged anew.
func TestExchangedTokenRefusedOnABodilessRequestIsExchangedAnew(t *testing.T) {
	ks := newKeyServer(t)
	e := newExchanger(t, ks, nil)
	d := &downstreamRefusing{refused: map[string]bool{}}
	srv := httptest.NewServer(d)
	defer srv.Close()
	client := &http.Client{Transport: e.Transport(nil, downstreamRes)}
	ctx := ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, ks.mint(ks.claims()))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if req.Body != nil || req.GetBody != nil {
		t.Fatal("the request has a body")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(d.tokens) != 2 || d.tokens[0] == d.tokens[1] || ks.tokenHits.Load() != 2 {
		t.Fatalf("status %d, %d sends, %d exchanges; want 200 after a second send with another token", resp.StatusCode, len(d.tokens), ks.tokenHits.Load())
	}
}

// ExchangeError names the OAuth error code and status, and the
// description when the AS sent one (RFC 6749 §5.2).
func TestExchangeErrorText(t *testing.T) {
	for _, tt := range []struct {
		err  ExchangeError
		want string
	}{
		{ExchangeError{Status: 400, Code: "invalid_target", Description: "unknown resource"}, "token exchange: invalid_target (400): unknown resource"},
		{ExchangeError{Status: 400, Code: "invalid_grant"}, "token exchange: invalid_grant (400)"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
