package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// unreachableIssuer is an issuer nothing listens on: these tests exercise
// what the API decides without the authorization server (the e2e tests run it
// against the real one).
const unreachableIssuer = "http://127.0.0.1:1"

func TestNewAPIRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
	}{
		{"a resource without a path is refused", config{resource: "http://127.0.0.1:8081", issuer: unreachableIssuer}},
		{"a relative resource is refused", config{resource: "/api", issuer: unreachableIssuer}},
		{"a resource with a fragment is refused", config{resource: "http://127.0.0.1:8081/api#x", issuer: unreachableIssuer}},
		{"a missing issuer is refused", config{resource: "http://127.0.0.1:8081/api"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newAPI(tc.cfg, slog.New(slog.DiscardHandler)); err == nil {
				t.Fatalf("newAPI(%+v) succeeded", tc.cfg)
			}
		})
	}
}

func newTestAPI(t *testing.T) *httptest.Server {
	t.Helper()
	// The resource must be the URL the API is reached at, so start the
	// listener first and build the handler for its address.
	srv := httptest.NewUnstartedServer(nil)
	resource := "http://" + srv.Listener.Addr().String() + "/api"
	h, err := newAPI(config{resource: resource, issuer: unreachableIssuer}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestAPIChallengesAndRecordsWithoutKeepingTokens(t *testing.T) {
	srv := newTestAPI(t)
	prmURL := srv.URL + "/.well-known/oauth-protected-resource/api"
	const token = "not-a-jwt-but-a-valid-b64token"

	tests := []struct {
		name       string
		path       string
		authz      string
		wantStatus []int
		wantHeader string
	}{
		{"a request without a token gets 401 naming the metadata", "/api/report", "", []int{401}, `resource_metadata="` + prmURL + `"`},
		{"a malformed token gets 401 invalid_token", "/api/report", "Bearer " + token, []int{401}, `error="invalid_token"`},
		{"a token in the query string is refused", "/api/report?access_token=" + token, "", []int{400}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
			if tc.authz != "" {
				req.Header.Set("Authorization", tc.authz)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			ok := false
			for _, s := range tc.wantStatus {
				ok = ok || resp.StatusCode == s
			}
			if !ok {
				t.Errorf("status %d, want one of %v", resp.StatusCode, tc.wantStatus)
			}
			if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, tc.wantHeader) {
				t.Errorf("WWW-Authenticate %q lacks %q", got, tc.wantHeader)
			}
		})
	}

	t.Run("the record holds a fingerprint of the token, never the token", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/debug/seen")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), token) {
			t.Fatalf("/debug/seen contains the raw token: %s", body)
		}
		var records []Seen
		if err := json.Unmarshal(body, &records); err != nil {
			t.Fatal(err)
		}
		if len(records) != 3 {
			t.Fatalf("%d records, want 3: %s", len(records), body)
		}
		sum := sha256.Sum256([]byte(token))
		if records[1].TokenSHA != hex.EncodeToString(sum[:]) || records[1].Status != 401 {
			t.Errorf("record of the bad token = %+v", records[1])
		}
		for _, r := range records {
			if r.Status == 200 || r.Subject != "" {
				t.Errorf("an unauthenticated request was recorded as accepted: %+v", r)
			}
		}
	})

	t.Run("the protected resource metadata names the API and its issuer", func(t *testing.T) {
		var prm struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
		}
		resp, err := http.Get(prmURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&prm); err != nil {
			t.Fatal(err)
		}
		if prm.Resource != srv.URL+"/api" || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != unreachableIssuer {
			t.Errorf("PRM = %+v", prm)
		}
		if len(prm.ScopesSupported) != 1 || prm.ScopesSupported[0] != ScopeReportsRead {
			t.Errorf("scopes_supported = %v", prm.ScopesSupported)
		}
	})

	t.Run("the health check answers without a token", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("healthz: %s", resp.Status)
		}
	})
}
