package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mcpauth/mcpauth/internal/otlptest"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, serve exports a server span per
// request that continues the caller's traceparent, with no secret or token
// in it, flushed at exit; the access and audit lines of the request carry
// its trace_id and span_id, inside the audit chain (audit verify accepts
// the log).
func TestServeTracesRequestsAndLogsTheirIDs(t *testing.T) {
	rc := otlptest.New(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	cfg := writeConfig(t, dir, stackConfig(issuer, addr, "memory"))
	lookup := func(k string) (string, bool) {
		switch k {
		case "AUTHSERVER_SECRET":
			return testSecret, true
		case "CI_BOT_SECRET":
			return botSecret, true
		case "OTEL_EXPORTER_OTLP_ENDPOINT":
			return rc.URL(), true
		}
		return "", false
	}
	logs, stop := serveInProcess(t, cfg, issuer, lookup)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"mcp:tools"}}
	req, _ := http.NewRequest(http.MethodPost, issuer+"/token?probe=query-value-never-in-a-span", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
	req.SetBasicAuth("ci-bot", botSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.AccessToken == "" {
		t.Fatalf("token: %d %s", resp.StatusCode, body)
	}
	stop()
	// Exported at exit, without waiting for the batch delay.
	spans := rc.Spans()
	var server *otlptest.Span
	for i, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Attrs["url.path"] == "/token" {
			server = &spans[i]
		}
	}
	if server == nil {
		t.Fatalf("no /token server span:\n%s", otlptest.Describe(spans))
	}
	if server.Service != "authserver" || server.TraceID != traceID || server.Parent != parentID ||
		server.Attrs["http.request.method"] != "POST" || server.Attrs["http.response.status_code"] != "200" {
		t.Errorf("the /token span: %+v", *server)
	}
	for _, s := range spans {
		for _, v := range s.Strings {
			for _, secret := range []string{botSecret, testSecret, tr.AccessToken, "query-value-never-in-a-span"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q holds %.10s...", s.Name, secret)
				}
			}
		}
	}
	ids := "trace_id=" + traceID + " span_id=" + server.SpanID
	var access, audit bool
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "msg=access") && strings.Contains(line, "path=/token") {
			access = strings.Contains(line, ids)
		}
		if strings.Contains(line, "event=token.issued") {
			audit = strings.Contains(line, ids) && strings.Contains(line, " chain=")
		}
	}
	if !access || !audit {
		t.Fatalf("the access (%v) and audit (%v) lines of /token do not carry %s:\n%s", access, audit, ids, logs)
	}
	log := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(log, []byte(logs.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--config", cfg, "audit", "verify", log}, env{stdout: &out, stderr: &errb, lookup: lookup}); code != 0 {
		t.Fatalf("audit verify: %d %s %s", code, out.String(), errb.String())
	}
}
