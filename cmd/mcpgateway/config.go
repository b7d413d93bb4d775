package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/internal/auditchain"
	"github.com/mcpauth/mcpauth/internal/envvar"
	"github.com/mcpauth/mcpauth/internal/yamlenv"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/toolpolicy"
)

// Config is the gateway's configuration file. The keys are public interface;
// docs/GATEWAY.md documents each.
type Config struct {
	Listen   string `yaml:"listen"`
	Resource string `yaml:"resource"`
	Issuer   string `yaml:"issuer"`
	// IssuerInternal is the origin at which the gateway reaches the AS when
	// it is not the issuer's (http://authserver:9000 in a container
	// network); tokens are still checked against Issuer.
	IssuerInternal string       `yaml:"issuer_internal"`
	Upstream       string       `yaml:"upstream"`
	Scopes         ScopesConfig `yaml:"scopes"`
	TenantClaim    string       `yaml:"tenant_claim"`
	// UpstreamAuth: how the gateway authenticates to the upstream. Nil:
	// the upstream gets no Authorization header at all.
	UpstreamAuth *UpstreamAuth `yaml:"upstream_auth"`
	Audit        AuditConfig   `yaml:"audit"`
	// Introspection switches token checks to RFC 7662 with these credentials.
	Introspection *ClientConfig `yaml:"introspection"`
	Limits        Limits        `yaml:"limits"`
	// DPoP configures DPoP-bound tokens (RFC 9449 §7), accepted with
	// proofs for resource, the gateway's public URL, whether set or not;
	// set, it can require them or narrow the algorithms.
	DPoP *DPoPConfig `yaml:"dpop"`
	// SessionKey signs the session IDs handed to clients
	// (rsmiddleware.SessionBinding.Key): any string of at least 32 bytes,
	// the same at every instance behind one resource. Empty: a random key
	// drawn at start, so sessions end with the process and are not shared
	// between instances.
	SessionKey string `yaml:"session_key"`
	// Policy: CEL rules on who may make which request with which
	// arguments, and arguments set from the caller (toolpolicy,
	// docs/POLICY.md).
	Policy toolpolicy.Config `yaml:"policy"`
	// RateLimits: token buckets per subject, client or tenant, of this
	// instance.
	RateLimits []toolpolicy.RateLimit `yaml:"rate_limits"`
	// Identity, when set, sends the upstream a signed JWT naming the
	// caller on every forwarded request.
	Identity *IdentityConfig `yaml:"identity"`
	// Metrics serves the gateway's Prometheus metrics on a listener of
	// its own; none when Metrics.Listen is empty.
	Metrics MetricsConfig `yaml:"metrics"`
	// Pins offers only tools whose definitions are approved in a file
	// (docs/TOOLS.md).
	Pins *PinsConfig `yaml:"pins"`
	// Screening matches tool definitions against instruction patterns
	// (docs/TOOLS.md).
	Screening *ScreeningConfig `yaml:"screening"`
	// Approval holds the calls of the tools it names until a person
	// approves each on the AS's page (docs/TOOLS.md).
	Approval *ApprovalConfig `yaml:"approval"`

	// policy and limits are Policy and RateLimits compiled by check.
	policy *toolpolicy.Engine
	limits *toolpolicy.Limiter
	// pins and screening are Pins and Screening made by check.
	pins      *rsmiddleware.ToolPins
	screening *rsmiddleware.Screening
}

// ApprovalConfig names the tools whose calls need a person's approval and
// the confidential client that asks the AS (rsmiddleware.Approval).
type ApprovalConfig struct {
	// Tools are globs over tool names (* for any run of characters).
	Tools []string `yaml:"tools"`
	// TTL is how long a pending or approved call stays usable at the AS;
	// zero: 5 minutes.
	TTL time.Duration `yaml:"ttl"`
	// ClientID and ClientSecret: a confidential client of the AS listed in
	// resources[].approval_clients of the gateway's resource.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
}

