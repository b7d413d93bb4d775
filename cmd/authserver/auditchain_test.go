package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The audit lines of a running server carry a chain under its secret's
// key, also when tokens are issued concurrently; audit verify accepts the
// log with its other lines interleaved, names a line edited afterwards,
// and refuses the chain under another secret.
func TestServeChainsItsAuditLines(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	cfg := writeConfig(t, dir, stackConfig(issuer, addr, "memory"))
	lookup := func(secret string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			switch k {
			case "AUTHSERVER_SECRET":
				return secret, true
			case "CI_BOT_SECRET":
				return botSecret, true
			}
			return "", false
		}
	}
	logs, stop := serveInProcess(t, cfg, issuer, lookup(testSecret))
	checkClientCredentials(t, issuer)
	md := discover(t, issuer)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = clientToken(t, md, "ci-bot", botSecret, nil, "mcp:tools")
		}()
	}
	wg.Wait()
	stop()
	text := logs.String()
	chained := strings.Count(text, " chain=")
	if chained < 10 || !strings.Contains(text, "event=token.issued") || !strings.Contains(text, "msg=access") {
		t.Fatalf("%d chained lines:\n%s", chained, text)
	}
	log := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(log, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	verify := func(secret string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"--config", cfg, "audit", "verify", log}, env{stdout: &out, stderr: &errb, lookup: lookup(secret)})
		return code, out.String() + errb.String()
	}
	if code, out := verify(testSecret); code != 0 || !strings.HasPrefix(out, "ok "+strconv.Itoa(chained)+"\n") {
		t.Fatalf("untouched: %d %q, want ok %d", code, out, chained)
	}
	if code, out := verify("another-secret-another-secret-0123456789"); code != 1 || !strings.Contains(out, ": changed: ") {
		t.Fatalf("another secret: %d %q", code, out)
	}
	i := strings.Index(text, "event=token.issued")
	line := strings.Count(text[:i], "\n") + 1
	edited := text[:i] + strings.Replace(text[i:], "client_id=ci-bot", "client_id=ci-bot2", 1)
	if err := os.WriteFile(log, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := verify(testSecret); code != 1 || !strings.HasPrefix(out, log+":"+strconv.Itoa(line)+": changed: ") {
		t.Fatalf("line %d edited: %d %q", line, code, out)
	}
}

// serveInProcess runs serve with the configuration file cfg and lookup,
// its stderr in logs, until its /healthz answers; stop ends it (as SIGTERM
// does) and fails t unless it exits 0.
func serveInProcess(t *testing.T, cfg, issuer string, lookup func(string) (string, bool)) (logs *syncBuffer, stop func()) {
	t.Helper()
	logs = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--config", cfg, "serve"}, env{stdout: io.Discard, stderr: logs, lookup: lookup})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(issuer + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the server did not start:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return logs, func() {
		t.Helper()
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, logs)
		}
	}
}
