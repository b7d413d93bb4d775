package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

// compose is the part of docker-compose.yml the tests look at.
type compose struct {
	Services map[string]struct {
		Image       string         `yaml:"image"`
		Build       any            `yaml:"build"`
		NetworkMode string         `yaml:"network_mode"`
		Entrypoint  []string       `yaml:"entrypoint"`
		Command     []string       `yaml:"command"`
		Environment map[string]any `yaml:"environment"`
		EnvFile     any            `yaml:"env_file"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	return c
}

// readEnv parses stack.env with the parser the local launcher
// (examples/stack) reads it with.
func readEnv(t *testing.T) map[string]string {
	t.Helper()
	env, err := launch.ReadEnvFile("stack.env")
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestComposeServicesAreHealthChecked(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"postgres", "authserver", "mcpserver", "downstream"} {
		s, ok := c.Services[name]
		if !ok {
			t.Errorf("service %s is missing", name)
			continue
		}
		if len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" {
			t.Errorf("service %s has no exec-form health check: %v", name, s.Healthcheck.Test)
		}
		if s.NetworkMode != "host" {
			t.Errorf("service %s uses network %q, want host (same URLs as the local stack)", name, s.NetworkMode)
		}
	}
}

func TestComposeStartsInDependencyOrder(t *testing.T) {
	c := loadCompose(t)
	want := map[string][]string{
		"authserver": {"postgres"},
		"downstream": {"authserver"},
		"mcpserver":  {"authserver", "downstream"},
	}
	for svc, deps := range want {
		for _, d := range deps {
			if got := c.Services[svc].DependsOn[d].Condition; got != "service_healthy" {
				t.Errorf("%s depends on %s with condition %q, want service_healthy", svc, d, got)
			}
		}
	}
}

func TestComposeUsesTheSharedConfigAndPorts(t *testing.T) {
	c := loadCompose(t)
	env := readEnv(t)
	as := c.Services["authserver"]
	if !slices.Contains(as.Command, "/etc/mcpauth/authserver.yaml") {
		t.Errorf("authserver command %v does not read /etc/mcpauth/authserver.yaml", as.Command)
	}
	if s, _ := as.Environment["AUTHSERVER_STORAGE"].(string); !strings.HasPrefix(s, "postgres://") {
		t.Errorf("authserver storage = %q, want PostgreSQL", s)
	}
	flags := map[string]map[string]string{
		"mcpserver": {
			"--listen":   env["MCPSERVER_LISTEN"],
			"--resource": env["MCPSERVER_RESOURCE"],
			"--issuer":   env["AUTHSERVER_ISSUER"],
		},
		"downstream": {
			"--listen":   env["DOWNSTREAM_LISTEN"],
			"--resource": env["DOWNSTREAM_RESOURCE"],
			"--issuer":   env["AUTHSERVER_ISSUER"],
		},
	}
	for svc, want := range flags {
		for flag, value := range want {
			if value == "" {
				t.Fatalf("stack.env lacks the value for %s %s", svc, flag)
			}
			if !slices.Contains(c.Services[svc].Command, flag+"="+value) {
				t.Errorf("%s command %v lacks %s=%s", svc, c.Services[svc].Command, flag, value)
			}
		}
	}
	if got := c.Services["mcpserver"].Command; !slices.Contains(got, "--downstream="+env["DOWNSTREAM_RESOURCE"]) {
		t.Errorf("mcpserver command %v does not point at the downstream resource", got)
	}
}

// asConfig is the part of authserver.yaml the tests look at.
type asConfig struct {
	Issuer    string `yaml:"issuer"`
	Listen    string `yaml:"listen"`
	Resources []struct {
		URI     string   `yaml:"uri"`
		Scopes  []string `yaml:"scopes"`
		Default bool     `yaml:"default"`
	} `yaml:"resources"`
	Clients []struct {
		ID         string   `yaml:"id"`
		GrantTypes []string `yaml:"grant_types"`
		Resources  []string `yaml:"resources"`
	} `yaml:"clients"`
	Users []struct {
		Username     string `yaml:"username"`
		PasswordHash string `yaml:"password_hash"`
	} `yaml:"users"`
}

func TestASConfigMatchesTheStack(t *testing.T) {
	b, err := os.ReadFile("authserver.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg asConfig
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("authserver.yaml does not parse: %v", err)
	}
	env := readEnv(t)
	if cfg.Issuer != env["AUTHSERVER_ISSUER"] || cfg.Listen != "127.0.0.1:9000" {
		t.Errorf("issuer %q listen %q, want %q on 127.0.0.1:9000", cfg.Issuer, cfg.Listen, env["AUTHSERVER_ISSUER"])
	}
	resources := map[string][]string{}
	defaults := 0
	for _, r := range cfg.Resources {
		resources[r.URI] = r.Scopes
		if r.Default {
			defaults++
		}
	}
	if defaults != 1 {
		t.Errorf("%d default resources, want exactly 1", defaults)
	}
	mcp := resources[env["MCPSERVER_RESOURCE"]]
	if !slices.Contains(mcp, "mcp:tools") || !slices.Contains(mcp, "mcp:admin") {
		t.Errorf("MCP resource %s has scopes %v, want mcp:tools and mcp:admin", env["MCPSERVER_RESOURCE"], mcp)
	}
	if _, ok := resources[env["DOWNSTREAM_RESOURCE"]]; !ok {
		t.Errorf("downstream resource %s is not configured", env["DOWNSTREAM_RESOURCE"])
	}
	var exchanger bool
	for _, c := range cfg.Clients {
		if c.ID == env["MCPSERVER_CLIENT_ID"] {
			exchanger = slices.Contains(c.GrantTypes, "urn:ietf:params:oauth:grant-type:token-exchange") &&
				slices.Contains(c.Resources, env["DOWNSTREAM_RESOURCE"])
		}
	}
	if !exchanger {
		t.Errorf("client %s may not exchange tokens for %s", env["MCPSERVER_CLIENT_ID"], env["DOWNSTREAM_RESOURCE"])
	}
	for _, u := range cfg.Users {
		if !strings.HasPrefix(u.PasswordHash, "$argon2id$") {
			t.Errorf("user %s has no argon2id hash", u.Username)
		}
	}
}