// PinsConfig names the pins file and its mode (rsmiddleware.ToolPins).
type PinsConfig struct {
	// File holds the approved tool definitions: tool name -> sha256 and
	// definition, and the pending ones.
	File string `yaml:"file"`
	// Mode is enforce (the default) or learn (trust on first use).
	Mode string `yaml:"mode"`
}

// ScreeningConfig configures the screening of tool definitions
// (rsmiddleware.Screening).
type ScreeningConfig struct {
	// Action is hide (the default) or audit.
	Action string `yaml:"action"`
	// Patterns are regular expressions added to the built-in list.
	Patterns []string `yaml:"patterns"`
}

// DPoPConfig configures DPoP at the gateway (rsmiddleware.DPoPConfig).
// Each proof is usable once at this instance; behind several instances
// a replayed proof is bounded by the proof window (RFC 9449 §11.1).
type DPoPConfig struct {
	// Required refuses tokens that are not DPoP-bound; PRM then says
	// dpop_bound_access_tokens_required.
	Required bool `yaml:"required"`
	// Algs are the accepted proof algorithms, a subset of dpop.DefaultAlgs
	// (all of them when empty).
	Algs []string `yaml:"algs"`
}

// ScopesConfig maps requests to the scopes they need (rsmiddleware.Scopes).
type ScopesConfig struct {
	Base    []string            `yaml:"base"`
	Tools   map[string][]string `yaml:"tools"`
	Methods map[string][]string `yaml:"methods"`
	// Prompts: prompt name -> scopes (prompts/get of it; prompts/list
	// hides it without them).
	Prompts map[string][]string `yaml:"prompts"`
	// Resources: resource URI or RFC 6570 URI template -> scopes
	// (resources/read of it; resources/list and resources/templates/list
	// hide it without them).
	Resources map[string][]string `yaml:"resources"`
}

// rs is the rsmiddleware form of s.
func (s ScopesConfig) rs() rsmiddleware.Scopes {
	return rsmiddleware.Scopes{Base: s.Base, Tools: s.Tools, Methods: s.Methods, Prompts: s.Prompts, Resources: s.Resources}
}

// UpstreamAuth holds exactly one way of obtaining the gateway's own token.
type UpstreamAuth struct {
	// Exchange: RFC 8693 token exchange of the caller's token; the upstream
	// token names the caller as sub and the gateway in act.
	Exchange *GrantConfig `yaml:"exchange"`
	// ClientCredentials: an RFC 6749 §4.4 token of the gateway itself.
	ClientCredentials *GrantConfig `yaml:"client_credentials"`
}

// GrantConfig is a confidential client of the AS and the upstream's
// resource URI (RFC 8707), the audience of the tokens it obtains.
type GrantConfig struct {
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
	Resource     string   `yaml:"resource"`
	Scopes       []string `yaml:"scopes"`
}

// ClientConfig is a client ID and secret.
type ClientConfig struct {
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
}

// AuditConfig says where the audit lines go.
type AuditConfig struct {
	// Format: json (the default), text, or off.
	Format string `yaml:"format"`
	// File, when set, receives the lines (appended); otherwise stderr.
	File string `yaml:"file"`
	// ChainKey, when set (at least 32 bytes), makes the lines
	// tamper-evident: each carries a chain value, an HMAC-SHA256 under a
	// key derived from it (internal/auditchain), checked by
	// `mcpgateway audit verify`. Empty: no chain.
	ChainKey string `yaml:"chain_key"`
}

// MetricsConfig says where the Prometheus metrics are served.
type MetricsConfig struct {
	// Listen is the host:port of the metrics listener (GET /metrics),
	// never the public listener's. Empty: no metrics.
	Listen string `yaml:"listen"`
}

