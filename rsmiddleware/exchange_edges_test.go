package rsmiddleware

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// closeTracker records whether it was closed.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

// When the exchange after a 401 fails, the resource's 401 is the caller's
// answer and the body made for the second send (GetBody) is closed.
func TestFailedExchangeAfterA401PassesThe401On(t *testing.T) {
	var hits atomic.Int32
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if hits.Add(1) == 1 {
			io.WriteString(w, `{"access_token":"down-1","token_type":"Bearer","expires_in":300}`)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"invalid_grant"}`)
	}))
	defer as.Close()
	resource := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer resource.Close()
	e, err := NewExchanger(ExchangeConfig{TokenURL: as.URL, ClientID: "rs", ClientSecret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: e.Transport(nil, downstreamRes)}
	ctx := ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, "inbound-token")
	for _, withBody := range []bool{false, true} {
		hits.Store(0)
		var again *closeTracker
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, resource.URL, nil)
		if withBody {
			req.Body = io.NopCloser(strings.NewReader("first"))
			req.GetBody = func() (io.ReadCloser, error) {
				again = &closeTracker{Reader: strings.NewReader("again")}
				return again, nil
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("body %v: %v", withBody, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || hits.Load() != 2 {
			t.Errorf("body %v: status %d, %d exchanges; want the 401 after a second, failed exchange", withBody, resp.StatusCode, hits.Load())
		}
		if withBody && (again == nil || !again.closed) {
			t.Errorf("the body made for the second send was not closed")
		}
	}
}
