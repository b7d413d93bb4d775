package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/internal/syncbuf"
)

// /readyz answers 200 while storage answers; with the storage gone it
// answers 503 "not ready: storage unavailable" and logs the cause, which
// the answer never shows.
func TestReadyzReportsAndLogsAStorageOutage(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, stackConfig("http://127.0.0.1:9000", "127.0.0.1:9000", "memory"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncbuf.Buffer{}
	cfg := loadTestConfig(t, cfgPath, strings.Repeat("k3y-m4t3r1al-", 4))
	s, err := build(ctx, cfg, true, slog.New(slog.NewTextHandler(logs, nil)), env{lookup: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	get := func() (int, string) {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get(); status != http.StatusOK || body != "ok\n" {
		t.Fatalf("ready server: %d %q", status, body)
	}
	s.store.Close()
	status, body := get()
	if status != http.StatusServiceUnavailable || body != "not ready: storage unavailable\n" {
		t.Fatalf("storage closed: %d %q, want 503 \"not ready: storage unavailable\"", status, body)
	}
	if l := logs.String(); !strings.Contains(l, `msg="readiness check failed"`) || !strings.Contains(l, `err="storage: storage: unavailable`) {
		t.Fatalf("the cause is not logged:\n%s", l)
	}
}
