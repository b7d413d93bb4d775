package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/storage/memory"
)

const (
	testSecret = "0123456789abcdef0123456789abcdef-admin-test"
	opsSecret  = "ops-bot-secret-0123456789"
	mcpURI     = "https://mcp.example.com/mcp"
)

type fixture struct {
	issuer, adminURL string
	audit            *bytes.Buffer
	store            *memory.Store
	ops              *ops.Ops
}

// start runs a real AS (memory storage) whose admin resource offers, next
// to admin, a scope "audit", so that tokens for the admin resource without
// admin exist; and the admin API in front of it on another listener.
func start(t *testing.T) *fixture {
	t.Helper()
	asSrv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + asSrv.Listener.Addr().String()
	adminResource := issuer + "/admin"
	store := memory.New()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, err := as.New(ctx, as.Config{
		Issuer: issuer,
		Resources: []as.Resource{
			{URI: mcpURI, Scopes: []string{"mcp:tools"}, Default: true},
			{URI: adminResource, Scopes: []string{"admin", "audit"}},
		},
		Clients: []as.Client{
			{ID: "ops-bot", Secret: opsSecret, GrantTypes: []string{"client_credentials"}},
			{ID: "stranger", Secret: opsSecret, GrantTypes: []string{"client_credentials"}},
		},
		Store:  store,
		Secret: []byte(testSecret),
	})
	if err != nil {
		t.Fatal(err)
	}
	asSrv.Config.Handler = srv.Handler()
	asSrv.Start()
	t.Cleanup(asSrv.Close)

	verifier, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: issuer, Resource: adminResource})
	if err != nil {
		t.Fatal(err)
	}
	prm, _ := rsmiddleware.ResourceMetadataURL(adminResource)
	guard, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{Verifier: verifier, ResourceMetadataURL: prm, Scopes: rsmiddleware.Scopes{Base: []string{"admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := dcr.New(dcr.Config{Endpoint: issuer + "/register", Store: store, Secret: []byte(testSecret),
		Policy: dcr.Policy{Scopes: []string{"mcp:tools"}, Resources: []string{mcpURI}}})
	if err != nil {
		t.Fatal(err)
	}
	audit := &bytes.Buffer{}
	o := &ops.Ops{Store: store, Registrar: reg, Secret: []byte(testSecret), SigningAlg: "ES256",
		KeyRetention: as.KeyRetention(0, 0), Log: slog.New(slog.NewTextHandler(audit, nil)), Grants: srv}
	h, err := New(Config{Guard: guard, Ops: func() *ops.Ops { return o }, IsAdminClient: func(id string) bool { return id == "ops-bot" }})
	if err != nil {
		t.Fatal(err)
	}
	adminSrv := httptest.NewServer(h)
	t.Cleanup(adminSrv.Close)
	return &fixture{issuer: issuer, adminURL: adminSrv.URL + Prefix, audit: audit, store: store, ops: o}
}

func (f *fixture) token(t *testing.T, id, resource string, scopes ...string) string {
	t.Helper()
	cc := clientcredentials.Config{ClientID: id, ClientSecret: opsSecret, TokenURL: f.issuer + "/token", Scopes: scopes,
		EndpointParams: map[string][]string{"resource": {resource}}, AuthStyle: oauth2.AuthStyleInHeader}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatalf("token for %s: %v", id, err)
	}
	return tok.AccessToken
}

func call(t *testing.T, method, u, token, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, u, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("not JSON: %q", b)
		}
	}
	return resp.StatusCode, resp.Header, out
}

func TestAdminAPIRefusesEveryWrongToken(t *testing.T) {
	f := start(t)
	admin := f.issuer + "/admin"
	cases := []struct {
		name       string
		token      string
		wantStatus int
		wantAuth   string // in WWW-Authenticate
		wantError  string // in the JSON body
	}{
		{"refuses a request without a token", "", 401, "resource_metadata=", ""},
		{"refuses a malformed token", "not-a-jwt", 401, `error="invalid_token"`, ""},
		{"refuses a token for another audience", f.token(t, "ops-bot", mcpURI, "mcp:tools"), 401, `error="invalid_token"`, ""},
		{"refuses a token without the admin scope", f.token(t, "ops-bot", admin, "audit"), 403, `error="insufficient_scope"`, ""},
		{"refuses a token of a client not in admin.clients", f.token(t, "stranger", admin, "admin"), 403, "", "access_denied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, ep := range []struct{ method, path, body string }{
				{"GET", "clients", ""}, {"POST", "clients", `{"client_name":"x","redirect_uris":["https://x.example/cb"]}`},
				{"GET", "keys", ""}, {"POST", "keys", ""}, {"DELETE", "consents?user=alice", ""},
				{"GET", "users", ""}, {"GET", "users/alice", ""}, {"POST", "users/alice/disable", ""}, {"POST", "users/alice/enable", ""},
			} {
				status, hdr, body := call(t, ep.method, f.adminURL+ep.path, tc.token, ep.body)
				if status != tc.wantStatus || !strings.Contains(hdr.Get("WWW-Authenticate"), tc.wantAuth) || (tc.wantError != "" && body["error"] != tc.wantError) {
					t.Errorf("%s %s: %d %q %v", ep.method, ep.path, status, hdr.Get("WWW-Authenticate"), body)
				}
			}
		})
	}
	if f.audit.Len() != 0 {
		t.Fatalf("refused requests changed something:\n%s", f.audit)
	}
	// The right token works and its changes are audited with its client.
	tok := f.token(t, "ops-bot", admin, "admin")
	if status, _, body := call(t, "POST", f.adminURL+"keys", tok, ""); status != 201 || body["signing_kid"] == "" {
		t.Fatalf("rotate with an admin token: %d %v", status, body)
	}
	if !strings.Contains(f.audit.String(), "event=admin.key.rotated admin_client=ops-bot") {
		t.Fatalf("audit: %s", f.audit)
	}
}

