package as

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

const gwSecret = "gateway-secret-0123456789abcdef"

// newApprovalHarness is the logged harness on store, with the confidential
// client "gw" named in ApprovalClients of mcpURI.
func newApprovalHarness(t *testing.T, store storage.Store) (*harness, *logCapture) {
	t.Helper()
	return newLoggedHarness(t, func(c *Config) {
		if store != nil {
			c.Store = store
		}
		c.Clients = append(c.Clients, Client{ID: "gw", Secret: gwSecret, GrantTypes: []string{"client_credentials"}, Resources: []string{mcpURI}})
		c.Resources[0].ApprovalClients = []string{"gw"}
	})
}

// tokenFor runs the code flow of demo-app for resource and returns the
// access token.
func (h *harness) tokenFor(resource string) string {
	h.t.Helper()
	code, verifier := h.authorizeCode(oauth2.SetAuthURLParam("resource", resource))
	conf := h.oauthConfig("demo-app", "")
	tok, err := conf.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		h.t.Fatal(err)
	}
	return tok.AccessToken
}

// approval posts a JSON body to the approvals endpoint as user (HTTP
// Basic; none when user is "") and returns the status and the answer.
func (h *harness) approval(body any, user, pass string) (*http.Response, map[string]any) {
	h.t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			h.t.Fatal(err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, h.issuer+ApprovalsPath, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.SetBasicAuth(url.QueryEscape(user), url.QueryEscape(pass))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		h.t.Fatalf("approvals: status %d, body not JSON: %s", resp.StatusCode, raw)
	}
	return resp, m
}

func call(token, tool string, args any) map[string]any {
	return map[string]any{"token": token, "tool": tool, "arguments": args, "ttl": 300}
}

func wantAnswer(t *testing.T, resp *http.Response, m map[string]any, status string) string {
	t.Helper()
	if resp.StatusCode != 200 || m["status"] != status {
		t.Fatalf("answer %d %v, want 200 %s", resp.StatusCode, m, status)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	id, _ := m["approval_id"].(string)
	if len(id) != 22 {
		t.Fatalf("approval_id %q is not 128 bits in base64url", id)
	}
	return id
}

func (h *harness) decide(t *testing.T, id string, approve bool) {
	t.Helper()
	if _, err := h.as.cfg.Store.DecideApproval(context.Background(), id, "alice", approve, h.clock.Now()); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
}

func TestApprovalsOnEveryBackend(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) storage.Store
	}{
		{"memory", func(*testing.T) storage.Store { return nil }},
		{"sqlite", func(t *testing.T) storage.Store { return openSQLite(t) }},
		{"postgres", func(t *testing.T) storage.Store { return openPostgres(t, 8) }},
	} {
		t.Run(b.name, func(t *testing.T) { approvalCases(t, b.open(t)) })
	}
}

