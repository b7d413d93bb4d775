package upstream_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/upstream"
)

// TestNewRefusesAnIncompleteConfig: ID, Issuer, ClientID and RedirectURL
// are each required.
func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	full := upstream.Config{ID: "corp", Issuer: "https://op.example", ClientID: "c", ClientSecret: "s", RedirectURL: callback, Scopes: []string{"openid"}}
	if _, err := upstream.New(full); err != nil {
		t.Fatal(err)
	}
	for name, blank := range map[string]func(*upstream.Config){
		"ID":          func(c *upstream.Config) { c.ID = "" },
		"Issuer":      func(c *upstream.Config) { c.Issuer = "" },
		"ClientID":    func(c *upstream.Config) { c.ClientID = "" },
		"RedirectURL": func(c *upstream.Config) { c.RedirectURL = "" },
	} {
		cfg := full
		blank(&cfg)
		if p, err := upstream.New(cfg); err == nil || p != nil {
			t.Errorf("a config without %s accepted", name)
		}
	}
}

// TestNewHTTPClientTimeouts reads the client NewHTTPClient builds: the
// total timeout given (10 s for zero or less), TLS handshake at most 5 s,
// response headers within the total, idle connections closed after 90 s,
// redirects not followed.
func TestNewHTTPClientTimeouts(t *testing.T) {
	for _, tc := range []struct{ given, total, tls time.Duration }{
		{0, 10 * time.Second, 5 * time.Second},
		{-time.Second, 10 * time.Second, 5 * time.Second},
		{2 * time.Second, 2 * time.Second, 2 * time.Second},
		{time.Minute, time.Minute, 5 * time.Second},
	} {
		c := upstream.NewHTTPClient(tc.given)
		tr := c.Transport.(*http.Transport)
		if c.Timeout != tc.total || tr.ResponseHeaderTimeout != tc.total || tr.TLSHandshakeTimeout != tc.tls || tr.IdleConnTimeout != 90*time.Second {
			t.Errorf("NewHTTPClient(%s): timeout %s, header %s, TLS %s, idle %s", tc.given, c.Timeout, tr.ResponseHeaderTimeout, tr.TLSHandshakeTimeout, tr.IdleConnTimeout)
		}
		if err := c.CheckRedirect(&http.Request{}, nil); err != http.ErrUseLastResponse {
			t.Errorf("redirects followed: %v", err)
		}
	}
}

// TestAuthCodeURLParameters: the caller's name, value pairs replace the
// configured AuthParams of the same name; an odd last name is ignored.
func TestAuthCodeURLParameters(t *testing.T) {
	fp := newFakeProvider(t)
	p := fp.relyingParty(func(c *upstream.Config) { c.AuthParams = map[string]string{"prompt": "consent", "hd": "acme.example"} })
	u, err := p.AuthCodeURL(context.Background(), "st", "no", upstream.NewVerifier(), "prompt", "login", "max_age", "0", "dangling")
	if err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	if q.Get("prompt") != "login" || len(q["prompt"]) != 1 || q.Get("max_age") != "0" || q.Get("hd") != "acme.example" || q.Has("dangling") {
		t.Fatalf("authorization URL %s", u)
	}
}