// sameListener reports whether the host:port addresses a and b (both
// valid) would bind the same socket: one port, not 0, and one host, or a
// wildcard host on either side.
func sameListener(a, b string) bool {
	ah, ap, _ := net.SplitHostPort(a)
	bh, bp, _ := net.SplitHostPort(b)
	if ap != bp || ap == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ah == bh || wild(ah) || wild(bh)
}

// Limits bound what a client or the upstream can make the gateway hold.
// Zero values are the defaults of DefaultLimits.
type Limits struct {
	MaxRequestBytes       int64         `yaml:"max_request_bytes"`
	MaxResponseBytes      int64         `yaml:"max_response_bytes"`
	MaxHeaderBytes        int           `yaml:"max_header_bytes"`
	ReadHeaderTimeout     time.Duration `yaml:"read_header_timeout"`
	IdleTimeout           time.Duration `yaml:"idle_timeout"`
	UpstreamDialTimeout   time.Duration `yaml:"upstream_dial_timeout"`
	UpstreamHeaderTimeout time.Duration `yaml:"upstream_header_timeout"`
	// ReadBodyTimeout bounds the time a POST body takes to arrive, from
	// the end of its headers; answers, streams included, are not bounded.
	ReadBodyTimeout time.Duration `yaml:"read_body_timeout"`
}

// DefaultLimits are the limits used for zero values.
var DefaultLimits = Limits{
	MaxRequestBytes:       4 << 20,
	MaxResponseBytes:      16 << 20,
	MaxHeaderBytes:        64 << 10,
	ReadHeaderTimeout:     10 * time.Second,
	IdleTimeout:           120 * time.Second,
	UpstreamDialTimeout:   5 * time.Second,
	UpstreamHeaderTimeout: 60 * time.Second,
	ReadBodyTimeout:       30 * time.Second,
}

// Lookup reads an environment variable; os.LookupEnv is one.
type Lookup = envvar.Lookup

// ParseConfig reads a configuration file: YAML, `${NAME}` in values replaced
// by the environment variable NAME or the content of the file named by
// NAME_FILE (yamlenv: a variable set in neither form is an error, and its
// value is never read as YAML, so `{client_secret: ${GW_SECRET}}` is valid
// flow YAML), unknown keys refused, then checked and completed with
// defaults.
func ParseConfig(data []byte, env Lookup) (*Config, error) {
	root, err := yamlenv.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if root == nil {
		return nil, errors.New("config: empty file")
	}
	visits := 0
	if err := expandNode(root, env, &visits); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var buf bytes.Buffer
	if err := yaml.NewEncoder(&buf).Encode(root); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := &Config{}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// maxNodes bounds the walk.
const maxNodes = 100000

// expandNode replaces `${NAME}` in every scalar value (never in keys),
// naming the key of a failure.
func expandNode(n *yaml.Node, env Lookup, visits *int) error {
	if *visits++; *visits > maxNodes {
		return errors.New("document too large")
	}
	switch n.Kind {
	case yaml.AliasNode:
		return errors.New("aliases are not supported")
	case yaml.ScalarNode:
		return yamlenv.Expand(n, env)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind != yaml.ScalarNode || k.Value == "<<" {
				return errors.New("merge keys and complex keys are not supported")
			}
			if err := expandNode(n.Content[i+1], env, visits); err != nil {
				return fmt.Errorf("%s: %w", n.Content[i].Value, err)
			}
		}
	default:
		for _, c := range n.Content {
			if err := expandNode(c, env, visits); err != nil {
				return err
			}
		}
	}
	return nil
}

