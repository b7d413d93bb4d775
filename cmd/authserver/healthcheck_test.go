package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// asServer answers the given paths with the given statuses, and 404
// otherwise; it counts the requests per path.
func asServer(t *testing.T, routes map[string]int) (*httptest.Server, map[string]*atomic.Int32) {
	t.Helper()
	hits := map[string]*atomic.Int32{}
	for p := range routes {
		hits[p] = &atomic.Int32{}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, ok := routes[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		hits[r.URL.Path].Add(1)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

func TestHealthcheck(t *testing.T) {
	t.Run("passes when /readyz answers 200", func(t *testing.T) {
		srv, hits := asServer(t, map[string]int{"/readyz": 200, "/healthz": 200})
		code, out, errOut := runCLI(t, "", nil, "healthcheck", "--url", srv.URL+"/readyz")
		if code != 0 || !strings.Contains(out, "/readyz answered 200") || hits["/healthz"].Load() != 0 {
			t.Fatalf("exit %d %q %q", code, out, errOut)
		}
	})
	t.Run("probes the listen address, a wildcard host on loopback", func(t *testing.T) {
		srv, hits := asServer(t, map[string]int{"/readyz": 200})
		u, _ := url.Parse(srv.URL)
		code, out, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_LISTEN": "0.0.0.0:" + u.Port()}, "healthcheck")
		if code != 0 || hits["/readyz"].Load() != 1 {
			t.Fatalf("exit %d %q %q", code, out, errOut)
		}
	})
	t.Run("falls back to /healthz when there is no /readyz", func(t *testing.T) {
		srv, hits := asServer(t, map[string]int{"/healthz": 200})
		u, _ := url.Parse(srv.URL)
		code, out, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_LISTEN": ":" + u.Port()}, "healthcheck")
		if code != 0 || hits["/healthz"].Load() != 1 || !strings.Contains(out, "/healthz answered 200") {
			t.Fatalf("exit %d %q %q", code, out, errOut)
		}
	})
	t.Run("fails when /readyz answers 503, without asking /healthz", func(t *testing.T) {
		srv, hits := asServer(t, map[string]int{"/readyz": 503, "/healthz": 200})
		u, _ := url.Parse(srv.URL)
		code, _, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_LISTEN": u.Host}, "healthcheck")
		if code != 1 || !strings.Contains(errOut, "/readyz answered 503") || hits["/healthz"].Load() != 0 {
			t.Fatalf("exit %d %q", code, errOut)
		}
	})
	t.Run("fails when /healthz answers 503 too", func(t *testing.T) {
		srv, _ := asServer(t, map[string]int{"/healthz": 503})
		u, _ := url.Parse(srv.URL)
		code, _, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_LISTEN": u.Host}, "healthcheck")
		if code != 1 || !strings.Contains(errOut, "/healthz answered 503") {
			t.Fatalf("exit %d %q", code, errOut)
		}
	})
	t.Run("fails when nothing listens", func(t *testing.T) {
		srv, _ := asServer(t, nil)
		addr := srv.Listener.Addr().String()
		srv.Close()
		code, _, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_LISTEN": addr}, "healthcheck")
		if code != 1 || !strings.Contains(errOut, "connection refused") {
			t.Fatalf("exit %d %q", code, errOut)
		}
	})
	t.Run("reads listen and the issuer's path from the configuration file", func(t *testing.T) {
		srv, hits := asServer(t, map[string]int{"/tenant/readyz": 200})
		u, _ := url.Parse(srv.URL)
		p := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(p, []byte("issuer: https://auth.example.com/tenant\nlisten: 127.0.0.1:"+u.Port()+
			"\nstorage: memory\nresources:\n  - uri: https://mcp.example.com\n    scopes: [a]\n"), 0o600)
		code, out, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_CONFIG": p}, "healthcheck")
		if code != 0 || hits["/tenant/readyz"].Load() != 1 {
			t.Fatalf("exit %d %q %q", code, out, errOut)
		}
	})
}

// The probe against the real server, as the container image runs it.
func TestHealthcheckBinaryAgainstTheServer(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	env := []string{"AUTHSERVER_LISTEN=" + addr, "AUTHSERVER_ISSUER=http://" + addr, "AUTHSERVER_STORAGE=memory"}
	p := start(t, dir, "http://"+addr, env)
	if out, errOut, err := runBin(t, dir, env, "", "healthcheck"); err != nil {
		t.Fatalf("healthy server: %v %q %q", err, out, errOut)
	}
	p.stop(t)
	if _, errOut, err := runBin(t, dir, env, "", "healthcheck"); err == nil {
		t.Fatal("healthcheck passed with the server stopped")
	} else if !strings.Contains(errOut, "healthcheck:") || !strings.Contains(errOut, "connection refused") {
		t.Fatalf("stderr %q", errOut)
	}
}
