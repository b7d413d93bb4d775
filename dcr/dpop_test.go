package dcr_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// RFC 9449 §5.2: dpop_bound_access_tokens is client metadata; it is echoed
// and kept in the stored metadata the authorization server reads.
func TestDPoPBoundAccessTokensRegistered(t *testing.T) {
	e := newEnv(t, defaultPolicy())
	r := e.register(`{"client_name":"Agent","redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none","dpop_bound_access_tokens":true}`)
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	var echoed map[string]any
	if err := json.Unmarshal(r.body, &echoed); err != nil {
		t.Fatal(err)
	}
	if echoed["dpop_bound_access_tokens"] != true {
		t.Fatalf("not echoed: %s", r.body)
	}
	c := e.stored(t, r.info(t).ClientID)
	if !strings.Contains(string(c.Metadata), `"dpop_bound_access_tokens":true`) {
		t.Fatalf("stored metadata %s", c.Metadata)
	}
	r = e.register(`{"client_name":"Agent","redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none","dpop_bound_access_tokens":"yes"}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "invalid_client_metadata") {
		t.Fatalf("non-boolean accepted: %d %s", r.status, r.body)
	}
}

// A Client ID Metadata Document's dpop_bound_access_tokens reaches the
// resolved client's metadata, which the authorization server enforces.
func TestCIMDDPoPBoundAccessTokens(t *testing.T) {
	d := newDocServer(t)
	re := newResolver(t, d, nil)
	doc := claudeDoc()
	doc["dpop_bound_access_tokens"] = true
	id := d.serve("/dpop/client.json", doc, "")
	c, err := re.r.ResolveClient(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c.Metadata), `"dpop_bound_access_tokens":true`) {
		t.Fatalf("metadata %s", c.Metadata)
	}
}
