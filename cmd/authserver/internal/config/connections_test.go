package config

import (
	"strings"
	"testing"
)

const connections = `
connections:
  - id: github
    name: GitHub
    authorization_endpoint: https://github.com/login/oauth/authorize
    token_endpoint: https://github.com/login/oauth/access_token
    client_id: ${GITHUB_CLIENT_ID}
    client_secret: ${GITHUB_CLIENT_SECRET}
    scopes: [repo, "read:user"]
    resource: https://API.github.com
    clients: [ci-bot]
  - id: google
    issuer: https://accounts.google.com
    revocation_endpoint: https://oauth2.googleapis.com/revoke
    client_id: g
    client_secret: gs
    resource: https://www.googleapis.com/drive/v3
    clients: [ci-bot]
`

func TestParseConnections(t *testing.T) {
	c, err := Parse([]byte(base+connections), envOf(map[string]string{"GITHUB_CLIENT_ID": "Iv1.abc", "GITHUB_CLIENT_SECRET": "gh-secret-from-env"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Connections) != 2 {
		t.Fatalf("connections %+v", c.Connections)
	}
	g := c.Connections[0]
	if g.ID != "github" || g.Name != "GitHub" || g.ClientID != "Iv1.abc" || g.ClientSecret != "gh-secret-from-env" ||
		strings.Join(g.Scopes, " ") != "repo read:user" || g.Resource != "https://api.github.com" || g.Clients[0] != "ci-bot" {
		t.Fatalf("github read as %+v", g)
	}
	if d := c.Connections[1]; d.Name != "google" || d.Issuer != "https://accounts.google.com" || d.RevocationEndpoint == "" {
		t.Fatalf("google read as %+v", d)
	}
	if got := strings.Join(c.ConnectionIDs(), ","); got != "github,google" {
		t.Fatalf("ConnectionIDs %q", got)
	}
	red, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(red), "gh-secret-from-env") || strings.Contains(string(red), "gs\n") {
		t.Fatalf("a connection's client secret is shown:\n%s", red)
	}
	if c.Connections[0].ClientSecret != "gh-secret-from-env" {
		t.Fatal("Redacted changed the configuration")
	}
}

func TestParseRejectsBadConnections(t *testing.T) {
	one := "connections:\n  - id: github\n    authorization_endpoint: https://gh.example/authorize\n    token_endpoint: https://gh.example/token\n" +
		"    client_id: c\n    client_secret: s\n    resource: https://api.gh.example\n    clients: [ci-bot]\n"
	discovery := strings.Replace(strings.Replace(one, "    authorization_endpoint: https://gh.example/authorize\n", "", 1),
		"    token_endpoint: https://gh.example/token\n", "    issuer: https://gh.example\n", 1)
	cases := []struct {
		name, edit, wantErr string
	}{
		{"an id with capitals", strings.Replace(one, "id: github", "id: GitHub", 1), "config: connections[0].id: must be 1 to 32 of a-z"},
		{"an id of 33 characters", strings.Replace(one, "id: github", "id: "+strings.Repeat("a", 33), 1), "config: connections[0].id: must be 1 to 32"},
		{"no id", strings.Replace(one, "  - id: github\n", "  - name: github\n", 1), "config: connections[0].id: must be 1 to 32"},
		{"a duplicate id", one + strings.Replace(strings.TrimPrefix(one, "connections:\n"), "api.gh", "api2.gh", 1), "config: connections[1].id: duplicate connection \"github\""},
		{"a name with a control character", one + "    name: \"Git\\tHub\"\n", "config: connections[0].name: must be at most 80 characters"},
		{"no endpoints and no issuer", strings.Replace(strings.Replace(one, "    authorization_endpoint: https://gh.example/authorize\n", "", 1), "    token_endpoint: https://gh.example/token\n", "", 1), "config: connections[0].authorization_endpoint: required (or issuer"},
		{"no token endpoint", strings.Replace(one, "    token_endpoint: https://gh.example/token\n", "", 1), "config: connections[0].token_endpoint: required"},
		{"endpoints and an issuer", one + "    issuer: https://gh.example\n", "config: connections[0].issuer: set issuer or authorization_endpoint and token_endpoint, not both"},
		{"a plain http token endpoint on a public host", strings.Replace(one, "https://gh.example/token", "http://gh.example/token", 1), "config: connections[0].token_endpoint: must be https"},
		{"a relative authorization endpoint", strings.Replace(one, "https://gh.example/authorize", "/authorize", 1), "config: connections[0].authorization_endpoint: must be an absolute https URL"},
		{"a plain http revocation endpoint", one + "    revocation_endpoint: http://gh.example/revoke\n", "config: connections[0].revocation_endpoint: must be https"},
		{"an issuer with a query", strings.Replace(discovery, "https://gh.example", "https://gh.example?x=1", 1), "config: connections[0].issuer: must be an absolute https URL"},
		{"no client id", strings.Replace(one, "    client_id: c\n", "", 1), "config: connections[0].client_id: required"},
		{"no client secret", strings.Replace(one, "    client_secret: s\n", "", 1), "config: connections[0].client_secret: required"},
		{"a scope with a space", one + "    scopes: [\"a b\"]\n", "config: connections[0].scopes[0]: not a scope token"},
		{"no resource", strings.Replace(one, "    resource: https://api.gh.example\n", "", 1), "config: connections[0].resource: not an absolute"},
		{"a resource with a fragment", strings.Replace(one, "https://api.gh.example", "https://api.gh.example#x", 1), "config: connections[0].resource: not an absolute"},
		{"a configured resource", strings.Replace(one, "https://api.gh.example", "https://mcp.example.com/mcp", 1), "config: connections[0].resource: https://mcp.example.com/mcp is a configured resource"},
		{"two connections with one resource", one + strings.Replace(strings.TrimPrefix(one, "connections:\n"), "id: github", "id: gh2", 1), "config: connections[1].resource: connections[0] has this resource already"},
		{"no clients", strings.Replace(one, "    clients: [ci-bot]\n", "", 1), "config: connections[0].clients: at least one client is required"},
		{"an unknown client", strings.Replace(one, "[ci-bot]", "[nobody]", 1), "config: connections[0].clients[0]: \"nobody\" is not a configured client"},
		{"a public client", strings.Replace(one, "[ci-bot]", "[demo-app]", 1), "config: connections[0].clients[0]: \"demo-app\" is a public client"},
		{"a client allowed every resource", strings.Replace(one, "[ci-bot]", "[svc]", 1) + "  # svc\n", "config: connections[0].clients[0]: client \"svc\" must list its own resource in resources"},
		{"an unknown key", one + "    client_secrte: x\n", "config: connections[0].client_secrte: unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := base + tc.edit
			if strings.Contains(tc.edit, "[svc]") {
				src = strings.Replace(base, "clients:\n", "clients:\n  - id: svc\n    secret: 0123456789abcdef0123\n", 1) + tc.edit
			}
			_, err := Parse([]byte(src), envOf(nil))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			if !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("error %q, want prefix %q", err, tc.wantErr)
			}
		})
	}
}