// check validates c and fills in defaults.
func (c *Config) check() error {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8090"
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %q is not host:port", c.Listen)
	}
	if m := c.Metrics.Listen; m != "" {
		if _, _, err := net.SplitHostPort(m); err != nil {
			return fmt.Errorf("metrics.listen: %q is not host:port", m)
		}
		if sameListener(m, c.Listen) {
			return fmt.Errorf("metrics.listen: %q is the public listener (listen); the metrics need a listener of their own", m)
		}
	}
	if c.Resource == "" {
		return errors.New("resource: required (the gateway's canonical URI, the tokens' aud)")
	}
	res, err := metadata.CanonicalResource(c.Resource)
	if err != nil {
		return fmt.Errorf("resource: %v", err)
	}
	c.Resource = res
	if c.Issuer == "" {
		return errors.New("issuer: required")
	}
	if _, err := metadata.DiscoveryURLs(c.Issuer); err != nil {
		return fmt.Errorf("issuer: %v", err)
	}
	if c.IssuerInternal != "" {
		if _, err := rsmiddleware.RewriteOrigins(nil, map[string]string{c.Issuer: c.IssuerInternal}); err != nil {
			return fmt.Errorf("issuer_internal: %v", err)
		}
	}
	if c.Upstream == "" {
		return errors.New("upstream: required (the MCP endpoint behind the gateway)")
	}
	if u, err := url.Parse(c.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("upstream: %q must be an http(s) URL without credentials or fragment", c.Upstream)
	}
	scopeList := func(path string, list []string) error {
		for _, s := range list {
			if s == "" || strings.ContainsAny(s, " \"\\") || !printableASCII(s) {
				return fmt.Errorf("%s: %q is not a scope token (RFC 6749 §3.3)", path, s)
			}
		}
		return nil
	}
	if err := scopeList("scopes.base", c.Scopes.Base); err != nil {
		return err
	}
	for _, m := range []struct {
		path string
		m    map[string][]string
	}{{"scopes.tools", c.Scopes.Tools}, {"scopes.methods", c.Scopes.Methods}, {"scopes.prompts", c.Scopes.Prompts}, {"scopes.resources", c.Scopes.Resources}} {
		for k, v := range m.m {
			if k == "" {
				return fmt.Errorf("%s: empty name", m.path)
			}
			if err := scopeList(m.path+"."+k, v); err != nil {
				return err
			}
		}
	}
	if a := c.UpstreamAuth; a != nil {
		switch {
		case a.Exchange != nil && a.ClientCredentials != nil:
			return errors.New("upstream_auth: exchange and client_credentials are exclusive")
		case a.Exchange != nil:
			if err := a.Exchange.check("upstream_auth.exchange"); err != nil {
				return err
			}
		case a.ClientCredentials != nil:
			if err := a.ClientCredentials.check("upstream_auth.client_credentials"); err != nil {
				return err
			}
		default:
			return errors.New("upstream_auth: set exchange or client_credentials")
		}
	}
	switch c.Audit.Format {
	case "":
		c.Audit.Format = "json"
	case "json", "text", "off":
	default:
		return fmt.Errorf("audit.format: %q is not json, text or off", c.Audit.Format)
	}
	if n := len(c.Audit.ChainKey); n > 0 && n < auditchain.MinKeyBytes {
		return fmt.Errorf("audit.chain_key: %d bytes, at least %d are needed", n, auditchain.MinKeyBytes)
	}
	if i := c.Introspection; i != nil && (i.ClientID == "" || i.ClientSecret == "") {
		return errors.New("introspection: client_id and client_secret are required")
	}
	if d := c.DPoP; d != nil {
		for _, a := range d.Algs {
			if !slices.Contains(dpop.DefaultAlgs, a) {
				return fmt.Errorf("dpop.algs: %q is not one of %s", a, strings.Join(dpop.DefaultAlgs, ", "))
			}
		}
	}
	if n := len(c.SessionKey); n > 0 && n < rsmiddleware.MinSessionKeyBytes {
		return fmt.Errorf("session_key: %d bytes, at least %d are needed (HMAC-SHA256 key, RFC 2104 §3)", n, rsmiddleware.MinSessionKeyBytes)
	}
	if len(c.Policy.Rules) > 0 || len(c.Policy.Inject) > 0 {
		if c.policy, err = toolpolicy.New(c.Policy); err != nil {
			return err
		}
	}
	if c.limits, err = toolpolicy.NewLimiter(c.RateLimits, nil); err != nil {
		return err
	}
	if p := c.Pins; p != nil {
		if c.pins, err = rsmiddleware.NewToolPins(rsmiddleware.ToolPinsConfig{File: p.File, Mode: p.Mode}); err != nil {
			return err
		}
	}
	if s := c.Screening; s != nil {
		if c.screening, err = rsmiddleware.NewScreening(rsmiddleware.ScreeningConfig{Action: s.Action, Patterns: s.Patterns}); err != nil {
			return err
		}
	}
	if a := c.Approval; a != nil {
		// Checked as rsmiddleware.NewApproval checks it; the endpoint is
		// the issuer's.
		if _, err := rsmiddleware.NewApproval(a.rs(c.Issuer, nil)); err != nil {
			return err
		}
	}
	if c.Identity != nil {
		if err := c.Identity.check(); err != nil {
			return err
		}
	}
	l := &c.Limits
	if l.MaxRequestBytes < 0 || l.MaxResponseBytes < 0 || l.MaxHeaderBytes < 0 || l.ReadHeaderTimeout < 0 ||
		l.IdleTimeout < 0 || l.UpstreamDialTimeout < 0 || l.UpstreamHeaderTimeout < 0 || l.ReadBodyTimeout < 0 {
		return errors.New("limits: values must not be negative")
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxRequestBytes, DefaultLimits.MaxRequestBytes)
	def(&l.MaxResponseBytes, DefaultLimits.MaxResponseBytes)
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = DefaultLimits.MaxHeaderBytes
	}
	defD(&l.ReadHeaderTimeout, DefaultLimits.ReadHeaderTimeout)
	defD(&l.IdleTimeout, DefaultLimits.IdleTimeout)
	defD(&l.UpstreamDialTimeout, DefaultLimits.UpstreamDialTimeout)
	defD(&l.UpstreamHeaderTimeout, DefaultLimits.UpstreamHeaderTimeout)
	defD(&l.ReadBodyTimeout, DefaultLimits.ReadBodyTimeout)
	return nil
}

