package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// unreachableIssuer: these tests cover what the server decides on its own;
// the e2e tests run it against the real authorization server.
const unreachableIssuer = "http://127.0.0.1:1"

func TestNewServerRefusesBadFlags(t *testing.T) {
	good := config{resource: "http://127.0.0.1:8080/mcp", issuer: unreachableIssuer, downstream: "http://127.0.0.1:8081/api", clientID: "example-mcpserver", clientSecret: "s3cret"}
	tests := []struct {
		name string
		edit func(*config)
	}{
		{"a missing issuer is refused", func(c *config) { c.issuer = "" }},
		{"a relative resource is refused", func(c *config) { c.resource = "/mcp" }},
		{"a downstream without the exchange secret is refused", func(c *config) { c.clientSecret = "" }},
		{"a downstream without a client id is refused", func(c *config) { c.clientID = "" }},
		{"a malformed downstream is refused", func(c *config) { c.downstream = "not a url" }},
	}
	if _, err := newServer(good, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("the good config is refused: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			if _, err := newServer(c, slog.New(slog.DiscardHandler)); err == nil {
				t.Fatalf("newServer(%+v) succeeded", c)
			}
		})
	}
}

func TestServerChallengesWithoutAToken(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	resource := "http://" + srv.Listener.Addr().String() + "/mcp"
	h, err := newServer(config{resource: resource, issuer: unreachableIssuer, downstream: "http://127.0.0.1:1/api", clientID: "example-mcpserver", clientSecret: "s3cret"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	defer srv.Close()

	t.Run("an unauthenticated initialize gets 401 with metadata URL and base scope", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
		req, _ := http.NewRequest(http.MethodPost, resource, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != 401 || !strings.Contains(ch, `resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`) || !strings.Contains(ch, "mcp:tools") {
			t.Errorf("%d %q", resp.StatusCode, ch)
		}
	})

	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		t.Run("the metadata is served at "+path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var prm struct {
				Resource        string   `json:"resource"`
				ScopesSupported []string `json:"scopes_supported"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&prm); err != nil {
				t.Fatal(err)
			}
			if prm.Resource != resource || strings.Join(prm.ScopesSupported, " ") != "mcp:tools mcp:admin" {
				t.Errorf("PRM = %+v", prm)
			}
		})
	}
}

func TestMergeValuesTakesValuesFromTheRequestAndCancellationFromTheCall(t *testing.T) {
	type key struct{}
	values := context.WithValue(context.Background(), key{}, "from request")
	call, cancel := context.WithCancel(context.Background())
	m := mergeValues(call, values)
	if m.Value(key{}) != "from request" {
		t.Errorf("value = %v", m.Value(key{}))
	}
	cancel()
	if m.Err() == nil {
		t.Errorf("the merged context was not cancelled with the call")
	}
}
