package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

func env(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// The configuration of docs/GATEWAY.md, key for key
// (TestTheDocumentedConfigurationIsTheTestedOne holds them together).
const readmeConfig = `
listen: 127.0.0.1:8090
resource: https://mcp.acme.example/mcp     # this gateway's canonical URI: the tokens' aud
issuer: https://auth.acme.example          # the AS whose tokens it accepts
upstream: http://127.0.0.1:3001/mcp        # the MCP server behind it
scopes:
  base: [mcp:tools]                        # needed for every request
  tools: {admin_stats: [mcp:admin]}        # per tool
  methods: {resources/read: [mcp:read]}    # per JSON-RPC method
  prompts: {incident_report: [mcp:ops]}    # per prompt (prompts/get; prompts/list hides it)
  resources: {"db://{table}/rows": [mcp:db]}  # per resource URI or URI template
tenant_claim: tenant                       # optional: where the tenant comes from (never from arguments)
upstream_auth:                             # optional: how the gateway authenticates upstream
  exchange: {client_id: gw, client_secret: ${GW_SECRET}, resource: https://api.acme.example}
audit: {format: json}                      # json lines on stderr; a file path also allowed
`

func TestParseConfigReadsEveryKey(t *testing.T) {
	c, err := ParseConfig([]byte(readmeConfig), env(map[string]string{"GW_SECRET": "s3cret: with # signs"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8090" || c.Resource != "https://mcp.acme.example/mcp" || c.Issuer != "https://auth.acme.example" ||
		c.Upstream != "http://127.0.0.1:3001/mcp" || c.TenantClaim != "tenant" || c.Audit.Format != "json" {
		t.Errorf("%+v", c)
	}
	if c.Scopes.Base[0] != "mcp:tools" || c.Scopes.Tools["admin_stats"][0] != "mcp:admin" || c.Scopes.Methods["resources/read"][0] != "mcp:read" ||
		c.Scopes.Prompts["incident_report"][0] != "mcp:ops" || c.Scopes.Resources["db://{table}/rows"][0] != "mcp:db" {
		t.Errorf("scopes %+v", c.Scopes)
	}
	ex := c.UpstreamAuth.Exchange
	if ex.ClientID != "gw" || ex.ClientSecret != "s3cret: with # signs" || ex.Resource != "https://api.acme.example" {
		t.Errorf("exchange %+v", ex)
	}
	if c.Limits != DefaultLimits {
		t.Errorf("limits %+v, want the defaults", c.Limits)
	}
}

func TestParseConfigLimitsAndAuditFile(t *testing.T) {
	c, err := ParseConfig([]byte(`resource: http://127.0.0.1:8090/mcp
issuer: http://127.0.0.1:9000
upstream: http://127.0.0.1:3001/mcp
audit: {format: text, file: /var/log/gw.log}
limits:
  max_request_bytes: ${MAX}
  max_header_bytes: 8192
  idle_timeout: 1m
  upstream_header_timeout: 2s
`), env(map[string]string{"MAX": "1000"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxRequestBytes != 1000 || c.Limits.MaxHeaderBytes != 8192 || c.Limits.IdleTimeout != time.Minute ||
		c.Limits.UpstreamHeaderTimeout != 2*time.Second || c.Limits.UpstreamDialTimeout != DefaultLimits.UpstreamDialTimeout ||
		c.Audit.File != "/var/log/gw.log" || c.Audit.Format != "text" || c.Listen != "127.0.0.1:8090" {
		t.Errorf("%+v", c)
	}
}

func TestParseConfigRefusesMistakes(t *testing.T) {
	base := "resource: https://mcp.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:3001/mcp\n"
	tests := []struct{ name, text, want string }{
		{"names an unset variable", strings.Replace(base, "https://as.example", "${AS}", 1), "AS is not set"},
		{"refuses an unknown key", base + "upstreams: x\n", "upstreams"},
		{"refuses a misspelt nested key", base + "scopes: {bases: [a]}\n", "bases"},
		{"refuses metrics on the public listener", base + "metrics: {listen: 127.0.0.1:8090}\n", "metrics.listen"},
		{"refuses metrics on the public port of every address", base + "listen: 0.0.0.0:9100\nmetrics: {listen: 127.0.0.1:9100}\n", "metrics.listen"},
		{"refuses a short audit chain key", base + "audit: {chain_key: short}\n", "audit.chain_key"},
		{"refuses metrics on no host:port", base + "metrics: {listen: metrics}\n", "metrics.listen"},
		{"needs a resource", "issuer: https://as.example\nupstream: http://x/mcp\n", "resource"},
		{"needs an issuer", "resource: https://mcp.example/mcp\nupstream: http://x/mcp\n", "issuer"},
		{"needs an upstream", "resource: https://mcp.example/mcp\nissuer: https://as.example\n", "upstream"},
		{"refuses a resource with a fragment", strings.Replace(base, "/mcp\n", "/mcp#x\n", 1), "resource"},
		{"refuses an upstream that is not http", strings.Replace(base, "http://127.0.0.1:3001/mcp", "ftp://h/mcp", 1), "upstream"},
		{"refuses both upstream grants", base + "upstream_auth: {exchange: {client_id: a, client_secret: b, resource: https://x}, client_credentials: {client_id: a, client_secret: b, resource: https://x}}\n", "exclusive"},
		{"refuses an empty upstream_auth", base + "upstream_auth: {}\n", "upstream_auth"},
		{"needs the exchange's resource", base + "upstream_auth: {exchange: {client_id: a, client_secret: b}}\n", "resource"},
		{"needs the exchange's secret", base + "upstream_auth: {exchange: {client_id: a, resource: https://x}}\n", "client_secret"},
		{"refuses an unknown audit format", base + "audit: {format: xml}\n", "audit.format"},
		{"refuses a scope with a space", base + "scopes: {base: [\"a b\"]}\n", "scope"},
		{"refuses negative limits", base + "limits: {max_request_bytes: -1}\n", "negative"},
		{"refuses a bad duration", base + "limits: {idle_timeout: soon}\n", "soon"},
		{"refuses a listen address without port", base + "listen: localhost\n", "listen"},
		{"refuses aliases", base + "tenant_claim: &a x\naudit: {file: *a}\n", "aliases"},
		{"refuses an empty file", "", "empty"},
		{"refuses an issuer_internal with a path", base + "issuer_internal: http://authserver:9000/x\n", "issuer_internal"},
		{"refuses a list at the top", "- a\n", "config"},
		{"refuses a bad scope of a prompt", base + "scopes: {prompts: {p: [\"a\\\\b\"]}}\n", "scopes.prompts.p"},
		{"refuses a resource without a URI", base + "scopes: {resources: {\"\": [a]}}\n", "scopes.resources"},
		{"refuses a session_key under 32 bytes", base + "session_key: " + strings.Repeat("k", 31) + "\n", "session_key: 31 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.text), env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// The compose service runs the shipped configuration, which parses with
// the environment compose gives it (deploy/stack.env), from an image that
// holds the binary; its health check asks the configured listen address.
// (No Docker engine here: the files are checked.)
func TestComposeServiceRunsTheShippedConfig(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Entrypoint  []string          `yaml:"entrypoint"`
			Command     []string          `yaml:"command"`
			Volumes     []string          `yaml:"volumes"`
			EnvFile     string            `yaml:"env_file"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	svc, ok := compose.Services["mcpgateway"]
	if !ok {
		t.Fatal("docker-compose.yml has no mcpgateway service")
	}
	if !slices.Equal(svc.Entrypoint, []string{"/usr/local/bin/mcpgateway"}) || !slices.Equal(svc.Command, []string{"--config", "/etc/mcpauth/mcpgateway.yaml"}) ||
		!slices.Contains(svc.Volumes, "./deploy/mcpgateway.yaml:/etc/mcpauth/mcpgateway.yaml:ro") || !slices.Contains(svc.Ports, "127.0.0.1:8090:8090") {
		t.Fatalf("mcpgateway service %+v", svc)
	}
	env, err := launch.ReadEnvFile(filepath.Join("../..", svc.EnvFile))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range svc.Environment {
		env[k] = v // the service's environment overrides the env_file
	}
	data, err := os.ReadFile("../../deploy/mcpgateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("deploy/mcpgateway.yaml with %s: %v", svc.EnvFile, err)
	}
	_, port, _ := strings.Cut(c.Listen, ":")
	if hc := svc.Healthcheck.Test; len(hc) != 3 || hc[2] != "http://127.0.0.1:"+port+"/healthz" || c.Listen != "0.0.0.0:8090" {
		t.Errorf("health check %v does not ask the listen address %s", hc, c.Listen)
	}
	if c.IssuerInternal != "http://authserver:9000" || c.Issuer != "http://127.0.0.1:9000" || c.Resource != "http://127.0.0.1:8090/mcp" {
		t.Errorf("issuer %s (internal %s), resource %s", c.Issuer, c.IssuerInternal, c.Resource)
	}
	if _, err := NewGateway(c, Options{AuditWriter: discard{}}); err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "./cmd/mcpgateway") {
		t.Error("the Dockerfile does not build ./cmd/mcpgateway")
	}
}

// A secret may come from the file named by NAME_FILE, as in the
// authorization server's configuration; the value is never read as YAML.
func TestParseConfigReadsVariableFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw-secret")
	if err := os.WriteFile(path, []byte("from: a file # not YAML\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig([]byte(readmeConfig), env(map[string]string{"GW_SECRET_FILE": path}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.UpstreamAuth.Exchange.ClientSecret; got != "from: a file # not YAML" {
		t.Errorf("client_secret = %q, want the file's content without its newline", got)
	}
	_, err = ParseConfig([]byte(readmeConfig), env(map[string]string{"GW_SECRET": "s", "GW_SECRET_FILE": path}))
	if err == nil || !strings.Contains(err.Error(), "both GW_SECRET and GW_SECRET_FILE are set") {
		t.Errorf("both forms set: err = %v", err)
	}
	_, err = ParseConfig([]byte(readmeConfig), env(map[string]string{"GW_SECRET_FILE": filepath.Join(t.TempDir(), "absent")}))
	if err == nil || !strings.Contains(err.Error(), "GW_SECRET_FILE: open") {
		t.Errorf("unreadable file: err = %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add(readmeConfig)
	f.Add("resource: ${R}\nissuer: https://a\nupstream: http://u/mcp\nlimits: {idle_timeout: ${R}}\n")
	f.Add("a: &x [*x]\n")
	f.Add("scopes: {tools: {\"\": [a]}}\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseConfig([]byte(text), env(map[string]string{"GW_SECRET": "s", "R": "https://r.example/mcp"}))
		if err != nil {
			return
		}
		// Whatever parses is complete: the gateway can be wired from it.
		if c.Resource == "" || c.Issuer == "" || c.Upstream == "" || c.Listen == "" || c.Limits.MaxRequestBytes <= 0 ||
			c.Limits.MaxHeaderBytes <= 0 || c.Audit.Format == "" {
			t.Fatalf("incomplete config accepted: %+v", c)
		}
		if _, err := NewGateway(c, Options{AuditWriter: discard{}}); err != nil {
			t.Fatalf("config accepted but not wirable: %v\n%s", err, text)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// session_key is any string of at least 32 bytes, from the file too
// (its trailing newline removed, as for every NAME_FILE).
func TestParseConfigReadsTheSessionKey(t *testing.T) {
	base := "resource: https://mcp.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:3001/mcp\nsession_key: ${GW_SESSION_KEY}\n"
	key := "0123456789abcdef0123456789abcdef"
	path := filepath.Join(t.TempDir(), "session_key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig([]byte(base), env(map[string]string{"GW_SESSION_KEY_FILE": path}))
	if err != nil || c.SessionKey != key {
		t.Fatalf("session_key %q, err %v; want the file's 32 bytes", c.SessionKey, err)
	}
	if _, err := ParseConfig([]byte(base), env(map[string]string{"GW_SESSION_KEY": key[1:]})); err == nil || !strings.Contains(err.Error(), "session_key") {
		t.Fatalf("a 31-byte key: err %v", err)
	}
}

func TestParseConfigTakesAMetricsListener(t *testing.T) {
	base := "resource: https://mcp.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:3001/mcp\n"
	for _, text := range []string{
		base + "metrics: {listen: 127.0.0.1:9464}\n",
		base + "listen: 127.0.0.1:0\nmetrics: {listen: 127.0.0.1:0}\n",
		base + "listen: 10.0.0.1:8090\nmetrics: {listen: 127.0.0.1:8090}\n",
	} {
		c, err := ParseConfig([]byte(text), func(string) (string, bool) { return "", false })
		if err != nil || c.Metrics.Listen == "" {
			t.Errorf("%q: %v", text, err)
		}
	}
}
