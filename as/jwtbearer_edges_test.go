package as

import (
	"strings"
	"testing"
	"time"
)

// TestJWTBearerEdges pins jwt-bearer checks at their edges: the assertion
// size, an ID-JAG's exp - iat, the cnf member's shape, a workload token
// without jti, and a rule's default resource.
func TestJWTBearerEdges(t *testing.T) {
	w := newFedWorld(t, func(c *Config) {
		c.WorkloadIssuers[0].Rules = append(c.WorkloadIssuers[0].Rules,
			WorkloadRule{Subject: "other-only", ClientID: "wl-other", Resources: []string{otherURI}, Scopes: []string{"other:read"}},
			WorkloadRule{Subject: "twice", ClientID: "first-rule", Resources: []string{mcpURI}, Scopes: []string{"mcp:tools"}},
			WorkloadRule{Subject: "tw*", ClientID: "second-rule", Resources: []string{mcpURI}, Scopes: []string{"mcp:tools"}})
	})
	desc := func(body map[string]any) string { d, _ := body["error_description"].(string); return d }

	t.Run("an assertion of maxAssertion bytes is read, one more is too large", func(t *testing.T) {
		resp, body := w.post("/token", jwtBearer(strings.Repeat("a", maxAssertion)), "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_grant")
		if desc(body) != "The assertion is not a JWT." {
			t.Errorf("%d bytes: %q", maxAssertion, desc(body))
		}
		resp, body = w.post("/token", jwtBearer(strings.Repeat("a", maxAssertion+1)), "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_grant")
		if desc(body) != "The assertion is too large." {
			t.Errorf("%d bytes: %q", maxAssertion+1, desc(body))
		}
	})

	t.Run("an ID-JAG may live maxAssertionAge, not a second more", func(t *testing.T) {
		iat := time.Now().Add(-time.Minute).Unix()
		ok := w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "iat", iat, "exp", iat+int64(maxAssertionAge/time.Second)))
		if resp, body := w.post("/token", jwtBearer(ok), "xaa-client", xaaSecret); resp.StatusCode != 200 {
			t.Errorf("exp - iat = maxAssertionAge: %d %v", resp.StatusCode, body)
		}
		long := w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "iat", iat, "exp", iat+int64(maxAssertionAge/time.Second)+1))
		resp, body := w.post("/token", jwtBearer(long), "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_grant")
		if desc(body) != "The ID-JAG lives too long (exp - iat)." {
			t.Errorf("exp - iat past maxAssertionAge: %q", desc(body))
		}
	})

	t.Run("a cnf with another member beside jkt, or an empty jkt, is refused, even with a proof", func(t *testing.T) {
		key := newKey(t)
		a := w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "cnf", map[string]any{"jkt": key.Thumbprint(), "x5t#S256": "abc"}))
		resp, body := w.postProof(jwtBearer(a), "xaa-client", xaaSecret, w.proof(key, ""))
		wantError(t, resp, body, 400, "invalid_grant")
		if desc(body) != "The ID-JAG's cnf must be a cnf.jkt thumbprint." {
			t.Errorf("%q", desc(body))
		}
		empty := w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "cnf", map[string]any{"jkt": ""}))
		resp, body = w.postProof(jwtBearer(empty), "xaa-client", xaaSecret, w.proof(key, ""))
		wantError(t, resp, body, 400, "invalid_grant")
		if desc(body) != "The ID-JAG's cnf must be a cnf.jkt thumbprint." {
			t.Errorf("an empty cnf.jkt: %q", desc(body))
		}
	})

	t.Run("workload tokens without jti are told apart by their hash", func(t *testing.T) {
		cl := w.workloadJWT("conformance-workload")
		delete(cl, "jti")
		first := w.wlKey.mint(t, "", cl)
		if resp, body := w.post("/token", jwtBearer(first, "resource", mcpURI), "", ""); resp.StatusCode != 200 {
			t.Fatalf("first: %d %v", resp.StatusCode, body)
		}
		// Another claim set (ns) makes another token for the second rule.
		second := w.wlKey.mint(t, "", with(func() map[string]any {
			c := w.workloadJWT("system:serviceaccount:prod:api")
			delete(c, "jti")
			return c
		}(), "ns", "prod"))
		if resp, body := w.post("/token", jwtBearer(second), "", ""); resp.StatusCode != 200 {
			t.Fatalf("another token without jti: %d %v", resp.StatusCode, body)
		}
		resp, body := w.post("/token", jwtBearer(first, "resource", mcpURI), "", "")
		wantError(t, resp, body, 400, "invalid_grant")
		if !strings.Contains(desc(body), "jti replay") {
			t.Errorf("the first again: %q", desc(body))
		}
	})

	t.Run("a rule's only resource is its default when the configured default is not its", func(t *testing.T) {
		resp, body := w.post("/token", jwtBearer(w.wlKey.mint(t, "", w.workloadJWT("other-only"))), "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, body)
		}
		if _, c := w.claims(body["access_token"].(string)); c["aud"] != otherURI || c["client_id"] != "wl-other" {
			t.Errorf("claims %v", c)
		}
	})

	// Fails if a later matching rule overrides the first.
	t.Run("the first rule that matches and allows the resource decides", func(t *testing.T) {
		resp, body := w.post("/token", jwtBearer(w.wlKey.mint(t, "", w.workloadJWT("twice"))), "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, body)
		}
		if _, c := w.claims(body["access_token"].(string)); c["client_id"] != "first-rule" {
			t.Errorf("client_id %v, want first-rule", c["client_id"])
		}
	})
}

// TestIDJAGWithoutScopeGetsTheDefaults: an ID-JAG without scope claim,
// redeemed naming no scope, gets the resource's DefaultScopes, not every
// scope the client may have.
func TestIDJAGWithoutScopeGetsTheDefaults(t *testing.T) {
	w := newFedWorld(t, func(c *Config) { c.Resources[0].DefaultScopes = []string{"mcp:tools"} })
	resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret)
	if resp.StatusCode != 200 || body["scope"] != "mcp:tools" {
		t.Fatalf("%d %v; want scope mcp:tools", resp.StatusCode, body)
	}
}

// TestJWTBearerWithOneIdPAndOneWorkloadIssuer: the grant is offered when
// any assertion issuer is configured, one of each kind included.
func TestJWTBearerWithOneIdPAndOneWorkloadIssuer(t *testing.T) {
	w := newFedWorld(t, func(c *Config) { c.WorkloadIssuers = c.WorkloadIssuers[:1] })
	resp, body := w.post("/token", jwtBearer(w.wlKey.mint(t, "", w.workloadJWT("conformance-workload")), "resource", mcpURI), "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
}