func approvalCases(t *testing.T, store storage.Store) {
	h, logs := newApprovalHarness(t, store)
	st := h.as.cfg.Store
	ctx := context.Background()
	token := h.tokenFor(mcpURI)
	args := map[string]any{"to": "bob@example.com", "subject": "hi", "n": 1}

	t.Run("a held call is pending until the person approves, is approved once, then pending again", func(t *testing.T) {
		resp, m := h.approval(call(token, "send_email", args), "gw", gwSecret)
		id := wantAnswer(t, resp, m, "pending")
		if m["approval_uri"] != h.issuer+"/approve/"+id || m["expires_in"] != float64(300) {
			t.Fatalf("pending answer %v", m)
		}
		// The same call, its arguments spelled otherwise, is the same approval.
		resp, m = h.approval(`{"ttl":60,"arguments":{"subject":"hi","n":1.0,"to":"bob@example.com"},"tool":"send_email","token":"`+token+`"}`, "gw", gwSecret)
		if wantAnswer(t, resp, m, "pending") != id {
			t.Fatalf("the same call got another approval: %v", m)
		}
		a, err := st.GetApproval(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if a.Subject != "alice" || a.ClientID != "demo-app" || a.Resource != mcpURI || a.Tool != "send_email" ||
			string(a.Arguments) != `{"n":1,"subject":"hi","to":"bob@example.com"}` || a.ArgsDigest != sha256Hex(a.Arguments) {
			t.Fatalf("stored %+v", a)
		}
		h.decide(t, id, true)
		resp, m = h.approval(call(token, "send_email", args), "gw", gwSecret)
		if wantAnswer(t, resp, m, "approved") != id {
			t.Fatalf("approved another id: %v", m)
		}
		// Replay: the approval is spent; the call is held again.
		resp, m = h.approval(call(token, "send_email", args), "gw", gwSecret)
		if again := wantAnswer(t, resp, m, "pending"); again == id {
			t.Fatal("a used approval was handed out again")
		}
		if got, _ := st.GetApproval(ctx, id); got.Status != storage.ApprovalUsed {
			t.Fatalf("status after use %s", got.Status)
		}
	})

	t.Run("the person approves on the page the answer names, and the retry runs once", func(t *testing.T) {
		resp, m := h.approval(call(token, "create_issue", map[string]any{"title": "<b>x</b>"}), "gw", gwSecret)
		id := wantAnswer(t, resp, m, "pending")
		b := h.browser()
		p := b.get(m["approval_uri"].(string))
		p = b.submit(p, "username", "alice", "password", alicePW)
		if p.StatusCode != 200 || !strings.Contains(p.Body, "Example MCP") || !strings.Contains(p.Body, "Demo") ||
			!strings.Contains(p.Body, "&lt;b&gt;x&lt;/b&gt;") {
			t.Fatalf("approval page: %d\n%s", p.StatusCode, p.Body)
		}
		p = b.submit(p, "action", "approve")
		if p.StatusCode != 200 || !strings.Contains(p.Body, "try again") {
			t.Fatalf("after approving: %d\n%s", p.StatusCode, p.Body)
		}
		resp, m = h.approval(call(token, "create_issue", map[string]any{"title": "<b>x</b>"}), "gw", gwSecret)
		if wantAnswer(t, resp, m, "approved") != id {
			t.Fatalf("retry: %v", m)
		}
	})

	t.Run("other arguments or another tool need their own approval", func(t *testing.T) {
		_, m := h.approval(call(token, "delete_file", map[string]any{"path": "/etc/passwd"}), "gw", gwSecret)
		id := m["approval_id"]
		h.decide(t, id.(string), true)
		resp, m := h.approval(call(token, "delete_file", map[string]any{"path": "/etc/shadow"}), "gw", gwSecret)
		if wantAnswer(t, resp, m, "pending") == id {
			t.Fatal("other arguments used the approval")
		}
		resp, m = h.approval(call(token, "remove_file", map[string]any{"path": "/etc/passwd"}), "gw", gwSecret)
		if wantAnswer(t, resp, m, "pending") == id {
			t.Fatal("another tool used the approval")
		}
		resp, m = h.approval(call(token, "delete_file", map[string]any{"path": "/etc/passwd"}), "gw", gwSecret)
		if wantAnswer(t, resp, m, "approved") != id {
			t.Fatalf("the approved call: %v", m)
		}
	})

	t.Run("a denial is reported once, then the call is pending again", func(t *testing.T) {
		_, m := h.approval(call(token, "drop_table", map[string]any{}), "gw", gwSecret)
		id := m["approval_id"].(string)
		h.decide(t, id, false)
		resp, m := h.approval(call(token, "drop_table", nil), "gw", gwSecret)
		if wantAnswer(t, resp, m, "denied") != id {
			t.Fatalf("denied answer %v", m)
		}
		resp, m = h.approval(call(token, "drop_table", map[string]any{}), "gw", gwSecret)
		if wantAnswer(t, resp, m, "pending") == id {
			t.Fatal("the spent denial was reported again")
		}
	})

	t.Run("of concurrent retries exactly one gets the approval", func(t *testing.T) {
		_, m := h.approval(call(token, "pay", map[string]any{"amount": 5}), "gw", gwSecret)
		h.decide(t, m["approval_id"].(string), true)
		var mu sync.Mutex
		got := map[string]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, m := h.approval(call(token, "pay", map[string]any{"amount": 5}), "gw", gwSecret)
				mu.Lock()
				defer mu.Unlock()
				got[resp.Status+" "+m["status"].(string)]++
			}()
		}
		wg.Wait()
		if got["200 OK approved"] != 1 || got["200 OK pending"] != 7 {
			t.Fatalf("answers %v", got)
		}
	})

	t.Run("client_secret_post in the body authenticates, and ttl is capped", func(t *testing.T) {
		body := call(token, "export", map[string]any{})
		body["client_id"], body["client_secret"], body["ttl"] = "gw", gwSecret, 86400
		resp, m := h.approval(body, "", "")
		wantAnswer(t, resp, m, "pending")
		if m["expires_in"] != float64(3600) {
			t.Fatalf("expires_in %v, want the cap 3600", m["expires_in"])
		}
	})

	t.Run("an approval that expired cannot be used", func(t *testing.T) {
		body := call(token, "slow", map[string]any{})
		body["ttl"] = 60
		_, m := h.approval(body, "gw", gwSecret)
		id := m["approval_id"].(string)
		h.decide(t, id, true)
		h.clock.Advance(61 * time.Second)
		resp, m := h.approval(body, "gw", gwSecret)
		if wantAnswer(t, resp, m, "pending") == id {
			t.Fatal("an expired approval was used")
		}
	})

	t.Run("the audit names the approval, never the token or the arguments", func(t *testing.T) {
		seen := map[string]bool{}
		for _, e := range logs.events(t) {
			ev, _ := e["event"].(string)
			if !strings.HasPrefix(ev, "approval.") {
				continue
			}
			seen[ev] = true
			for _, k := range []string{"approval_id", "sub", "client_id", "resource", "tool", "args_digest"} {
				if e[k] == nil || e[k] == "" {
					t.Fatalf("%s without %s: %v", ev, k, e)
				}
			}
		}
		if !seen["approval.requested"] || !seen["approval.used"] || !seen["approval.approved"] {
			t.Fatalf("audit events %v", seen)
		}
		all := logs.String()
		for _, secret := range []string{token, "bob@example.com", "/etc/passwd", gwSecret} {
			if strings.Contains(all, secret) {
				t.Fatalf("the log holds %q", secret)
			}
		}
	})
}

