package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRegistrationDisabledLeavesTheEndpointOut runs authserver with
// registration.enabled: false: the metadata has no registration_endpoint (so
// MCP clients go on to CIMD or pre-registration instead of trying DCR), and
// /register is not served; with registration on, both are there.
func TestRegistrationDisabledLeavesTheEndpointOut(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		name := map[bool]string{false: "disabled", true: "enabled"}[enabled]
		t.Run(name, func(t *testing.T) {
			p := startMany(t, 1, func(issuer, listen string) string {
				cfg := stackConfig(issuer, listen, "memory")
				if !enabled {
					cfg = strings.Replace(cfg, "registration:\n", "registration:\n  enabled: false\n", 1)
				}
				return cfg
			})[0]
			defer p.stop(t)
			issuer := p.issuer
			var raw map[string]json.RawMessage
			getJSON(t, issuer+"/.well-known/oauth-authorization-server", &raw)
			_, has := raw["registration_endpoint"]
			if has != enabled {
				t.Errorf("registration_endpoint in the metadata: %v, want %v", has, enabled)
			}
			resp, err := http.Post(issuer+"/register", "application/json", strings.NewReader(`{"redirect_uris":["http://127.0.0.1:7777/cb"],"token_endpoint_auth_method":"none"}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if enabled && resp.StatusCode != http.StatusCreated {
				t.Errorf("POST /register with registration on: %s %s", resp.Status, body)
			}
			if !enabled && resp.StatusCode != http.StatusNotFound {
				t.Errorf("POST /register with registration off: %s %s, want 404", resp.Status, body)
			}
		})
	}
}

// TestRegistrationHonoursApplicationTypeAndAuthMethod registers against the
// running binary: application_type is echoed and read back (RFC 7592) as
// stored, the token_endpoint_auth_method asked for is granted, and /token
// then accepts exactly that method.
func TestRegistrationHonoursApplicationTypeAndAuthMethod(t *testing.T) {
	p := startMany(t, 1, func(issuer, listen string) string { return stackConfig(issuer, listen, "memory") })[0]
	defer p.stop(t)
	register := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(p.issuer+"/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	token := func(id, secret string, basic bool) (int, string) {
		t.Helper()
		form := "grant_type=client_credentials&scope=mcp%3Atools"
		if !basic {
			form += "&client_id=" + id + "&client_secret=" + secret
		}
		req, _ := http.NewRequest(http.MethodPost, p.issuer+"/token", strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth(id, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error       string `json:"error"`
			AccessToken string `json:"access_token"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode == http.StatusOK && body.AccessToken == "" {
			t.Errorf("/token answered 200 without an access token")
		}
		return resp.StatusCode, body.Error
	}

	for _, tc := range []struct {
		method, appType string
	}{
		{"client_secret_post", "web"}, // what claude.ai asks for
		{"client_secret_basic", "web"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			code, m := register(`{"client_name":"backend","redirect_uris":["https://app.example/cb"],"grant_types":["authorization_code","client_credentials"],` +
				`"token_endpoint_auth_method":"` + tc.method + `","application_type":"` + tc.appType + `"}`)
			if code != http.StatusCreated {
				t.Fatalf("register: %d %v", code, m)
			}
			if m["token_endpoint_auth_method"] != tc.method || m["application_type"] != tc.appType {
				t.Fatalf("registered %v / %v, want %s / %s", m["token_endpoint_auth_method"], m["application_type"], tc.method, tc.appType)
			}
			id, _ := m["client_id"].(string)
			secret, _ := m["client_secret"].(string)
			post := tc.method == "client_secret_post"
			if got, code := token(id, secret, !post); got != http.StatusOK {
				t.Errorf("/token with the registered method: %d %s", got, code)
			}
			// RFC 6749 §5.2: a client authenticating by a method it did not
			// register is invalid_client.
			if got, code := token(id, secret, post); got != http.StatusUnauthorized || code != "invalid_client" {
				t.Errorf("/token with the other method: %d %q, want 401 invalid_client", got, code)
			}
			// RFC 7592 read: what is stored.
			req, _ := http.NewRequest(http.MethodGet, m["registration_client_uri"].(string), nil)
			req.Header.Set("Authorization", "Bearer "+m["registration_access_token"].(string))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var read map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&read)
			resp.Body.Close()
			if read["application_type"] != tc.appType || read["token_endpoint_auth_method"] != tc.method {
				t.Errorf("read back %v / %v", read["application_type"], read["token_endpoint_auth_method"])
			}
		})
	}
	t.Run("a loopback public client defaults to native", func(t *testing.T) {
		code, m := register(`{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`)
		if code != http.StatusCreated || m["application_type"] != "native" || m["token_endpoint_auth_method"] != "none" {
			t.Errorf("%d %v / %v, want 201 native / none", code, m["application_type"], m["token_endpoint_auth_method"])
		}
	})
	t.Run("an unknown application_type is refused", func(t *testing.T) {
		code, m := register(`{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none","application_type":"desktop"}`)
		if code != http.StatusBadRequest || m["error"] != "invalid_client_metadata" {
			t.Errorf("%d %v, want 400 invalid_client_metadata", code, m["error"])
		}
	})
}
