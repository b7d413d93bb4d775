package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/password"
)

func envOf(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// base is a valid configuration every bad case edits one field of.
const base = `
issuer: https://auth.example.com
listen: 127.0.0.1:9000
storage: memory
resources:
  - uri: https://mcp.example.com/mcp
    name: Example
    scopes: [mcp:tools, mcp:admin]
    default: true
  - uri: https://other.example.com/api
    scopes: [read]
clients:
  - id: ci-bot
    secret: 0123456789abcdef0123
    grant_types: [client_credentials]
    scopes: [mcp:tools]
    resources: [https://mcp.example.com/mcp]
  - id: demo-app
    public: true
    redirect_uris: [http://127.0.0.1:7777/callback]
users:
  - username: alice
    password_hash: "$2b$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"
`

func TestParseAcceptsTheBaseExample(t *testing.T) {
	c, err := Parse([]byte(base), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer != "https://auth.example.com" || c.Storage != "memory" || !c.FromFile {
		t.Fatalf("unexpected: %+v", c)
	}
	if got := c.DefaultResourceURI(); got != "https://mcp.example.com/mcp" {
		t.Fatalf("default resource %q", got)
	}
	if g := c.Clients[1].GrantTypes; strings.Join(g, " ") != "authorization_code refresh_token" {
		t.Fatalf("public client default grants %v", g)
	}
	if c.Tokens.AccessTTL.D() != 15*time.Minute || c.Signing.Algorithm != "ES256" || !c.MigrateEnabled() {
		t.Fatalf("defaults not applied: %+v", c.Tokens)
	}
}

func TestParseRejectsBadFields(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(string) string
		wantErr string
	}{
		{"rejects a relative resource URI", repl("uri: https://other.example.com/api", "uri: /api"),
			"config: resources[1].uri: not an absolute http(s) URI"},
		{"rejects a resource URI with a fragment", repl("uri: https://other.example.com/api", "uri: https://other.example.com/api#x"),
			"config: resources[1].uri:"},
		{"rejects two default resources", repl("    scopes: [read]", "    scopes: [read]\n    default: true"),
			"config: resources[1].default: only one resource"},
		{"rejects an unknown top-level key", add("isuer: x"), "config: isuer: unknown key"},
		{"rejects an unknown nested key", add("tokens:\n  acess_ttl: 1h"), "config: tokens.acess_ttl: unknown key"},
		{"rejects an unknown key inside a list item", repl("    name: Example", "    nam: Example"), "config: resources[0].nam: unknown key"},
		{"rejects a duration in seconds without a unit", add("tokens:\n  access_ttl: 3600"), "config: tokens.access_ttl: not a duration"},
		{"rejects a code lifetime over ten minutes", add("tokens:\n  code_ttl: 11m"), "config: tokens.code_ttl: must be between"},
		{"rejects an unknown signing algorithm", add("signing:\n  algorithm: HS256"), "config: signing.algorithm: must be one of"},
		{"rejects a string where a list belongs", repl("scopes: [read]", "scopes: read"), "config: resources[1].scopes: expected a list"},
		{"rejects a non-boolean default", repl("default: true", "default: maybe"), "config: resources[0].default: expected true or false"},
		{"rejects an issuer with a trailing slash", repl("issuer: https://auth.example.com", "issuer: https://auth.example.com/"), "config: issuer: must not end with a slash"},
		{"rejects an issuer with a query", repl("issuer: https://auth.example.com", "issuer: https://auth.example.com?a=b"), "config: issuer: must have no query"},
		{"rejects a listen address without a port", repl("listen: 127.0.0.1:9000", "listen: 127.0.0.1"), "config: listen: not a host:port"},
		{"rejects an unknown storage", repl("storage: memory", "storage: mysql://x"), "config: storage: must be memory"},
		{"rejects sqlite without a path", repl("storage: memory", "storage: \"sqlite:\""), "config: storage: sqlite: needs a file path"},
		{"rejects postgres without a secret", repl("storage: memory", "storage: postgres://u@h/db"), "config: secret: required with postgres storage"},
		{"rejects a short secret", add("secret: tooshort"), "config: secret: must be at least 32 bytes"},
		{"rejects a confidential client without a secret", repl("    secret: 0123456789abcdef0123\n", ""), "config: clients[0].secret: required"},
		{"rejects a public client with a secret", repl("    public: true", "    public: true\n    secret: 0123456789abcdef0123"), "config: clients[1].secret: a public client has no secret"},
		{"rejects a public client with client credentials", repl("    public: true", "    public: true\n    grant_types: [client_credentials]"), "config: clients[1].grant_types[0]: a public client cannot"},
		{"rejects the password grant", repl("grant_types: [client_credentials]", "grant_types: [password]"), "config: clients[0].grant_types[0]: must be"},
		{"rejects a duplicate client id", repl("id: demo-app", "id: ci-bot"), "config: clients[1].id: duplicate client"},
		{"rejects a client scope no resource has", repl("    scopes: [mcp:tools]\n    resources", "    scopes: [mcp:everything]\n    resources"), "config: clients[0].scopes[0]: scope \"mcp:everything\""},
		{"rejects a client resource that is not configured", repl("resources: [https://mcp.example.com/mcp]", "resources: [https://evil.example.com/mcp]"), "config: clients[0].resources[0]: https://evil.example.com/mcp is not a configured resource"},
		{"rejects an http redirect URI on a public host", repl("http://127.0.0.1:7777/callback", "http://app.example.com/callback"), "config: clients[1].redirect_uris[0]: http is allowed only on loopback"},
		{"rejects a javascript redirect URI", repl("http://127.0.0.1:7777/callback", "\"javascript:alert(1)\""), "config: clients[1].redirect_uris[0]:"},
		{"rejects a code client without redirect URIs", repl("    redirect_uris: [http://127.0.0.1:7777/callback]\n", ""), "config: clients[1].redirect_uris: required"},
		{"rejects a password that is not a hash", repl("$2b$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0", "hunter2"), "config: users[0].password_hash: not an argon2id or bcrypt hash"},
		{"rejects a bcrypt hash of the wrong length", repl("$2b$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0", "$2b$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012"), "config: users[0].password_hash: not an argon2id or bcrypt hash"},
		{"rejects an argon2id hash with out-of-range parameters", repl("\"$2b$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0\"", "\"$argon2id$v=19$m=0,t=0,p=0$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA\""), "config: users[0].password_hash: not an argon2id or bcrypt hash"},
		{"rejects a user without a name", repl("username: alice", "username: \"\""), "config: users[0].username: required"},
		{"rejects a scope with a space", repl("scopes: [read]", "scopes: [\"read write\"]"), "config: resources[1].scopes[0]: not a scope token"},
		{"rejects a default scope the resource lacks", repl("    scopes: [read]", "    scopes: [read]\n    default_scopes: [write]"), "config: resources[1].default_scopes[0]: scope \"write\" is not one of this resource's scopes"},
		{"rejects closed registration without tokens", add("registration:\n  open: false"), "config: registration.initial_access_tokens: required"},
		{"rejects a registration scope no resource has", add("registration:\n  scopes: [nope]"), "config: registration.scopes[0]:"},
		{"rejects a negative cap", add("registration:\n  max_redirect_uris: -1"), "config: registration.max_redirect_uris: must not be negative"},
		{"rejects a trusted proxy that is not an address", add("registration:\n  trusted_proxies: [proxy.local]"), "config: registration.trusted_proxies[0]: not an IP address"},
		{"rejects an idle session lifetime above the absolute one", add("sessions:\n  idle_ttl: 13h"), "config: sessions.idle_ttl: must be between 1m and sessions.absolute_ttl"},
		{"rejects a session lifetime of seconds", add("sessions:\n  absolute_ttl: 30s"), "config: sessions.absolute_ttl: must be between 1m and 720h"},
		{"rejects an introspection client that is not configured", repl("    scopes: [read]\n", "    scopes: [read]\n    introspection_clients: [nobody]\n"), "config: resources[1].introspection_clients[0]: \"nobody\" is not a configured confidential client"},
		{"rejects a public introspection client", repl("    scopes: [read]\n", "    scopes: [read]\n    introspection_clients: [demo-app]\n"), "config: resources[1].introspection_clients[0]: \"demo-app\" is not a configured confidential client"},
		{"rejects an approval client that is not configured", repl("    scopes: [read]\n", "    scopes: [read]\n    approval_clients: [nobody]\n"), "config: resources[1].approval_clients[0]: \"nobody\" is not a configured confidential client with a secret"},
		{"rejects a public approval client", repl("    scopes: [read]\n", "    scopes: [read]\n    approval_clients: [demo-app]\n"), "config: resources[1].approval_clients[0]: \"demo-app\" is not a configured confidential client with a secret"},
		{"rejects a top-level trusted proxy that is not an address", add("trusted_proxies: [10.0.0.0/8, proxy.local]"), "config: trusted_proxies[1]: not an IP address"},
		{"rejects both spellings of trusted_proxies with different lists", add("trusted_proxies: [10.0.0.0/8]\nregistration:\n  trusted_proxies: [192.0.2.1]"), "config: registration.trusted_proxies: is the older spelling"},
		{"rejects a redirect host with a port", add("registration:\n  denied_redirect_hosts: [\"evil.example:443\"]"), "config: registration.denied_redirect_hosts[0]: not a host name"},
		{"rejects a CIMD cache maximum below its minimum", add("cimd:\n  cache_min: 1h\n  cache_max: 1m"), "config: cimd.cache_max: must not be less"},
		{"rejects a CIMD domain that is not a host", add("cimd:\n  allowed_domains: [\"https://x\"]"), "config: cimd.allowed_domains[0]: not a domain name"},
		{"rejects an exchange to an unknown resource", add("exchange:\n  - from: https://mcp.example.com/mcp\n    to: https://nope.example.com\n    scopes: [read]"), "config: exchange[0].to: https://nope.example.com is not a configured resource"},
		{"rejects an exchange scope of another resource", add("exchange:\n  - from: https://mcp.example.com/mcp\n    to: https://other.example.com/api\n    scopes: [mcp:tools]"), "config: exchange[0].scopes[0]: scope \"mcp:tools\" is not a scope of resource"},
		{"rejects an exchange without scopes", add("exchange:\n  - from: https://mcp.example.com/mcp\n    to: https://other.example.com/api"), "config: exchange[0].scopes: at least one scope"},
		{"rejects an exchange rule naming an unknown client", add("exchange:\n  - from: https://mcp.example.com/mcp\n    to: https://other.example.com/api\n    scopes: [read]\n    clients: [nobody]"), "config: exchange[0].clients[0]: \"nobody\" is not a configured client"},
		{"rejects token exchange for a public client", repl("    public: true", "    public: true\n    grant_types: [urn:ietf:params:oauth:grant-type:token-exchange]"), "config: clients[1].grant_types[0]: a public client cannot"},
		{"rejects a CIMD allowed host without a port", add("cimd:\n  allow_hosts: [127.0.0.1]"), "config: cimd.allow_hosts[0]: must be IP:port"},
		{"rejects a refresh grace over a minute", add("tokens:\n  refresh_grace: 2m"), "config: tokens.refresh_grace: must be at most 1m"},
		{"rejects a subject scope the source resource lacks", add("exchange:\n  - from: https://mcp.example.com/mcp\n    to: https://other.example.com/api\n    scopes: [read]\n    subject_scopes: [read]"), "config: exchange[0].subject_scopes[0]: scope \"read\" is not a scope of resource https://mcp.example.com/mcp"},
		{"rejects a key reload interval under a second", add("signing:\n  key_reload: 10ms"), "config: signing.key_reload: must be between 1s and 1h"},
		{"rejects an unknown log level", add("log:\n  level: loud"), "config: log.level: must be"},
		{"rejects a GC interval below a second", add("gc:\n  interval: 10ms"), "config: gc.interval: must be at least 1s"},
		{"rejects migrate_on_start that is not a boolean", add("migrate_on_start: sometimes"), "config: migrate_on_start: expected true or false"},
		{"rejects a key given twice", add("listen: 127.0.0.1:9001"), "config: listen: key given twice"},
		{"rejects open registration that also lists initial access tokens", add("registration:\n  open: true\n  initial_access_tokens: [iat-iat-iat-iat-iat-1]"),
			"config: registration.open: is true, so no initial access token"},
		{"rejects a listen port above 65535", repl("listen: 127.0.0.1:9000", "listen: 127.0.0.1:99999"), "config: listen: port \"99999\" is not a number from 0 to 65535"},
		{"rejects a named listen port", repl("listen: 127.0.0.1:9000", "listen: 127.0.0.1:http"), "config: listen: port \"http\" is not a number"},
		{"rejects a listen host with a space", repl("listen: 127.0.0.1:9000", "listen: \"exa mple:9000\""), "config: listen: host \"exa mple\" is not an IP address or a host name"},
		{"rejects a mistyped listen IP address", repl("listen: 127.0.0.1:9000", "listen: 127.0.0.1.1:9000"), "config: listen: host \"127.0.0.1.1\" is not"},
		{"rejects a listen host with an underscore", repl("listen: 127.0.0.1:9000", "listen: my_host:9000"), "config: listen: host \"my_host\" is not"},
		{"rejects an admin listen port above 65535", add("admin:\n  listen: 127.0.0.1:99999"), "config: admin.listen: port \"99999\" is not a number from 0 to 65535"},
		{"rejects an admin listen host with an underscore", add("admin:\n  listen: my_host:9001"), "config: admin.listen: host \"my_host\" is not"},
		{"rejects a zero GC interval", add("gc:\n  interval: 0s"), "config: gc.interval: must be more than 0 (leave the key out for the default, 10m0s)"},
		{"rejects a GC interval of 0", add("gc:\n  interval: 0"), "config: gc.interval: must be more than 0"},
		{"rejects a negative GC interval", add("gc:\n  interval: -1m"), "config: gc.interval: must not be negative"},
		{"rejects a zero GC batch size", add("gc:\n  batch_size: 0"), "config: gc.batch_size: must be more than 0 (leave the key out for the default, 500)"},
		{"rejects a zero access token lifetime", add("tokens:\n  access_ttl: 0s"), "config: tokens.access_ttl: must be more than 0"},
		{"rejects a zero refresh token lifetime", add("tokens:\n  refresh_ttl: 0s"), "config: tokens.refresh_ttl: must be more than 0"},
		{"rejects a zero code lifetime", add("tokens:\n  code_ttl: 0s"), "config: tokens.code_ttl: must be more than 0"},
		{"rejects a zero key reload interval", add("signing:\n  key_reload: 0s"), "config: signing.key_reload: must be more than 0"},
		{"rejects a zero CIMD timeout", add("cimd:\n  timeout: 0s"), "config: cimd.timeout: must be more than 0"},
		{"rejects a zero CIMD cache minimum", add("cimd:\n  cache_min: 0s"), "config: cimd.cache_min: must be more than 0"},
		{"rejects a zero CIMD cache maximum", add("cimd:\n  cache_max: 0s"), "config: cimd.cache_max: must be more than 0"},
		{"rejects a zero registration body cap", add("registration:\n  max_body_bytes: 0"), "config: registration.max_body_bytes: must be more than 0"},
		{"rejects a zero redirect URI cap", add("registration:\n  max_redirect_uris: 0"), "config: registration.max_redirect_uris: must be more than 0"},
		{"rejects a zero string length cap", add("registration:\n  max_string_length: 0"), "config: registration.max_string_length: must be more than 0"},
		{"rejects an empty issuer", repl("issuer: https://auth.example.com", "issuer: \"\""), "config: issuer: must not be empty (leave the key out for the default, \"http://127.0.0.1:9000\""},
		{"rejects an empty storage", repl("storage: memory", "storage: \"\""), "config: storage: must not be empty"},
		{"rejects an empty log level", add("log:\n  level: \"\""), "config: log.level: must not be empty"},
		{"rejects a file that is a list", func(string) string { return "- a\n- b\n" }, "config: the file must be a YAML mapping"},
		{"rejects YAML that does not parse", func(string) string { return "issuer: [unclosed\n" }, "config: "},
		{"rejects no resources at all", func(string) string { return "storage: memory\n" }, "config: resources: at least one resource is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.edit(base)
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

func TestTrustedProxiesHasOneValueForEveryComponent(t *testing.T) {
	for _, tc := range []struct{ name, extra, want string }{
		{"none", "", ""},
		{"the top-level key", "trusted_proxies: [10.0.0.0/8]", "10.0.0.0/8"},
		{"the older registration key alone", "registration:\n  trusted_proxies: [192.0.2.1]", "192.0.2.1"},
		{"both with the same list", "trusted_proxies: [192.0.2.1]\nregistration:\n  trusted_proxies: [192.0.2.1]", "192.0.2.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(base+tc.extra+"\n"), envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.Proxies(), ","); got != tc.want {
				t.Fatalf("Proxies() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRegistrationResourcesLeaveOutExchangeOnlyTargets(t *testing.T) {
	for _, tc := range []struct{ name, extra, want string }{
		{"no exchange: every resource", "", "https://mcp.example.com/mcp https://other.example.com/api"},
		{"an exchange-only target is left out", "exchange:\n  - from: https://mcp.example.com/mcp\n    to: https://other.example.com/api\n    scopes: [read]",
			"https://mcp.example.com/mcp"},
		{"a target that is also a source stays", "exchange:\n  - from: https://mcp.example.com/mcp\n    to: https://other.example.com/api\n    scopes: [read]\n  - from: https://other.example.com/api\n    to: https://mcp.example.com/mcp\n    scopes: [mcp:tools]",
			"https://mcp.example.com/mcp https://other.example.com/api"},
		{"registration.resources wins", "registration:\n  resources: [https://other.example.com/api]\nexchange:\n  - from: https://mcp.example.com/mcp\n    to: https://other.example.com/api\n    scopes: [read]",
			"https://other.example.com/api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(base+tc.extra+"\n"), envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.RegistrationResources(), " "); got != tc.want {
				t.Fatalf("RegistrationResources() = %q, want %q", got, tc.want)
			}
		})
	}
}

func repl(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic("test edit does not apply: " + old)
		}
		return strings.Replace(s, old, new, 1)
	}
}

func add(extra string) func(string) string {
	return func(s string) string { return s + extra + "\n" }
}

func TestParseCanonicalisesResourceURIs(t *testing.T) {
	src := strings.Replace(base, "uri: https://mcp.example.com/mcp", "uri: HTTPS://MCP.example.com:443/mcp/", 1)
	c, err := Parse([]byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Resources[0].URI != "https://mcp.example.com/mcp" {
		t.Fatalf("got %q", c.Resources[0].URI)
	}
}

func TestExpansion(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		src     string
		want    func(*Config) string
		expect  string
		wantErr string
	}{
		{"expands a variable in a client secret", map[string]string{"CI_BOT_SECRET": "s3cr3t-s3cr3t-s3cr3t"},
			strings.Replace(base, "0123456789abcdef0123", "${CI_BOT_SECRET}", 1),
			func(c *Config) string { return c.Clients[0].Secret }, "s3cr3t-s3cr3t-s3cr3t", ""},
		{"expands inside a longer string", map[string]string{"HOST": "auth.example.org"},
			strings.Replace(base, "issuer: https://auth.example.com", "issuer: https://${HOST}", 1),
			func(c *Config) string { return c.Issuer }, "https://auth.example.org", ""},
		{"expands a plain scalar into an integer", map[string]string{"MAX": "42"},
			base + "registration:\n  max_redirect_uris: ${MAX}\n",
			func(c *Config) string { return fmt.Sprint(c.Registration.MaxRedirectURIs) }, "42", ""},
		{"keeps YAML special characters in a value literal", map[string]string{"S": "a: b # c, [d]"},
			strings.Replace(base, "    name: Example\n", "    name: ${S}\n", 1),
			func(c *Config) string { return c.Resources[0].Name }, "a: b # c, [d]", ""},
		{"leaves a dollar without a brace alone", nil,
			strings.Replace(base, "    name: Example\n", "    name: costs $5\n", 1),
			func(c *Config) string { return c.Resources[0].Name }, "costs $5", ""},
		{"names an unset variable and its field", nil,
			strings.Replace(base, "0123456789abcdef0123", "${CI_BOT_SECRET}", 1),
			nil, "", "config: clients[0].secret: environment variable CI_BOT_SECRET is not set"},
		{"rejects an unterminated reference", nil,
			strings.Replace(base, "    name: Example\n", "    name: ${OOPS\n", 1),
			nil, "", "config: resources[0].name: unterminated ${"},
		{"expands a bare reference in a flow list", map[string]string{"EXTRA": "write"},
			strings.Replace(base, "scopes: [read]", "scopes: [read, ${EXTRA}]", 1),
			func(c *Config) string { return strings.Join(c.Resources[1].Scopes, " ") }, "read write", ""},
		{"expands a reference that opens a flow list", map[string]string{"EXTRA": "write"},
			strings.Replace(base, "scopes: [read]", "scopes: [${EXTRA}]", 1),
			func(c *Config) string { return strings.Join(c.Resources[1].Scopes, " ") }, "write", ""},
		{"expands a bare reference in a flow mapping", map[string]string{"GC": "7m"},
			base + "gc: {interval: ${GC}}\n",
			func(c *Config) string { return time.Duration(c.GC.Interval).String() }, "7m0s", ""},
		{"keeps a reference in a key as written", nil,
			base + "${KEY}: x\n",
			nil, "", "config: ${KEY}: unknown key"},
		{"rejects an invalid variable name", nil,
			strings.Replace(base, "    name: Example\n", "    name: ${1X}\n", 1),
			nil, "", "config: resources[0].name: invalid variable name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.src), envOf(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.want(c); got != tc.expect {
				t.Fatalf("got %q, want %q", got, tc.expect)
			}
		})
	}
}

func TestEnvironmentOverridesTheFile(t *testing.T) {
	env := envOf(map[string]string{
		"AUTHSERVER_ISSUER":  "https://override.example.com/tenant",
		"AUTHSERVER_LISTEN":  "127.0.0.1:9999",
		"AUTHSERVER_STORAGE": "sqlite:/tmp/x.db",
		"AUTHSERVER_SECRET":  strings.Repeat("k", 32),
	})
	c, err := Parse([]byte(base), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer != "https://override.example.com/tenant" || c.Listen != "127.0.0.1:9999" ||
		c.Storage != "sqlite:/tmp/x.db" || c.Secret != strings.Repeat("k", 32) {
		t.Fatalf("overrides not applied: %+v", c)
	}
	// An override is validated like the file.
	_, err = Parse([]byte(base), envOf(map[string]string{"AUTHSERVER_ISSUER": "ftp://x"}))
	if err == nil || !strings.HasPrefix(err.Error(), "config: issuer:") {
		t.Fatalf("bad override accepted: %v", err)
	}
}

func TestLoadWithoutAFileGivesDevDefaults(t *testing.T) {
	c, err := Load("", envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.FromFile || c.Issuer != "http://127.0.0.1:9000" || c.Listen != "127.0.0.1:9000" ||
		c.Storage != "sqlite:./authserver.db" {
		t.Fatalf("dev defaults: %+v", c)
	}
	if len(c.Resources) != 1 || c.Resources[0].URI != "http://127.0.0.1:8080/mcp" || !c.Resources[0].Default ||
		c.Resources[0].Name != "Example MCP server" || strings.Join(c.Resources[0].Scopes, " ") != "mcp:tools mcp:admin" {
		t.Fatalf("dev resource: %+v", c.Resources)
	}
	if !c.RegistrationEnabled() || !c.RegistrationOpen() || !c.CIMDEnabled() {
		t.Fatal("dev defaults must have open registration and CIMD on")
	}
	if c.IssuerInsecure() {
		t.Fatal("loopback http issuer must not be reported insecure")
	}
	c, err = Load("", envOf(map[string]string{"AUTHSERVER_STORAGE": "memory", "AUTHSERVER_ISSUER": "http://auth.internal:9000"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Storage != "memory" || !c.IssuerInsecure() {
		t.Fatalf("env on dev defaults: %+v", c)
	}
}

func TestLoadReadsAFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p, envOf(nil))
	if err != nil || !c.FromFile {
		t.Fatalf("%v %+v", err, c)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), envOf(nil)); err == nil || !strings.HasPrefix(err.Error(), "config: ") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestZeroTurnsOptionalWindowsOff(t *testing.T) {
	c, err := Parse([]byte(base+"tokens:\n  refresh_grace: 0\nregistration:\n  reap_idle_after: 0\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if *c.Tokens.RefreshGrace != 0 || *c.Registration.ReapIdleAfter != 0 || c.Registration.ReapNeverUsedAfter.D() != 24*time.Hour {
		t.Fatalf("grace %v, idle %v, never used %v", *c.Tokens.RefreshGrace, *c.Registration.ReapIdleAfter, *c.Registration.ReapNeverUsedAfter)
	}
}

func TestRedactedHidesEverySecret(t *testing.T) {
	h, err := password.Hash("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(base, "$2b$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0", h, 1) +
		"secret: " + strings.Repeat("S", 40) + "\nregistration:\n  initial_access_tokens: [iat-iat-iat-iat-iat-1]\n"
	c, err := Parse([]byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{strings.Repeat("S", 40), "0123456789abcdef0123", h, "iat-iat-iat-iat-iat-1"} {
		if strings.Contains(string(out), s) {
			t.Fatalf("redacted output contains %q:\n%s", s, out)
		}
	}
	if c.Clients[0].Secret != "0123456789abcdef0123" {
		t.Fatal("Redacted changed the config it was called on")
	}
	// The redacted document is itself a complete configuration listing.
	for _, k := range []string{"access_ttl: 15m0s", "algorithm: ES256", "migrate_on_start: true", "[redacted]"} {
		if !strings.Contains(string(out), k) {
			t.Fatalf("redacted output lacks %q:\n%s", k, out)
		}
	}
}

func TestStorageForLogHidesDatabasePasswords(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"hides the password in user info", "postgres://u:hunter2@db:5432/x?sslmode=disable", "postgres://u:redacted@db:5432/x?sslmode=disable"},
		{"hides a password parameter", "postgresql://db/x?password=hunter2&sslmode=disable", "postgresql://db/x?password=redacted&sslmode=disable"},
		{"keeps a URL without a password", "postgres://u@db/x", "postgres://u@db/x"},
		{"keeps sqlite paths", "sqlite:./a.db", "sqlite:./a.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{Storage: tc.in}
			if got := c.StorageForLog(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte("issuer: ${X}\n"))
	f.Add([]byte("resources:\n  - uri: &a http://h/\n    name: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, envOf(map[string]string{"X": "y"}))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		// Whatever is accepted validates again unchanged.
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails validation: %v", err)
		}
	})
}

// `storage: sqlite:PATH` is the default; a file that leaves
// the key out gets the same embedded database as running without a file.
func TestAFileWithoutStorageUsesTheSQLiteDefault(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(base, "storage: memory\n", "", 1)), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Storage != "sqlite:./authserver.db" {
		t.Fatalf("storage = %q, want sqlite:./authserver.db", c.Storage)
	}
	if kind, path := c.StorageKind(); kind != "sqlite" || path != "./authserver.db" {
		t.Fatalf("StorageKind = %q %q", kind, path)
	}
}
