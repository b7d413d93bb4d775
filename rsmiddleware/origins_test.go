package rsmiddleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// A resource server in a container network: the AS's issuer (in its
// metadata, jwks_uri, token endpoint and tokens) is a public URL this process
// cannot reach; RewriteOrigins sends those requests to the AS's internal
// address, and verification and token exchange still work and still check
// the public issuer.
func TestRewriteOriginsReachesAnASUnderItsPublicIssuer(t *testing.T) {
	const public = "http://as.public.invalid:9000"
	ks := newKeyServerAt(t, public)
	var hosts atomic.Value
	inner := ks.srv.Config.Handler
	ks.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts.Store(r.Host)
		inner.ServeHTTP(w, r)
	})
	rt, err := RewriteOrigins(nil, map[string]string{"HTTP://AS.public.invalid:9000/": ks.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: rt}

	v := ks.verifier(t, func(c *Config) { c.Issuer, c.HTTPClient = public, client })
	token := ks.mint(ks.claims())
	p, err := v.Verify(context.Background(), token)
	if err != nil || p.Subject != "alice" {
		t.Fatalf("Verify through the internal address: %v %+v", err, p)
	}
	if h, _ := hosts.Load().(string); h != "as.public.invalid:9000" {
		t.Fatalf("the AS saw Host %q, want the public host", h)
	}
	// The public issuer is still what tokens are checked against.
	other := ks.claims()
	other["iss"] = ks.srv.URL
	if _, err := v.Verify(context.Background(), ks.mint(other)); err == nil {
		t.Fatal("a token whose iss is the internal address was accepted")
	}

	e := newExchanger(t, ks, func(c *ExchangeConfig) { c.Issuer, c.HTTPClient = public, client })
	ctx := ContextWithPrincipal(context.Background(), p, token)
	if _, err := e.Token(ctx, downstreamRes); err != nil {
		t.Fatalf("token exchange through the internal address: %v", err)
	}
}

func TestRewriteOriginsLeavesOtherOriginsAlone(t *testing.T) {
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer other.Close()
	rt, err := RewriteOrigins(nil, map[string]string{"https://as.example.com": "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Get(other.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatal("a request for another origin did not reach it")
	}
	// https://as.example.com and https://as.example.com:443 are one origin.
	if _, err := (&http.Client{Transport: rt}).Get("https://as.example.com:443/"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("the default port was not taken as the same origin: %v", err)
	}
}

func TestRewriteOriginsRefusesWhatIsNotAnOrigin(t *testing.T) {
	for _, routes := range []map[string]string{
		{"https://as.example.com/path": "http://authserver:9000"},
		{"https://as.example.com": "http://authserver:9000/x?y"},
		{"as.example.com": "http://authserver:9000"},
		{"https://as.example.com": "ftp://authserver"},
		{"https://u:p@as.example.com": "http://authserver:9000"},
	} {
		if _, err := RewriteOrigins(nil, routes); err == nil {
			t.Errorf("RewriteOrigins(%v) accepted", routes)
		}
	}
}

// TestRewriteOriginsKeepsThePublicHostOfARequestWithoutHost: a request
// built without Host (only its URL) reaches the internal origin with the
// public host in its Host header.
func TestRewriteOriginsKeepsThePublicHostOfARequestWithoutHost(t *testing.T) {
	var host atomic.Value
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { host.Store(r.Host) }))
	defer inner.Close()
	rt, err := RewriteOrigins(nil, map[string]string{"http://as.public.invalid:9000": inner.URL})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://as.public.invalid:9000/x")
	resp, err := rt.RoundTrip(&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h, _ := host.Load().(string); h != "as.public.invalid:9000" {
		t.Fatalf("the internal origin saw Host %q; want the public host", h)
	}
}
