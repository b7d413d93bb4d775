package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const upstreams = `
upstreams:
  - id: corp
    name: Acme SSO
    issuer: https://login.acme.example
    client_id: mcpauth
    client_secret: ${CORP_SECRET}
    scopes: [openid, email, profile, groups]
    subject_claim: oid
    allowed_domains: [acme.example]
    allowed_groups: [mcp-users]
    recheck_after: 1h
    claim_scopes:
      groups:
        mcp-admins: [mcp:admin]
        mcp-users: [mcp:tools]
  - id: dev
    issuer: http://127.0.0.1:5556/dex
    client_id: local
    client_secret: s3cret
`

func TestParseUpstreams(t *testing.T) {
	c, err := Parse([]byte(base+upstreams), envOf(map[string]string{"CORP_SECRET": "from-env"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 2 {
		t.Fatalf("upstreams %+v", c.Upstreams)
	}
	u := c.Upstreams[0]
	if u.ID != "corp" || u.Name != "Acme SSO" || u.ClientSecret != "from-env" || u.SubjectClaim != "oid" ||
		u.RecheckAfter.D() != time.Hour || strings.Join(u.ClaimScopes["groups"]["mcp-admins"], " ") != "mcp:admin" {
		t.Fatalf("corp read as %+v", u)
	}
	d := c.Upstreams[1]
	if d.Name != "dev" || d.SubjectClaim != "sub" || strings.Join(d.Scopes, " ") != "openid email profile" || d.RecheckAfter != 0 {
		t.Fatalf("defaults not applied: %+v", d)
	}
	if got := strings.Join(c.UpstreamIDs(), ","); got != "corp,dev" {
		t.Fatalf("UpstreamIDs %q", got)
	}
	red, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(red), "from-env") || strings.Contains(string(red), "s3cret") {
		t.Fatalf("a client secret is shown:\n%s", red)
	}
	if c.Upstreams[0].ClientSecret != "from-env" {
		t.Fatal("Redacted changed the configuration")
	}
}

func TestParseUpstreamsWithoutLocalUsers(t *testing.T) {
	src := strings.Replace(base, "users:\n  - username: alice\n    password_hash: \"$2b$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0\"\n", "", 1)
	if strings.Contains(src, "alice") {
		t.Fatal("base changed; the edit no longer removes the users")
	}
	c, err := Parse([]byte(src+strings.ReplaceAll(upstreams, "${CORP_SECRET}", "x")), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Users) != 0 || len(c.Upstreams) != 2 {
		t.Fatalf("users %v upstreams %d", c.Users, len(c.Upstreams))
	}
}

func TestParseUpstreamPrivateKeyJWT(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "corp.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	src := base + "upstreams:\n  - id: corp\n    issuer: https://login.acme.example\n    client_id: mcpauth\n    private_key_jwt:\n      key_file: " + path + "\n      key_id: k1\n"
	c, err := Parse([]byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Upstreams[0].PrivateKeyJWT
	if k.Alg != "ES256" || k.Key == nil || k.KeyID != "k1" {
		t.Fatalf("key read as %+v", k)
	}
	if _, err := Parse([]byte(src+"      audience: not-a-url\n"), envOf(nil)); err == nil ||
		!strings.HasPrefix(err.Error(), "config: upstreams[0].private_key_jwt.audience: must be an absolute URL") {
		t.Fatalf("bad audience: %v", err)
	}
	if c, err := Parse([]byte(src+"      audience: https://login.acme.example\n"), envOf(nil)); err != nil || c.Upstreams[0].PrivateKeyJWT.Audience != "https://login.acme.example" {
		t.Fatalf("audience: %v", err)
	}
	if _, err := Parse([]byte(strings.Replace(src, path, path+".missing", 1)), envOf(nil)); err == nil ||
		!strings.HasPrefix(err.Error(), "config: upstreams[0].private_key_jwt.key_file: cannot read") {
		t.Fatalf("missing key file: %v", err)
	}
}

func TestParseRejectsBadUpstreams(t *testing.T) {
	one := "upstreams:\n  - id: corp\n    issuer: https://login.acme.example\n    client_id: mcpauth\n    client_secret: s\n"
	cases := []struct {
		name, edit, wantErr string
	}{
		{"an id with capitals", strings.Replace(one, "id: corp", "id: Corp", 1), "config: upstreams[0].id: must be 1 to 32 of a-z"},
		{"an id with a slash", strings.Replace(one, "id: corp", "id: a/b", 1), "config: upstreams[0].id: must be 1 to 32"},
		{"a reserved id", strings.Replace(one, "id: corp", "id: local", 1), "config: upstreams[0].id: \"local\" is reserved"},
		{"a duplicate id", one + strings.TrimPrefix(one, "upstreams:\n"), "config: upstreams[1].id: duplicate upstream \"corp\""},
		{"a plain http issuer on a public host", strings.Replace(one, "https://login", "http://login", 1), "config: upstreams[0].issuer: must be https (plain http only on a loopback host"},
		{"an issuer with a query", strings.Replace(one, "acme.example", "acme.example?x=1", 1), "config: upstreams[0].issuer: must be an absolute https URL"},
		{"a relative issuer", strings.Replace(one, "https://login.acme.example", "login.acme.example", 1), "config: upstreams[0].issuer: must be an absolute https URL"},
		{"no client id", strings.Replace(one, "    client_id: mcpauth\n", "", 1), "config: upstreams[0].client_id: required"},
		{"no client authentication", strings.Replace(one, "    client_secret: s\n", "", 1), "config: upstreams[0].client_secret: client_secret or private_key_jwt is required"},
		{"both client authentications", one + "    private_key_jwt: {key_file: /nonexistent, key_id: k}\n", "config: upstreams[0].client_secret: set client_secret or private_key_jwt, not both"},
		{"scopes without openid", one + "    scopes: [email]\n", "config: upstreams[0].scopes: must include openid"},
		{"a scope with a space", one + "    scopes: [openid, \"a b\"]\n", "config: upstreams[0].scopes[1]: not a scope token"},
		{"an empty subject claim", one + "    subject_claim: \"\"\n", "config: upstreams[0].subject_claim: must not be empty"},
		{"an allowed domain with an at sign", one + "    allowed_domains: [\"@acme.example\"]\n", "config: upstreams[0].allowed_domains[0]: must be a lower-case domain name"},
		{"an empty allowed group", one + "    allowed_groups: [\"\"]\n", "config: upstreams[0].allowed_groups[0]: must be 1 to 256 characters"},
		{"a mapped scope no resource has", one + "    claim_scopes:\n      groups:\n        admins: [mcp:everything]\n", "config: upstreams[0].claim_scopes.groups.admins[0]: scope \"mcp:everything\" is not a scope of any configured resource"},
		{"a claim mapping with no values", one + "    claim_scopes:\n      groups: {}\n", "config: upstreams[0].claim_scopes.groups: maps no claim value to scopes"},
		{"a recheck interval of seconds", one + "    recheck_after: 10s\n", "config: upstreams[0].recheck_after: must be 0 (off) or between 1m and 720h"},
		{"an authorization parameter the AS sets", one + "    authorization_params:\n      nonce: fixed\n", "config: upstreams[0].authorization_params.nonce: is set by the AS"},
		{"an unknown key", one + "    client_secrte: x\n", "config: upstreams[0].client_secrte: unknown key"},
		{"no id", strings.Replace(one, "  - id: corp\n", "  - name: corp\n", 1), "config: upstreams[0].id: must be 1 to 32 of a-z"},
		{"an id of 33 characters", strings.Replace(one, "id: corp", "id: "+strings.Repeat("a", 33), 1), "config: upstreams[0].id: must be 1 to 32"},
		{"an id with an underscore", strings.Replace(one, "id: corp", "id: a_b", 1), "config: upstreams[0].id: must be 1 to 32"},
		{"a name of 81 characters", one + "    name: " + strings.Repeat("n", 81) + "\n", "config: upstreams[0].name: must be at most 80 characters"},
		{"a name with a control character", one + "    name: \"Acme\\tSSO\"\n", "config: upstreams[0].name: must be at most 80 characters without control characters"},
		{"no issuer", strings.Replace(one, "    issuer: https://login.acme.example\n", "", 1), "config: upstreams[0].issuer: must be an absolute https URL"},
		{"private_key_jwt without a key file", strings.Replace(one, "    client_secret: s\n", "    private_key_jwt: {key_id: k}\n", 1), "config: upstreams[0].private_key_jwt.key_file: required"},
		{"private_key_jwt with a missing key file", strings.Replace(one, "    client_secret: s\n", "    private_key_jwt: {key_file: /nonexistent/key.pem, key_id: k}\n", 1), "config: upstreams[0].private_key_jwt.key_file: cannot read"},
		{"a subject claim with a dot", one + "    subject_claim: a.b\n", "config: upstreams[0].subject_claim: not a claim name"},
		{"a subject claim with a space", one + "    subject_claim: \"a b\"\n", "config: upstreams[0].subject_claim: not a claim name"},
		{"an allowed domain in capitals", one + "    allowed_domains: [Acme.example]\n", "config: upstreams[0].allowed_domains[0]: must be a lower-case domain name"},
		{"the second allowed domain bad", one + "    allowed_domains: [acme.example, \"a b\"]\n", "config: upstreams[0].allowed_domains[1]: must be a lower-case domain name"},
		{"an allowed group of 257 characters", one + "    allowed_groups: [" + strings.Repeat("g", 257) + "]\n", "config: upstreams[0].allowed_groups[0]: must be 1 to 256 characters"},
		{"a claim_scopes claim name with a space", one + "    claim_scopes:\n      \"a b\":\n        x: [mcp:tools]\n", "config: upstreams[0].claim_scopes.a b: not a claim name"},
		{"a mapped scope with a space", one + "    claim_scopes:\n      groups:\n        admins: [\"mcp:tools mcp:admin\"]\n", "config: upstreams[0].claim_scopes.groups.admins[0]: not a scope token"},
		{"a recheck interval beyond 720h", one + "    recheck_after: 721h\n", "config: upstreams[0].recheck_after: must be 0 (off) or between 1m and 720h"},
		{"a recheck interval that is not a duration", one + "    recheck_after: soon\n", "config: upstreams[0].recheck_after"},
		{"an authorization parameter resource", one + "    authorization_params:\n      resource: https://mcp.example\n", "config: upstreams[0].authorization_params.resource: is set by the AS"},
		{"the second upstream bad", one + strings.Replace(strings.TrimPrefix(one, "upstreams:\n"), "id: corp", "id: other", 1) + "    scopes: [email]\n", "config: upstreams[1].scopes: must include openid"},
		{"a local username in an upstream's subject space", strings.Replace(one, "id: corp", "id: alice", 1), "config: users[0].username: must not start with \"alice:\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := base + tc.edit
			if tc.name == "a local username in an upstream's subject space" {
				src = strings.Replace(base, "username: alice", "username: \"alice:bob\"", 1) + tc.edit
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
