package rsmiddleware

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

// codedUpstream answers every POST with the tools list in a body coded by
// coding ("" for none); with flush it flushes after the header.
func codedUpstream(coding string, flush bool) http.Handler {
	return typedUpstream("application/json", coding, flush)
}

// typedUpstream is codedUpstream with the answer's Content-Type ct.
func typedUpstream(ct, coding string, flush bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		msg := `{"jsonrpc":"2.0","id":1,"result":` + toolsResult + `}`
		if bytes.HasPrefix(in, []byte("[")) {
			msg = "[" + msg + "]"
		}
		body := []byte(msg)
		if coding == "gzip" {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(body)
			zw.Close()
			body = b.Bytes()
		}
		w.Header().Set("Content-Type", ct)
		if coding != "" {
			w.Header().Set("Content-Encoding", coding)
		}
		w.WriteHeader(http.StatusOK)
		if flush {
			w.(http.Flusher).Flush()
		}
		w.Write(body)
	})
}

func postCoded(t *testing.T, fx *filterFixture, token, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fx.srv.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Accept-Encoding", "gzip") // no transparent decompression by the client
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
		b, _ = io.ReadAll(zr)
	}
	return resp, string(b)
}

// A content-coded answer is refused 502 only when it may have to be cut:
// for a caller lacking a tool's scope, whether the list request comes
// after a notification in a batch or the server flushes before its body;
// a caller with every scope gets it as sent, and identity is no coding
// (RFC 9110 §8.4.1), so such an answer is trimmed as usual. Without an audit, which reads every answer it can, so that only the
// trimming decides.
func TestMCPFilterContentCodingEdges(t *testing.T) {
	noAudit := func(c *MCPFilterConfig) { c.Audit = nil }
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	t.Run("a batch with a notification before the list request", func(t *testing.T) {
		fx := newFilterFixture(t, codedUpstream("gzip", false), noAudit)
		resp, body := postCoded(t, fx, fx.token("mcp:tools"), `[{"jsonrpc":"2.0","method":"notifications/initialized"},`+list+`]`)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "admin_stats") {
			t.Errorf("%d %s, want 502 without admin_stats", resp.StatusCode, body)
		}
	})
	t.Run("a server that flushes before its body", func(t *testing.T) {
		fx := newFilterFixture(t, codedUpstream("gzip", true), noAudit)
		resp, body := postCoded(t, fx, fx.token("mcp:tools"), list)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "admin_stats") {
			t.Errorf("%d %s, want 502 without admin_stats", resp.StatusCode, body)
		}
	})
	t.Run("a caller with every scope", func(t *testing.T) {
		fx := newFilterFixture(t, codedUpstream("gzip", false), noAudit)
		resp, body := postCoded(t, fx, fx.token("mcp:tools mcp:admin mcp:read"), list)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(body, "admin_stats") {
			t.Errorf("%d %v %s, want the server's gzip answer", resp.StatusCode, resp.Header, body)
		}
	})
	t.Run("Content-Encoding identity", func(t *testing.T) {
		fx := newFilterFixture(t, codedUpstream("identity", false), noAudit)
		resp, body := postCoded(t, fx, fx.token("mcp:tools"), list)
		if resp.StatusCode != http.StatusOK || strings.Contains(body, "admin_stats") || !strings.Contains(body, `"echo"`) {
			t.Errorf("%d %s, want 200 with echo and without admin_stats", resp.StatusCode, body)
		}
	})
	t.Run("a text/plain answer to a batch with a notification before the list request", func(t *testing.T) {
		fx := newFilterFixture(t, typedUpstream("text/plain", "", false), noAudit)
		resp, body := postCoded(t, fx, fx.token("mcp:tools"), `[{"jsonrpc":"2.0","method":"notifications/initialized"},`+list+`]`)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "admin_stats") {
			t.Errorf("%d %s, want 502 without admin_stats", resp.StatusCode, body)
		}
	})
	t.Run("a text/plain answer to a notification named like a list method", func(t *testing.T) {
		fx := newFilterFixture(t, typedUpstream("text/plain", "", false), noAudit)
		resp, body := postCoded(t, fx, fx.token("mcp:tools"), `{"jsonrpc":"2.0","method":"tools/list"}`)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "admin_stats") {
			t.Errorf("%d %s, want the answer as sent: a notification gets no list", resp.StatusCode, body)
		}
	})
	t.Run("a GET stream of a caller with every scope, with an audit", func(t *testing.T) {
		// No request of the stream is known, so the audit reads nothing
		// of it and nothing is to be cut: the stream goes out as sent.
		fx := newFilterFixture(t, typedUpstream("text/event-stream", "gzip", false), nil)
		req, _ := http.NewRequest(http.MethodGet, fx.srv.URL, nil)
		req.Header.Set("Authorization", "Bearer "+fx.token("mcp:tools mcp:admin mcp:read"))
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("%d %v, want the server's gzip stream", resp.StatusCode, resp.Header)
		}
	})
}
