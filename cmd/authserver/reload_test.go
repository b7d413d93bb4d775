package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
)

// Reloading while requests run swaps the configuration without a failed
// request (run with -race: the swap is the only shared write).
func TestReloadWhileServing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, "authserver.yaml")
	base := stackConfig("http://127.0.0.1:1", "127.0.0.1:1", "memory")
	if err := os.WriteFile(path, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"AUTHSERVER_SECRET": testSecret, "CI_BOT_SECRET": botSecret}[k]
		return v, ok
	}
	e := env{stdout: io.Discard, stderr: io.Discard, lookup: lookup}
	cfg, err := config.Load(path, lookup)
	if err != nil {
		t.Fatal(err)
	}
	s, err := build(ctx, cfg, false, discardLogger(), e)
	if err != nil {
		t.Fatal(err)
	}
	defer s.store.Close()
	srv := httptest.NewServer(s.handler)
	defer srv.Close()

	var failed atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", srv.URL+"/token", strings.NewReader("grant_type=client_credentials&scope=mcp:tools"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.SetBasicAuth("ci-bot", botSecret)
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
				}
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	withBot := strings.Replace(base, "exchange:\n", "  - id: new-bot\n    secret: new-bot-secret-0123456789\n    grant_types: [client_credentials]\nexchange:\n", 1)
	for i := range 6 {
		text := base
		if i%2 == 0 {
			text = withBot
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.reload(ctx, path, e); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d requests failed during reloads", n)
	}
	// The last file (without new-bot) is the one in force.
	if s.current().cfg.Clients[len(s.current().cfg.Clients)-1].ID == "new-bot" {
		t.Fatal("the last reload did not take")
	}
}
