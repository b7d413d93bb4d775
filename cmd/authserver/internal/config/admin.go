package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Admin configures the admin HTTP API and /metrics, served on a listener of
// their own, off unless Listen is set.
type Admin struct {
	// Listen is the admin listener's host:port (127.0.0.1:9001). Empty:
	// no admin API and no /metrics.
	Listen string `yaml:"listen"`
	// Clients are the configured confidential clients that may call the
	// admin API, with client-credentials tokens for the admin resource
	// (AdminResource) and scope AdminScope.
	Clients []string `yaml:"clients"`
	// People are the subjects who may sign in to the console (/console/
	// on the admin listener): only they, and the people holding one of
	// Groups, may be granted the admin scope in a person's grant.
	People []string `yaml:"people"`
	// Groups: a person whose record lists one of them may sign in to the
	// console.
	Groups []string `yaml:"groups"`
	// ConsoleSessionTTL ends a console session this long after its
	// sign-in, whatever the AS session does (default 8h).
	ConsoleSessionTTL Duration `yaml:"console_session_ttl"`
	// ConsoleURL is the console's address as browsers reach it, such as
	// https://admin.example.com/console behind a TLS proxy. Empty:
	// http://{listen}/console.
	ConsoleURL string `yaml:"console_url"`
	// AuditRetention is how long the audit events copied into storage for
	// the console are kept there (the log keeps its own); 0 keeps none.
	// Default DefaultAuditRetention.
	AuditRetention *Duration `yaml:"audit_retention"`
}

// DefaultAuditRetention is admin.audit_retention when unset.
const DefaultAuditRetention = 7 * 24 * time.Hour

// StatsRetention is how long the hourly counts are kept in storage.
const StatsRetention = 30 * 24 * time.Hour

// KeptAuditFor is admin.audit_retention: 0 when audit events are not kept
// in storage.
func (c *Config) KeptAuditFor() time.Duration {
	if c.Admin.AuditRetention == nil {
		return DefaultAuditRetention
	}
	return max(c.Admin.AuditRetention.D(), 0)
}

// ConsoleClientID is the client_id of the console, a confidential client
// the server registers itself when the admin listener is on.
const ConsoleClientID = "mcpauth-console"

// ConsoleURL is the console's base URL: admin.console_url, else
// http://{admin.listen}/console with an unspecified host (":9001",
// "0.0.0.0:9001") read as 127.0.0.1.
func (c *Config) ConsoleURL() string {
	if c.Admin.ConsoleURL != "" {
		return strings.TrimSuffix(c.Admin.ConsoleURL, "/")
	}
	host, port, err := net.SplitHostPort(c.Admin.Listen)
	if err != nil {
		return "http://" + c.Admin.Listen + "/console"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/console"
}

// ConsoleAdmins reports whether the console has anyone who may sign in
// (admin.people or admin.groups).
func (c *Config) ConsoleAdmins() bool { return len(c.Admin.People) > 0 || len(c.Admin.Groups) > 0 }

// defaultConsoleSessionTTL is admin.console_session_ttl's default.
const defaultConsoleSessionTTL = 8 * time.Hour

// AdminScope is the scope the admin API requires.
const AdminScope = "admin"

// AdminEnabled reports whether the admin listener is configured.
func (c *Config) AdminEnabled() bool { return c.Admin.Listen != "" }

// AdminResource is the resource indicator (RFC 8707) of the admin API:
// {issuer}/admin. When the admin API is on, the server registers it with the
// single scope AdminScope, grantable only to admin.clients.
func (c *Config) AdminResource() string { return c.Issuer + "/admin" }

// IsAdminClient reports whether id is one of admin.clients.
func (c *Config) IsAdminClient(id string) bool {
	return c.AdminEnabled() && slices.Contains(c.Admin.Clients, id)
}

func (c *Config) validateAdmin() error {
	a := c.Admin
	if a.AuditRetention != nil && a.AuditRetention.D() < 0 {
		return errf("admin.audit_retention", "must not be negative (0 keeps no audit events in storage)")
	}
	if a.Listen == "" {
		if len(a.Clients) > 0 || c.ConsoleAdmins() {
			return errf("admin.listen", "required when admin.clients, admin.people or admin.groups is set")
		}
		return nil
	}
	if err := checkListen("admin.listen", a.Listen); err != nil {
		return err
	}
	if a.Listen == c.Listen {
		return errf("admin.listen", "must differ from listen (%s): the admin API has a listener of its own", c.Listen)
	}
	if len(a.Clients) == 0 && !c.ConsoleAdmins() {
		return errf("admin.clients", "at least one client (or a console user in admin.people or admin.groups) is required when admin.listen is set")
	}
	if d := a.ConsoleSessionTTL.D(); d < time.Minute || d > 7*24*time.Hour {
		return errf("admin.console_session_ttl", "must be between 1m and 168h, got %s", d)
	}
	if u := a.ConsoleURL; u != "" {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" || pu.User != nil ||
			strings.TrimSuffix(pu.Path, "/") != "/console" {
			return errf("admin.console_url", "must be an http(s) URL ending in /console, with no query or fragment, got %q", u)
		}
	}
	for i, p := range a.People {
		if p == "" {
			return errf(fmt.Sprintf("admin.people[%d]", i), "must not be empty")
		}
	}
	for i, g := range a.Groups {
		if g == "" {
			return errf(fmt.Sprintf("admin.groups[%d]", i), "must not be empty")
		}
	}
	for i, cl := range c.Clients {
		if cl.ID == ConsoleClientID {
			return errf(fmt.Sprintf("clients[%d].id", i), "%q is the console's own client, registered automatically when admin.listen is set", cl.ID)
		}
	}
	for i, r := range c.Resources {
		if r.URI == c.AdminResource() {
			return errf(fmt.Sprintf("resources[%d].uri", i), "%s is the admin API's resource, registered automatically when admin.listen is set", r.URI)
		}
	}
	for i, id := range a.Clients {
		p := fmt.Sprintf("admin.clients[%d]", i)
		j := slices.IndexFunc(c.Clients, func(cl Client) bool { return cl.ID == id })
		if j < 0 {
			return errf(p, "%q is not a configured client (clients[].id)", id)
		}
		cl := c.Clients[j]
		if cl.Public {
			return errf(p, "%q is a public client; the admin API needs a confidential one", id)
		}
		if !slices.Contains(cl.GrantTypes, "client_credentials") {
			return errf(p, "%q does not have the client_credentials grant (clients[%d].grant_types)", id, j)
		}
		if slices.Contains(a.Clients[:i], id) {
			return errf(p, "duplicate client %q", id)
		}
	}
	return nil
}
