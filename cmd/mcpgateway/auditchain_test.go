package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const chainKey = "audit-chain-key-0123456789abcdef-0123"

// verifyCmd runs `mcpgateway audit verify` and returns its output and
// error.
func verifyCmd(t *testing.T, config string, logs ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"audit", "verify", "--config", config}, logs...), &out, &errb)
	return out.String() + errb.String(), err
}

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "mcpgateway.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The audit lines of real calls through the gateway carry a chain that
// audit verify accepts, and a line edited afterwards is named.
func TestGatewayAuditLinesAreChained(t *testing.T) {
	s := newStack(t, false, strings.Replace(baseConfig, "audit: {format: json}", "audit: {format: json, chain_key: "+chainKey+"}", 1))
	ctx := context.Background()
	cs := s.connect(t, s.token(t, "user-bot"))
	for _, text := range []string{"one", "two"} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	conf := writeConfig(t, dir, "resource: https://mcp.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:3001/mcp\naudit: {chain_key: "+chainKey+"}\n")
	log := filepath.Join(dir, "audit.log")
	// Other log lines interleaved are ignored.
	text := "time=x level=INFO msg=other\n" + s.audit.String()
	if err := os.WriteFile(log, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	n := strings.Count(s.audit.String(), "\n")
	out, err := verifyCmd(t, conf, log)
	if err != nil || !strings.HasPrefix(out, "ok "+itoa(n)+"\n") {
		t.Fatalf("untouched: %v %q (want ok %d)", err, out, n)
	}
	if !strings.Contains(s.audit.String(), `"event":"audit.chain.start"`) || !strings.Contains(s.audit.String(), `"tool":"echo"`) {
		t.Fatalf("audit: %s", s.audit.String())
	}
	edited := strings.Replace(text, `"tool":"echo"`, `"tool":"ohce"`, 1)
	line := strings.Count(text[:strings.Index(text, `"tool":"echo"`)], "\n") + 1
	if err := os.WriteFile(log, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = verifyCmd(t, conf, log)
	if err == nil || !strings.HasPrefix(out, log+":"+itoa(line)+": changed") {
		t.Fatalf("edited line %d: %v %q", line, err, out)
	}
	// Another key: the first line fails.
	other := writeConfig(t, t.TempDir(), "resource: https://mcp.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:3001/mcp\naudit: {chain_key: "+strings.Repeat("k", 32)+"}\n")
	if err := os.WriteFile(log, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := verifyCmd(t, other, log); err == nil || !strings.HasPrefix(out, log+":2: changed") {
		t.Fatalf("another key: %v %q", err, out)
	}
	// No chain_key: nothing to verify with.
	none := writeConfig(t, t.TempDir(), "resource: https://mcp.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:3001/mcp\n")
	if _, err := verifyCmd(t, none, log); err == nil || !strings.Contains(err.Error(), "chain_key") {
		t.Fatalf("no chain_key: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// ReopenAudit (SIGHUP) after a rotation starts the new file with a line
// naming the old file's last chain value: the pair verifies, and so does
// the new file alone.
func TestGatewayAuditFileReopensWithTheChain(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.log")
	text := "resource: https://mcp.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:3001/mcp\naudit: {file: " + log + ", chain_key: " + chainKey + "}\n"
	conf := writeConfig(t, dir, text)
	cfg, err := ParseConfig([]byte(text), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGateway(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	refused := func(n int) {
		for range n {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "https://mcp.example/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
			req.Header.Set("Content-Type", "application/json")
			g.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("no token: %d", rec.Code)
			}
		}
	}
	refused(3)
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	if err := g.ReopenAudit(); err != nil {
		t.Fatal(err)
	}
	refused(2)
	if out, err := verifyCmd(t, conf, log+".1", log); err != nil || !strings.HasPrefix(out, "ok 7\n") {
		t.Fatalf("the pair: %v %q", err, out)
	}
	if out, err := verifyCmd(t, conf, log); err != nil || !strings.HasPrefix(out, "ok 3\n") {
		t.Fatalf("the new file alone: %v %q", err, out)
	}
	if out, err := verifyCmd(t, conf, log, log+".1"); err == nil || !strings.HasPrefix(out, log+".1:1: ") {
		t.Fatalf("the files in the wrong order: %v %q", err, out)
	}
}
