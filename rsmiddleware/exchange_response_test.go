package rsmiddleware

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tokenEndpoint is a token endpoint that answers every request with one
// canned response and records the forms it was sent.
type tokenEndpoint struct {
	srv         *httptest.Server
	hits        atomic.Int32
	mu          sync.Mutex
	status      int
	contentType string
	body        string
	forms       []url.Values
}

func newTokenEndpoint(t *testing.T) *tokenEndpoint {
	te := &tokenEndpoint{status: 200, contentType: "application/json"}
	te.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		te.hits.Add(1)
		_ = r.ParseForm()
		te.mu.Lock()
		te.forms = append(te.forms, r.PostForm)
		status, ct, body := te.status, te.contentType, te.body
		te.mu.Unlock()
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(te.srv.Close)
	return te
}

func (te *tokenEndpoint) answer(status int, body string) {
	te.mu.Lock()
	te.status, te.body = status, body
	te.mu.Unlock()
}

func (te *tokenEndpoint) exchanger(t *testing.T, mod func(*ExchangeConfig)) *Exchanger {
	cfg := ExchangeConfig{TokenURL: te.srv.URL, ClientID: rsClientID, ClientSecret: rsClientSecret, HTTPClient: te.srv.Client()}
	if mod != nil {
		mod(&cfg)
	}
	e, err := NewExchanger(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestExchangerReadsTheTokenResponse: what an RFC 8693 token response must
// be for its token to be used, and the expiry taken from expires_in.
func TestExchangerReadsTheTokenResponse(t *testing.T) {
	const at = `"urn:ietf:params:oauth:token-type:access_token"`
	now := time.Now().Truncate(time.Second)
	tests := []struct {
		name   string
		status int
		body   string
		code   string        // an ExchangeError with this code
		errHas string        // another error containing this
		ttl    time.Duration // the token's lifetime when accepted
	}{
		{"takes expires_in", 200, `{"access_token":"down","token_type":"Bearer","issued_token_type":` + at + `,"expires_in":3600}`, "", "", time.Hour},
		{"assumes a minute without expires_in", 200, `{"access_token":"down","token_type":"bearer"}`, "", "", time.Minute},
		{"assumes a minute for expires_in 0", 200, `{"access_token":"down","token_type":"Bearer","expires_in":0}`, "", "", time.Minute},
		{"assumes a minute for a negative expires_in", 200, `{"access_token":"down","token_type":"Bearer","expires_in":-5}`, "", "", time.Minute},
		{"reports an error code answered with 200", 200, `{"error":"invalid_target","error_description":"no"}`, "invalid_target", "", 0},
		{"reports a token answered with 500 as server_error", 500, `{"access_token":"down","token_type":"Bearer"}`, "server_error", "", 0},
		{"refuses a token of type N_A", 200, `{"access_token":"down","token_type":"N_A","issued_token_type":` + at + `}`, "", "without a Bearer access_token", 0},
		{"refuses a response without access_token", 200, `{"token_type":"Bearer"}`, "", "without a Bearer access_token", 0},
		{"refuses an ID token", 200, `{"access_token":"down","token_type":"Bearer","issued_token_type":"urn:ietf:params:oauth:token-type:id_token"}`, "", "is not an access token", 0},
		{"refuses a response over the size limit", 200, `{"access_token":"down","token_type":"Bearer"}` + strings.Repeat(" ", maxFetchBytes), "", "too large", 0},
		{"accepts a response of exactly the size limit", 200, `{"access_token":"down","token_type":"Bearer","expires_in":3600}` +
			strings.Repeat(" ", maxFetchBytes-len(`{"access_token":"down","token_type":"Bearer","expires_in":3600}`)), "", "", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := newTokenEndpoint(t)
			te.answer(tt.status, tt.body)
			e := te.exchanger(t, func(c *ExchangeConfig) { c.Now = func() time.Time { return now } })
			tok, err := e.Exchange(context.Background(), "inbound", downstreamRes)
			var xe *ExchangeError
			switch {
			case tt.code != "":
				if !errors.As(err, &xe) || xe.Code != tt.code || xe.Status != tt.status {
					t.Fatalf("err = %v; want ExchangeError %s, status %d", err, tt.code, tt.status)
				}
			case tt.errHas != "":
				if err == nil || errors.As(err, &xe) || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v; want one saying %q", err, tt.errHas)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if tok.AccessToken != "down" || !tok.Expiry.Equal(now.Add(tt.ttl)) {
					t.Fatalf("token %+v; want expiry now+%v", tok, tt.ttl)
				}
			}
		})
	}
}

// TestExchangerSendsScopesOnlyWhenConfigured: scope is sent with the
// configured scopes, and not at all without them.
func TestExchangerSendsScopesOnlyWhenConfigured(t *testing.T) {
	te := newTokenEndpoint(t)
	te.answer(200, `{"access_token":"down","token_type":"Bearer","expires_in":600}`)
	if _, err := te.exchanger(t, func(c *ExchangeConfig) { c.Scopes = []string{"read", "write"} }).Exchange(context.Background(), "in-1", downstreamRes); err != nil {
		t.Fatal(err)
	}
	if _, err := te.exchanger(t, nil).Exchange(context.Background(), "in-2", downstreamRes); err != nil {
		t.Fatal(err)
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	if got := te.forms[0]["scope"]; len(got) != 1 || got[0] != "read write" {
		t.Errorf("with scopes: scope %q; want \"read write\"", got)
	}
	if got, sent := te.forms[1]["scope"]; sent {
		t.Errorf("without scopes: scope %q sent", got)
	}
}

// TestExchangerCacheSize: the cache keeps CacheSize tokens (10000 when zero
// or less); one more evicts.
func TestExchangerCacheSize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		size int
		hits int32 // token endpoint calls for A, B, A
	}{
		{0, 2}, {-1, 2}, {1, 3}, {2, 2},
	} {
		te := newTokenEndpoint(t)
		te.answer(200, `{"access_token":"down","token_type":"Bearer","expires_in":600}`)
		e := te.exchanger(t, func(c *ExchangeConfig) { c.CacheSize = tc.size })
		for _, sub := range []string{"A", "B", "A"} {
			if _, err := e.Exchange(ctx, sub, downstreamRes); err != nil {
				t.Fatal(err)
			}
		}
		if got := te.hits.Load(); got != tc.hits {
			t.Errorf("CacheSize %d: %d exchanges for A, B, A; want %d", tc.size, got, tc.hits)
		}
	}
}

// TestNewExchangerNeedsBothClientCredentials: a client id without a
// secret, or a secret without an id, is refused.
func TestNewExchangerNeedsBothClientCredentials(t *testing.T) {
	for _, cfg := range []ExchangeConfig{
		{TokenURL: "https://as.example/token", ClientID: "rs"},
		{TokenURL: "https://as.example/token", ClientSecret: "s"},
	} {
		if _, err := NewExchanger(cfg); err == nil || !strings.Contains(err.Error(), "ClientID and ClientSecret") {
			t.Errorf("%+v: %v; want refused for its credentials", cfg, err)
		}
	}
}