// ApprovalsPath is the AS's endpoint of the approval protocol, below the
// issuer.
const ApprovalsPath = "/approvals"

// rs is the rsmiddleware form of a, asking the AS of issuer through client.
func (a *ApprovalConfig) rs(issuer string, client *http.Client) rsmiddleware.ApprovalConfig {
	return rsmiddleware.ApprovalConfig{Tools: a.Tools, TTL: a.TTL, Endpoint: strings.TrimSuffix(issuer, "/") + ApprovalsPath,
		ClientID: a.ClientID, ClientSecret: a.ClientSecret, HTTPClient: client}
}

func (g *GrantConfig) check(path string) error {
	if g.ClientID == "" || g.ClientSecret == "" {
		return fmt.Errorf("%s: client_id and client_secret are required", path)
	}
	if g.Resource == "" {
		return fmt.Errorf("%s: resource is required (the upstream's resource URI)", path)
	}
	res, err := metadata.CanonicalResource(g.Resource)
	if err != nil {
		return fmt.Errorf("%s.resource: %v", path, err)
	}
	g.Resource = res
	return nil
}

func printableASCII(s string) bool {
	return !slices.ContainsFunc([]byte(s), func(b byte) bool { return b < 0x21 || b > 0x7e })
}

// allScopes lists every configured scope once, for scopes_supported.
func (c *Config) allScopes() []string {
	var out []string
	add := func(list []string) {
		for _, s := range list {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	add(c.Scopes.Base)
	for _, m := range []map[string][]string{c.Scopes.Methods, c.Scopes.Tools, c.Scopes.Prompts, c.Scopes.Resources} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			add(m[k])
		}
	}
	return out
}
