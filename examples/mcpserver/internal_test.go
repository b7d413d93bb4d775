package main

import (
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// recorder is a stand-in for a server at an internal address: it records
// the paths and Host headers it is asked for and answers 404.
type recorder struct {
	mu    sync.Mutex
	paths []string
	hosts []string
}

func newRecorder(t *testing.T) (*recorder, *httptest.Server) {
	r := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.hosts = append(r.hosts, req.Host)
		r.mu.Unlock()
		http.NotFound(w, req)
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *recorder) saw(path, host string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.paths {
		if p == path && r.hosts[i] == host {
			return true
		}
	}
	return false
}

// With --issuer-internal the token verifier fetches the AS metadata from the
// internal address, under the public issuer's host; with
// --downstream-internal the downstream transport goes there too.
func TestInternalAddressesCarryTheASAndDownstreamTraffic(t *testing.T) {
	as, asSrv := newRecorder(t)
	api, apiSrv := newRecorder(t)
	cfg := config{
		resource: "http://127.0.0.1:8080/mcp", issuer: "http://as.public.invalid:9000",
		downstream: "http://api.public.invalid:8081/api", clientID: "example-mcpserver", clientSecret: "s3cret",
		issuerInternal: asSrv.URL, downstreamInternal: apiSrv.URL,
	}
	h, err := newServer(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// A well-formed JWS with an unknown key makes the verifier fetch the
	// AS's metadata.
	b64 := base64.RawURLEncoding.EncodeToString
	token := b64([]byte(`{"alg":"ES256","typ":"at+jwt","kid":"k1"}`)) + "." + b64([]byte(`{"sub":"x"}`)) + "." + b64(make([]byte, 64))
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if !as.saw("/.well-known/oauth-authorization-server", "as.public.invalid:9000") {
		t.Fatalf("the AS at its internal address saw %v %v", as.paths, as.hosts)
	}

	_, downstream, err := reach(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: downstream}).Get("http://api.public.invalid:8081/api/report")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !api.saw("/api/report", "api.public.invalid:8081") {
		t.Fatalf("the downstream API at its internal address saw %v", api.paths)
	}
}

func TestInternalAddressesAreOptional(t *testing.T) {
	c, rt, err := reach(config{issuer: unreachableIssuer})
	if err != nil || c != nil || rt != nil {
		t.Fatalf("%v %v %v", c, rt, err)
	}
	if _, _, err := reach(config{issuer: unreachableIssuer, issuerInternal: "authserver:9000"}); err == nil {
		t.Fatal("an internal address that is not an origin was accepted")
	}
}
