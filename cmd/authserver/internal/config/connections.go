package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpauth/mcpauth/metadata"
)

// Connection is one third-party service people connect their account to
// (GitHub, Google, Slack, ...): the AS is an OAuth 2.0 client there
// (RFC 6749 §4.1 with PKCE, RFC 7636), keeps each person's tokens sealed,
// and releases them by token exchange (RFC 8693) to the MCP servers named
// in Clients.
type Connection struct {
	// ID names the connection in URLs ({issuer}/connections/{id}/callback)
	// and records: 1 to 32 of [a-z0-9-].
	ID string `yaml:"id"`
	// Name is shown on the pages; default ID.
	Name string `yaml:"name"`
	// AuthorizationEndpoint and TokenEndpoint are the provider's endpoints
	// (RFC 6749 §3); or Issuer, whose RFC 8414 (or OpenID Connect
	// discovery) metadata names them. Exactly one of the two forms.
	AuthorizationEndpoint string `yaml:"authorization_endpoint"`
	TokenEndpoint         string `yaml:"token_endpoint"`
	Issuer                string `yaml:"issuer"`
	// RevocationEndpoint is the provider's RFC 7009 endpoint, called on
	// disconnect; optional (with Issuer, discovery may name it).
	RevocationEndpoint string `yaml:"revocation_endpoint"`
	// ClientID and ClientSecret are the AS's credentials at the provider.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// Scopes asked of the provider (its own scope names).
	Scopes []string `yaml:"scopes"`
	// Resource is the URI an exchange names (RFC 8693 resource) to get
	// this connection's token; distinct from every resources[].uri.
	Resource string `yaml:"resource"`
	// Clients are the configured confidential clients that may receive
	// the tokens.
	Clients []string `yaml:"clients"`
}

func (c *Config) connectionDefaults() {
	for i := range c.Connections {
		if c.Connections[i].Name == "" {
			c.Connections[i].Name = c.Connections[i].ID
		}
	}
}

// validateConnections checks connections[] against the configured
// resources and clients, and canonicalises each resource.
func (c *Config) validateConnections(byURI map[string]*Resource) error {
	ids := map[string]bool{}
	resources := map[string]int{}
	for i := range c.Connections {
		x := &c.Connections[i]
		p := fmt.Sprintf("connections[%d]", i)
		if !upstreamIDPattern.MatchString(x.ID) {
			return errf(p+".id", "must be 1 to 32 of a-z, 0-9 and -, got %q", x.ID)
		}
		if ids[x.ID] {
			return errf(p+".id", "duplicate connection %q", x.ID)
		}
		ids[x.ID] = true
		if len(x.Name) > 80 || strings.ContainsFunc(x.Name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return errf(p+".name", "must be at most 80 characters without control characters")
		}
		endpoints := x.AuthorizationEndpoint != "" || x.TokenEndpoint != ""
		switch {
		case endpoints && x.Issuer != "":
			return errf(p+".issuer", "set issuer or authorization_endpoint and token_endpoint, not both")
		case x.Issuer != "":
			if err := checkUpstreamIssuer(x.Issuer); err != nil {
				return errf(p+".issuer", "%v", err)
			}
		case x.AuthorizationEndpoint == "":
			return errf(p+".authorization_endpoint", "required (or issuer, for discovery)")
		case x.TokenEndpoint == "":
			return errf(p+".token_endpoint", "required (or issuer, for discovery)")
		}
		for _, e := range []struct{ key, v string }{
			{"authorization_endpoint", x.AuthorizationEndpoint},
			{"token_endpoint", x.TokenEndpoint},
			{"revocation_endpoint", x.RevocationEndpoint},
		} {
			if e.v == "" {
				continue
			}
			if err := checkEndpointURL(e.v); err != nil {
				return errf(p+"."+e.key, "%v", err)
			}
		}
		if x.ClientID == "" {
			return errf(p+".client_id", "required")
		}
		if x.ClientSecret == "" {
			return errf(p+".client_secret", "required (use ${VAR})")
		}
		if err := checkScopes(p+".scopes", x.Scopes); err != nil {
			return err
		}
		canon, err := metadata.CanonicalResource(x.Resource)
		if err != nil {
			return errf(p+".resource", "not an absolute http(s) URI without query or fragment: %q", x.Resource)
		}
		if byURI[canon] != nil {
			return errf(p+".resource", "%s is a configured resource; a connection names the provider's API, which the AS issues no tokens for", canon)
		}
		if j, dup := resources[canon]; dup {
			return errf(p+".resource", "connections[%d] has this resource already", j)
		}
		resources[canon] = i
		x.Resource = canon
		if len(x.Clients) == 0 {
			return errf(p+".clients", "at least one client is required: the MCP servers that may receive these tokens")
		}
		for j, id := range x.Clients {
			k := slices.IndexFunc(c.Clients, func(cl Client) bool { return cl.ID == id })
			cp := fmt.Sprintf("%s.clients[%d]", p, j)
			switch {
			case k < 0:
				return errf(cp, "%q is not a configured client", id)
			case c.Clients[k].Public:
				return errf(cp, "%q is a public client; only confidential clients may receive provider tokens", id)
			case len(c.Clients[k].Resources) == 0:
				// The subject token of an exchange must be for the
				// calling server's own resource; a client allowed every
				// resource would accept any of the person's tokens.
				return errf(cp, "client %q must list its own resource in resources", id)
			}
		}
	}
	return nil
}

// checkEndpointURL accepts https URLs, and http ones on loopback hosts.
func checkEndpointURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return fmt.Errorf("must be an absolute https URL without fragment, got %q", s)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && IsLoopback(u.Hostname()):
	default:
		return fmt.Errorf("must be https (plain http only on a loopback host, for development), got %q", s)
	}
	return nil
}

// ConnectionIDs returns the ids of the configured connections, in order.
func (c *Config) ConnectionIDs() []string {
	out := make([]string, 0, len(c.Connections))
	for _, x := range c.Connections {
		out = append(out, x.ID)
	}
	return out
}
