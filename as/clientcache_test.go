package as

import (
	"context"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// A registered client's conversion is cached, but any change to the stored
// record (RFC 7592 update, new secret, narrower scopes), even one that does
// not bump UpdatedAt, is seen on the next lookup.
func TestConvertedClientsFollowTheStoredRecord(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	m := &clientManager{static: map[string]*client{}, store: st,
		resources: []resource{{URI: "https://mcp.example.com/mcp", Scopes: []string{"a", "b"}}},
		now:       time.Now}
	rec := &storage.Client{ID: "dcr-1", Public: true, Name: "One", TokenEndpointAuthMethod: "none",
		RedirectURIs: []string{"https://one.example/cb"}, Scopes: []string{"a", "b"}, Source: "dcr"}
	if err := st.CreateClient(ctx, rec); err != nil {
		t.Fatal(err)
	}
	c1, err := m.get(ctx, "dcr-1")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := m.get(ctx, "dcr-1")
	if c1 == c2 {
		t.Fatal("cached lookups share one *client: callers could mutate each other's")
	}
	steps := []struct {
		name   string
		update func(*storage.Client)
		check  func(*client) bool
	}{
		{"redirect URIs changed", func(c *storage.Client) { c.RedirectURIs = []string{"https://two.example/cb"} },
			func(c *client) bool { return len(c.redirectURIs) == 1 && c.redirectURIs[0] == "https://two.example/cb" }},
		{"registered scope narrowed", func(c *storage.Client) { c.Scopes = []string{"a"} },
			func(c *client) bool { return len(c.defaultScopes) == 1 && c.defaultScopes[0] == "a" }},
		{"made confidential", func(c *storage.Client) {
			c.Public, c.TokenEndpointAuthMethod, c.SecretHash = false, "client_secret_basic", []byte("hash")
		}, func(c *client) bool { return !c.public && string(c.secretHash) == "hash" }},
	}
	for _, s := range steps {
		err := st.UpdateClient(ctx, "dcr-1", func(c storage.Client) (storage.Client, error) {
			s.update(&c)
			return c, nil // UpdatedAt deliberately left as it was
		})
		if err != nil {
			t.Fatal(err)
		}
		c, err := m.get(ctx, "dcr-1")
		if err != nil {
			t.Fatal(err)
		}
		if !s.check(c) {
			t.Errorf("%s: lookup served a stale conversion: %+v", s.name, c)
		}
	}
	if err := st.DeleteClient(ctx, "dcr-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.get(ctx, "dcr-1"); err == nil {
		t.Error("a deleted client is still served from the conversion cache")
	}
}