func TestAdminAPIRefusesBadBodiesWithoutWriting(t *testing.T) {
	f := start(t)
	tok := f.token(t, "ops-bot", f.issuer+"/admin", "admin")
	stored := func() int {
		_, _, b := call(t, "GET", f.adminURL+"clients", tok, "")
		l, ok := b["clients"].([]any)
		if !ok {
			t.Fatalf("clients is %#v, want a JSON array (also when empty)", b["clients"])
		}
		return len(l)
	}
	before := stored()
	good := `{"client_name":"x","redirect_uris":["https://x.example/cb"]}`
	cases := []struct {
		name, body  string
		contentType string
		wantStatus  int
		wantDesc    string
	}{
		{"a body that is not JSON", "client_name=x", "application/json", 400, "not JSON (at byte 1)"},
		{"a field of the wrong type", `{"client_name":1,"redirect_uris":["https://x.example/cb"]}`, "application/json", 400, "field client_name: expected a string, got a JSON number"},
		{"a list where an object is expected", `[1]`, "application/json", 400, "expected a JSON object, got a JSON array"},
		{"an unknown field", `{"client_name":"x","redirect_uris":["https://x.example/cb"],"scope":"admin"}`, "application/json", 400, `unknown field "scope"`},
		{"a stray brace after the object", good + "}", "application/json", 400, "one JSON object expected"},
		{"a second object", good + good, "application/json", 400, "one JSON object expected"},
		{"a truncated object", `{"client_name":"x"`, "application/json", 400, "the JSON ends before the object does"},
		{"an empty body", " ", "application/json", 400, "the body is empty"},
		{"a body over 64 KiB", `{"client_name":"` + strings.Repeat("a", maxBody) + `","redirect_uris":["https://x.example/cb"]}`, "application/json", 413, "larger than 64 KiB"},
		{"a form body", good, "application/x-www-form-urlencoded", 415, "send application/json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", f.adminURL+"clients", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			desc := body["error_description"]
			if resp.StatusCode != tc.wantStatus || body["error"] != "invalid_request" || !strings.Contains(desc, tc.wantDesc) {
				t.Errorf("%d %v, want %d invalid_request %q", resp.StatusCode, body, tc.wantStatus, tc.wantDesc)
			}
			for _, internal := range []string{"Go ", "ops.", "json:", "NewClient"} {
				if strings.Contains(desc, internal) {
					t.Errorf("the description shows internal text %q: %q", internal, desc)
				}
			}
		})
	}
	if after := stored(); after != before || f.audit.Len() != 0 {
		t.Fatalf("refused bodies wrote something: %d clients -> %d, audit:\n%s", before, after, f.audit)
	}
	// The same request with a right body is accepted.
	if status, _, body := call(t, "POST", f.adminURL+"clients", tok, good); status != 201 || body["client_id"] == "" || stored() != before+1 {
		t.Fatalf("a right body: %d %v", status, body)
	}
}

// A key operation refused because the server's secret unseals none of the
// stored keys answers 409 conflict in the admin API's own words (its prune
// endpoint, not a CLI command or a library's prefixed text) and changes no
// key.
func TestAdminAPIAnswersUnsealableKeysInItsOwnWords(t *testing.T) {
	f := start(t)
	tok := f.token(t, "ops-bot", f.issuer+"/admin", "admin")
	before, err := f.store.ListKeys(context.Background())
	if err != nil || len(before) == 0 {
		t.Fatalf("stored keys: %v, %v", before, err)
	}
	f.ops.Secret = []byte("0123456789abcdef0123456789abcdef-another")
	for _, path := range []string{"keys", "keys/prune?unloadable=true", "keys/" + before[0].ID + "/retire"} {
		status, _, body := call(t, "POST", f.adminURL+path, tok, "")
		desc, _ := body["error_description"].(string)
		if status != http.StatusConflict || body["error"] != "conflict" || desc != unsealableKeysDescription {
			t.Fatalf("POST %s with the wrong secret: %d %v", path, status, body)
		}
		if strings.HasPrefix(desc, "as:") || strings.Contains(desc, "authserver keys") || !strings.Contains(desc, Prefix+"keys/prune?unloadable=true") {
			t.Fatalf("POST %s: description not in the API's words: %q", path, desc)
		}
	}
	after, err := f.store.ListKeys(context.Background())
	if err != nil || len(after) != len(before) {
		t.Fatalf("keys after the refused operations: %v, %v; before %v", after, err, before)
	}
	for i := range after {
		if after[i].ID != before[i].ID || !after[i].RetiredAt.Equal(before[i].RetiredAt) {
			t.Fatalf("key %d changed: %+v, was %+v", i, after[i], before[i])
		}
	}
}
