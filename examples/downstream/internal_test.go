package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// With --issuer-internal the API reaches the AS at that address under the
// public issuer's host.
func TestIssuerInternalCarriesTheASTraffic(t *testing.T) {
	var gotPath, gotHost string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotHost = r.URL.Path, r.Host
	}))
	defer srv.Close()
	c, err := asClient(config{issuer: "http://as.public.invalid:9000", issuerInternal: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get("http://as.public.invalid:9000/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if gotPath != "/.well-known/oauth-authorization-server" || gotHost != "as.public.invalid:9000" {
		t.Fatalf("internal address saw %q with Host %q", gotPath, gotHost)
	}
	if c, err := asClient(config{issuer: unreachableIssuer}); err != nil || c != nil {
		t.Fatalf("without --issuer-internal: %v %v", c, err)
	}
}