// TestApprovalsRefuseHostileRequests: every request that must be refused
// gets its OAuth error and status, never a 500, and stores nothing.
func TestApprovalsRefuseHostileRequests(t *testing.T) {
	h, _ := newApprovalHarness(t, nil)
	st := h.as.cfg.Store
	ctx := context.Background()
	token := h.tokenFor(mcpURI)
	otherToken := h.tokenFor(otherURI)
	revoked := h.tokenFor(mcpURI)
	if resp, _ := h.post("/revoke", url.Values{"token": {revoked}, "client_id": {"demo-app"}}, "", ""); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	status, cc := h.ccToken("ci-bot", ciSecret, "mcp:tools")
	if status != 200 {
		t.Fatalf("client credentials: %d %v", status, cc)
	}
	good := func(kv ...any) map[string]any {
		m := call(token, "send_email", map[string]any{"to": "x"})
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	cases := []struct {
		name       string
		body       any
		user, pass string
		ct         string
		status     int
		err        string
	}{
		{"refuses a request without client authentication", good(), "", "", "", 401, "invalid_client"},
		{"refuses a wrong secret", good(), "gw", "wrong", "", 401, "invalid_client"},
		{"refuses an unknown client", good(), "ghost", "x", "", 401, "invalid_client"},
		{"refuses a public client", good(), "demo-app", "", "", 401, "invalid_client"},
		{"refuses a foreign client not named in approval_clients", good(), "rs", rsSecret, "", 400, "unauthorized_client"},
		{"refuses a foreign client before looking at the token", good("token", "garbage"), "rs", rsSecret, "", 400, "unauthorized_client"},
		{"refuses a token of another resource", good("token", otherToken), "gw", gwSecret, "", 400, "unauthorized_client"},
		{"refuses an unknown token", good("token", "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"), "gw", gwSecret, "", 400, "invalid_token"},
		{"refuses garbage as a token", good("token", "garbage"), "gw", gwSecret, "", 400, "invalid_token"},
		{"refuses a revoked token", good("token", revoked), "gw", gwSecret, "", 400, "invalid_token"},
		{"refuses a token of no person", good("token", cc["access_token"]), "gw", gwSecret, "", 400, "invalid_token"},
		{"refuses a body that is not JSON", "token=x&tool=y", "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a form content type", good(), "gw", gwSecret, "application/x-www-form-urlencoded", 400, "invalid_request"},
		{"refuses a JSON array", `[1,2]`, "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses two JSON values", `{"token":"a","tool":"b"}{}`, "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a body over 64 KiB", good("arguments", map[string]any{"x": strings.Repeat("a", 65<<10)}), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a duplicate member", `{"token":"` + token + `","tool":"send_email","tool":"read_file","arguments":{}}`, "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a duplicate argument", `{"token":"` + token + `","tool":"send_email","arguments":{"to":"bob","to":"eve"}}`, "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a duplicate nested argument", `{"token":"` + token + `","tool":"t","arguments":{"a":[{"b":1,"b":2}]}}`, "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a missing tool", good("tool", nil), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses an empty tool", good("tool", ""), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a tool over 128 bytes", good("tool", strings.Repeat("t", 129)), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a tool with a control character", good("tool", "send\x00email"), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a tool that is not a string", good("tool", 5), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses arguments that are an array", good("arguments", []any{1}), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses arguments that are a string", good("arguments", "{}"), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a number no double holds", `{"token":"` + token + `","tool":"t","arguments":{"n":1e400}}`, "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a missing token", good("token", nil), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a zero ttl", good("ttl", 0), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a negative ttl", good("ttl", -5), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a fractional ttl", good("ttl", 1.5), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a ttl in a string", good("ttl", "300"), "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses a body nested too deeply", `{"token":"x","tool":"t","arguments":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`, "gw", gwSecret, "", 400, "invalid_request"},
		{"refuses invalid UTF-8", "{\"token\":\"x\",\"tool\":\"t\xff\"}", "gw", gwSecret, "", 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			if s, ok := tc.body.(string); ok {
				b = []byte(s)
			} else {
				b, _ = json.Marshal(tc.body)
			}
			req, _ := http.NewRequest(http.MethodPost, h.issuer+ApprovalsPath, bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatalf("status %d, body not JSON", resp.StatusCode)
			}
			if resp.StatusCode != tc.status || m["error"] != tc.err {
				t.Fatalf("got %d %v, want %d %s", resp.StatusCode, m, tc.status, tc.err)
			}
			if d, _ := m["error_description"].(string); d == "" {
				t.Fatal("no error_description")
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	t.Run("refuses a disabled person's token", func(t *testing.T) {
		if err := st.SetUserDisabled(ctx, "alice", true); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = st.SetUserDisabled(ctx, "alice", false) }()
		resp, m := h.approval(good(), "gw", gwSecret)
		if resp.StatusCode != 400 || m["error"] != "invalid_token" {
			t.Fatalf("got %d %v", resp.StatusCode, m)
		}
	})
	t.Run("refuses an expired token", func(t *testing.T) {
		h.clock.Advance(DefaultAccessTokenTTL + time.Second)
		resp, m := h.approval(good(), "gw", gwSecret)
		if resp.StatusCode != 400 || m["error"] != "invalid_token" {
			t.Fatalf("got %d %v", resp.StatusCode, m)
		}
	})
	t.Run("refuses GET", func(t *testing.T) {
		resp, err := http.Get(h.issuer + ApprovalsPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Fatalf("GET: %d", resp.StatusCode)
		}
	})
	list, err := st.ListApprovals(ctx, "", "", 100)
	if err != nil || len(list) != 0 {
		t.Fatalf("refused requests stored %d approvals (%v)", len(list), err)
	}
}

func TestApprovalClientsMustBeConfiguredConfidentialClients(t *testing.T) {
	key, err := ecdsaKey()
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	for _, id := range []string{"nobody", "demo-app", "jwt-bot"} {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg := Config{
			Issuer:    "http://127.0.0.1:9",
			Resources: []Resource{{URI: mcpURI, Scopes: []string{"mcp:tools"}, ApprovalClients: []string{id}}},
			Clients: []Client{{ID: "demo-app", Public: true, RedirectURIs: []string{appRedirect}},
				{ID: "jwt-bot", JWKS: jwks, GrantTypes: []string{"client_credentials"}}},
			Store:  memory.New(),
			Secret: []byte("0123456789abcdef0123456789abcdef-test-secret"),
		}
		_, err := New(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), "ApprovalClients[0]") {
			t.Errorf("ApprovalClients [%s]: %v", id, err)
		}
	}
}
