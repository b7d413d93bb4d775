package deploy

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
		Ports       []string       `yaml:"ports"`
		Volumes     []string       `yaml:"volumes"`
		Networks    any            `yaml:"networks"`
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
		if s.NetworkMode != "" || s.Networks != nil {
			t.Errorf("service %s sets network_mode %q / networks %v; the stack runs on the default bridge network (host networking is Linux-only)", name, s.NetworkMode, s.Networks)
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

// hostPort splits a host:port or an http URL into host and port.
func hostPort(t *testing.T, s string) (string, string) {
	t.Helper()
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
		return u.Hostname(), u.Port()
	}
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return h, p
}

// On bridge networking every server listens on 0.0.0.0 in its container, its
// port is published on the host's loopback at the port of its public URL, and
// the servers reach the AS and each other by service name.
func TestComposeUsesTheSharedConfigAndPorts(t *testing.T) {
	c := loadCompose(t)
	env := readEnv(t)
	as := c.Services["authserver"]
	if got, _ := as.Environment["AUTHSERVER_CONFIG"].(string); got != "/etc/mcpauth/authserver.yaml" {
		t.Errorf("authserver AUTHSERVER_CONFIG = %q, want /etc/mcpauth/authserver.yaml", got)
	}
	if !slices.Contains(as.Volumes, "./deploy/authserver.yaml:/etc/mcpauth/authserver.yaml:ro") {
		t.Errorf("authserver does not mount deploy/authserver.yaml: %v", as.Volumes)
	}
	if s, _ := as.Environment["AUTHSERVER_STORAGE"].(string); !strings.HasPrefix(s, "postgres://") || !strings.Contains(s, "@postgres:5432/") {
		t.Errorf("authserver storage = %q, want PostgreSQL at the postgres service", s)
	}
	_, asPort := hostPort(t, env["AUTHSERVER_ISSUER"])
	if got, _ := as.Environment["AUTHSERVER_LISTEN"].(string); got != "0.0.0.0:"+asPort {
		t.Errorf("authserver AUTHSERVER_LISTEN = %q, want 0.0.0.0:%s", got, asPort)
	}
	checkPublished := func(svc, public string) {
		host, port := hostPort(t, public)
		if host != "127.0.0.1" {
			t.Errorf("%s: public URL %s is not on 127.0.0.1", svc, public)
		}
		if want := "127.0.0.1:" + port + ":" + port; !slices.Contains(c.Services[svc].Ports, want) {
			t.Errorf("%s publishes %v, want %s", svc, c.Services[svc].Ports, want)
		}
	}
	checkPublished("authserver", env["AUTHSERVER_ISSUER"])
	checkPublished("mcpserver", env["MCPSERVER_RESOURCE"])
	checkPublished("downstream", env["DOWNSTREAM_RESOURCE"])

	_, mcpPort := hostPort(t, env["MCPSERVER_LISTEN"])
	_, dsPort := hostPort(t, env["DOWNSTREAM_LISTEN"])
	flags := map[string]map[string]string{
		"mcpserver": {
			"--listen":              "0.0.0.0:" + mcpPort,
			"--resource":            env["MCPSERVER_RESOURCE"],
			"--issuer":              env["AUTHSERVER_ISSUER"],
			"--issuer-internal":     "http://authserver:" + asPort,
			"--downstream":          env["DOWNSTREAM_RESOURCE"],
			"--downstream-internal": "http://downstream:" + dsPort,
			"--client-id":           env["MCPSERVER_CLIENT_ID"],
		},
		"downstream": {
			"--listen":          "0.0.0.0:" + dsPort,
			"--resource":        env["DOWNSTREAM_RESOURCE"],
			"--issuer":          env["AUTHSERVER_ISSUER"],
			"--issuer-internal": "http://authserver:" + asPort,
		},
	}
	for svc, want := range flags {
		for flag, value := range want {
			if value == "" || strings.HasSuffix(value, ":") {
				t.Fatalf("stack.env lacks the value for %s %s", svc, flag)
			}
			if !slices.Contains(c.Services[svc].Command, flag+"="+value) {
				t.Errorf("%s command %v lacks %s=%s", svc, c.Services[svc].Command, flag, value)
			}
		}
	}
}

var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// interpolate expands compose's ${VAR} and ${VAR:-default} from env.
func interpolate(s string, env map[string]string) string {
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		sub := composeVar.FindStringSubmatch(m)
		if v := env[sub[1]]; v != "" {
			return v
		}
		return sub[3]
	})
}

// The authserver service's configuration, as the container sees it (the
// mounted file, env_file and environment), passes check-config, and its
// output never shows the database password.
func TestComposeAuthserverConfigPassesCheckConfig(t *testing.T) {
	c := loadCompose(t)
	as := c.Services["authserver"]
	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range readEnv(t) {
		environ = append(environ, k+"="+v)
	}
	var password string
	for k, v := range as.Environment {
		s := interpolate(fmt.Sprint(v), nil)
		if k == "AUTHSERVER_CONFIG" {
			// The mount maps the container path to the file in deploy/.
			for _, m := range as.Volumes {
				parts := strings.Split(m, ":")
				if len(parts) >= 2 && parts[1] == s {
					s = filepath.Join("..", parts[0])
				}
			}
		}
		if k == "AUTHSERVER_STORAGE" {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			password, _ = u.User.Password()
		}
		environ = append(environ, k+"="+s)
	}
	if password == "" {
		t.Fatal("the compose storage URL has no password to check the redaction with")
	}
	bin := staticBinary(t, "./cmd/authserver")
	cmd := exec.Command(bin, "check-config")
	cmd.Env = environ
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("check-config of the compose authserver: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"listen: 0.0.0.0:9000", "issuer: http://127.0.0.1:9000", "@postgres:5432/mcpauth"} {
		if !strings.Contains(out, want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr.String(), password) {
		t.Errorf("check-config shows the database password:\n%s%s", out, stderr.String())
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
