package config

import (
	"strings"
	"testing"
	"time"
)

func TestAdminSettingsAreChecked(t *testing.T) {
	const base = `storage: memory
resources:
  - uri: https://mcp.example.com/mcp
    scopes: [mcp:tools]
clients:
  - id: ops-bot
    secret: ops-bot-secret-0123456789
    grant_types: [client_credentials]
  - id: app
    public: true
    redirect_uris: [http://127.0.0.1/cb]
`
	cases := []struct {
		name, extra, wantErr string
	}{
		{"accepts an admin client", "admin: {listen: 127.0.0.1:9001, clients: [ops-bot]}\n", ""},
		{"is off without admin", "", ""},
		{"refuses clients without a listener", "admin: {clients: [ops-bot]}\n", "admin.listen: required when admin.clients"},
		{"refuses console people without a listener", "admin: {people: [alice]}\n", "admin.listen: required when admin.clients, admin.people"},
		{"accepts a console without admin clients", "admin: {listen: 127.0.0.1:9001, people: [alice], groups: [security]}\n", ""},
		{"refuses a short console session", "admin: {listen: 127.0.0.1:9001, clients: [ops-bot], console_session_ttl: 10s}\n", "admin.console_session_ttl: must be between 1m and 168h"},
		{"refuses a console URL elsewhere than /console", "admin: {listen: 127.0.0.1:9001, clients: [ops-bot], console_url: 'https://admin.example/other'}\n", "admin.console_url: must be an http(s) URL ending in /console"},
		{"refuses a console URL with a query", "admin: {listen: 127.0.0.1:9001, clients: [ops-bot], console_url: 'https://admin.example/console?x=1'}\n", "admin.console_url"},
		{"refuses an empty group", "admin: {listen: 127.0.0.1:9001, clients: [ops-bot], groups: ['']}\n", "admin.groups[0]: must not be empty"},
		{"refuses a listener without clients", "admin: {listen: 127.0.0.1:9001}\n", "admin.clients: at least one client"},
		{"refuses a bad address", "admin: {listen: 'nowhere', clients: [ops-bot]}\n", "admin.listen: not a host:port"},
		{"refuses the main listener's address", "admin: {listen: 127.0.0.1:9000, clients: [ops-bot]}\n", "admin.listen: must differ from listen"},
		{"refuses an unknown client", "admin: {listen: 127.0.0.1:9001, clients: [nobody]}\n", `admin.clients[0]: "nobody" is not a configured client`},
		{"refuses a public client", "admin: {listen: 127.0.0.1:9001, clients: [app]}\n", `admin.clients[0]: "app" is a public client`},
		{"refuses a client listed twice", "admin: {listen: 127.0.0.1:9001, clients: [ops-bot, ops-bot]}\n", "admin.clients[1]: duplicate"},
		{"refuses a resource that is the admin resource", "issuer: https://mcp.example.com\nadmin: {listen: 127.0.0.1:9001, clients: [ops-bot]}\n",
			"resources[0].uri: https://mcp.example.com/admin is the admin API's resource"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := base + tc.extra
			if strings.Contains(tc.name, "admin resource") {
				text = strings.Replace(text, "https://mcp.example.com/mcp", "https://mcp.example.com/admin", 1)
			}
			cfg, err := Parse([]byte(text), func(string) (string, bool) { return "", false })
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(tc.extra, "people") {
					if !cfg.AdminEnabled() || !cfg.ConsoleAdmins() || cfg.Admin.ConsoleSessionTTL.D().Hours() != 8 || cfg.ConsoleURL() != "http://127.0.0.1:9001/console" {
						t.Fatalf("console settings: %+v %s", cfg.Admin, cfg.ConsoleURL())
					}
					return
				}
				if tc.extra != "" && (!cfg.AdminEnabled() || !cfg.IsAdminClient("ops-bot") || cfg.IsAdminClient("app") || cfg.AdminResource() != cfg.Issuer+"/admin") {
					t.Fatalf("admin settings: %+v", cfg.Admin)
				}
				if tc.extra == "" && (cfg.AdminEnabled() || cfg.IsAdminClient("ops-bot")) {
					t.Fatal("admin on by default")
				}
				if cfg.Log.Access == nil || !*cfg.Log.Access {
					t.Fatal("access log off by default")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// admin.audit_retention is 7 days when unset, 0 turns keeping off, and a
// negative one is refused; it needs no admin listener.
func TestAuditRetention(t *testing.T) {
	for _, c := range []struct {
		extra   string
		want    time.Duration
		wantErr string
	}{
		{"", DefaultAuditRetention, ""},
		{"admin: {audit_retention: 24h}\n", 24 * time.Hour, ""},
		{"admin: {audit_retention: 0}\n", 0, ""},
		{"admin: {audit_retention: -1h}\n", 0, "admin.audit_retention: must not be negative"},
		{"admin: {audit_retention: soon}\n", 0, "admin.audit_retention"},
	} {
		cfg, err := Parse([]byte("storage: memory\nresources: [{uri: https://mcp.example.com/mcp, scopes: [mcp:tools]}]\n"+c.extra), func(string) (string, bool) { return "", false })
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("%q: got %v, want %q", c.extra, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.extra, err)
		}
		if got := cfg.KeptAuditFor(); got != c.want {
			t.Fatalf("%q: KeptAuditFor = %v, want %v", c.extra, got, c.want)
		}
	}
	if DefaultAuditRetention != 7*24*time.Hour {
		t.Fatalf("DefaultAuditRetention = %v, want 7 days", DefaultAuditRetention)
	}
}
