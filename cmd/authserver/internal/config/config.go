// Package config reads, checks and prints the configuration of the authserver
// command: a YAML file whose `${VAR}` references expand from the environment,
// four environment overrides (AUTHSERVER_ISSUER, AUTHSERVER_LISTEN,
// AUTHSERVER_STORAGE, AUTHSERVER_SECRET), and the development defaults used
// when there is no file at all. Every variable, in `${VAR}` or as an
// override, may instead be given as a file named by VAR_FILE (envvar.Get).
//
// Every error names the field path it is about, for example
//
//	config: resources[1].uri: not an absolute http(s) URI
//
// and unknown keys are errors, so a typo never silently falls back to a
// default. The package only parses and validates; cmd/authserver turns a
// Config into the plain config structs of as/, dcr/ and the storage backends.
//
// Values are checked against the standards they feed: the issuer against
// RFC 8414 §2 (absolute http(s) URL, no query or fragment), resource URIs
// against RFC 8707 §2 (absolute, no fragment; canonicalised), scopes against
// RFC 6749 §3.3, redirect URIs against RFC 8252 §7 and RFC 9700 §4.1, and the
// exchange policy against RFC 8693.
package config

import (
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpauth/mcpauth/internal/envvar"
	"github.com/mcpauth/mcpauth/internal/redact"
	"github.com/mcpauth/mcpauth/metadata"
)

// Config is the whole configuration file. Field tags are the public YAML
// keys; docs/CONFIGURATION.md is their reference.
type Config struct {
	// Issuer is the AS's issuer identifier (RFC 8414 §2): an absolute http(s)
	// URL without query, fragment or trailing slash.
	Issuer string `yaml:"issuer"`
	// Listen is the TCP address the HTTP server binds, host:port.
	Listen string `yaml:"listen"`
	// Storage selects the backend: "memory", "sqlite:PATH" or
	// "postgres://..." (a pgx connection string).
	Storage string `yaml:"storage"`
	// Secret is the key material (at least 32 bytes) from which the keys
	// that seal private keys and token payloads and hash generated secrets
	// are derived. Changing it makes stored keys and tokens unreadable.
	Secret string `yaml:"secret"`
	// Resources are the MCP servers (RFC 8707 resource indicators) the AS
	// issues tokens for.
	Resources []Resource `yaml:"resources"`
	// Clients are pre-registered OAuth clients, kept in memory.
	Clients []Client `yaml:"clients"`
	// Users are the local accounts that can log in.
	Users []User `yaml:"users"`
	// Upstreams are the OpenID Connect providers people may sign in
	// through; with any, local users are optional.
	Upstreams []Upstream `yaml:"upstreams"`
	// Connections are the third-party services people connect their
	// accounts to, whose tokens MCP servers get by token exchange.
	Connections []Connection `yaml:"connections"`
	// TrustedProxies (addresses or CIDRs) are the reverse proxies whose
	// X-Forwarded-For is believed when finding a client's address, for the
	// login throttle, the registration rate limit and the logs. Empty: the
	// TCP peer is the client. registration.trusted_proxies is an older
	// spelling of the same setting.
	TrustedProxies []string       `yaml:"trusted_proxies"`
	Tokens         Tokens         `yaml:"tokens"`
	Signing        Signing        `yaml:"signing"`
	Registration   Registration   `yaml:"registration"`
	CIMD           CIMD           `yaml:"cimd"`
	Exchange       []ExchangeRule `yaml:"exchange"`
	// ClientAssertions are the rules for private_key_jwt client assertions.
	ClientAssertions ClientAssertions `yaml:"client_assertions"`
	DPoP             DPoP             `yaml:"dpop"`
	// Enterprise lists the enterprise IdPs whose ID-JAGs are redeemed.
	Enterprise Enterprise `yaml:"enterprise"`
	// Workload lists the trusted issuers of workload identity tokens.
	Workload       Workload `yaml:"workload"`
	Sessions       Sessions `yaml:"sessions"`
	GC             GC       `yaml:"gc"`
	MigrateOnStart *bool    `yaml:"migrate_on_start"`
	Log            Log      `yaml:"log"`
	Admin          Admin    `yaml:"admin"`

	// FromFile is false when no configuration file was given and the
	// development defaults are in use. Not a YAML key.
	FromFile bool `yaml:"-"`

	// set holds the field paths ("gc.interval", "clients[0].secret") the
	// file gives a value, so that an explicit 0 or "" is told apart from a
	// key left out.
	set map[string]bool
}

// Resource is one protected resource (an MCP server).
type Resource struct {
	// URI is the resource indicator; stored in canonical form
	// (metadata.CanonicalResource) after validation.
	URI    string   `yaml:"uri"`
	Name   string   `yaml:"name"`
	Scopes []string `yaml:"scopes"`
	// DefaultScopes are what a request naming no scope gets on this
	// resource (unless a registered client registered with a scope of its
	// own); each one of Scopes. Empty: every scope in Scopes.
	DefaultScopes []string `yaml:"default_scopes"`
	Default       bool     `yaml:"default"`
	// IntrospectionClients are the ids of configured confidential clients
	// that are this resource's servers: they may introspect access tokens
	// for it (RFC 7662). No other client can, and registered clients never.
	IntrospectionClients []string `yaml:"introspection_clients"`
	// ApprovalClients are the ids of configured confidential clients (with
	// a secret) that hold this resource's high-risk tool calls for a
	// person's approval (a gateway's approval.client_id): they may
	// register calls and ask about them at /approvals. No other client can.
	ApprovalClients []string `yaml:"approval_clients"`
	// TokenClaims are the person attributes written into access tokens for
	// this resource: any of email, groups, tenant (from users[] for local
	// accounts, from the person's record and upstreams[].tenant or
	// tenant_claim for people from a provider). Empty: none.
	TokenClaims []string `yaml:"token_claims"`
}

// Client is one pre-registered client.
type Client struct {
	ID           string   `yaml:"id"`
	Secret       string   `yaml:"secret"`
	Public       bool     `yaml:"public"`
	GrantTypes   []string `yaml:"grant_types"`
	Scopes       []string `yaml:"scopes"`
	Resources    []string `yaml:"resources"`
	RedirectURIs []string `yaml:"redirect_uris"`
	Name         string   `yaml:"name"`
	// DPoPBoundAccessTokens: every token request of the client must carry
	// a DPoP proof (RFC 9449 §5.2).
	DPoPBoundAccessTokens bool `yaml:"dpop_bound_access_tokens"`
	// JWKS (the key set itself, a YAML mapping) or JWKSURI (an https URL)
	// makes the client authenticate with private_key_jwt (RFC 7523 §2.2)
	// instead of a secret.
	JWKS    JWKS   `yaml:"jwks"`
	JWKSURI string `yaml:"jwks_uri"`
}

// DPoP configures sender-constrained tokens (RFC 9449). Proofs are always
// accepted; Nonce makes the token endpoint require server nonces (§8), and
// RequiredFor lists resource URIs whose tokens are only issued DPoP-bound.
type DPoP struct {
	Nonce       bool     `yaml:"nonce"`
	RequiredFor []string `yaml:"required_for"`
}

// User is one local account.
type User struct {
	Username     string `yaml:"username"`
	PasswordHash string `yaml:"password_hash"`
	// Disabled accounts cannot log in, and their grants are refused.
	Disabled bool `yaml:"disabled"`
	// Email, Groups and Tenant are the person's attributes, written into
	// access tokens for the resources whose token_claims name them.
	Email  string   `yaml:"email"`
	Groups []string `yaml:"groups"`
	Tenant string   `yaml:"tenant"`
}

// Tokens holds lifetimes (RFC 6749 §4.1.2 codes, §1.5 refresh tokens).
type Tokens struct {
	AccessTTL  Duration `yaml:"access_ttl"`
	RefreshTTL Duration `yaml:"refresh_ttl"`
	CodeTTL    Duration `yaml:"code_ttl"`
	// RefreshGrace is how long an already rotated refresh token is still
	// accepted (several processes of one client racing) while none of its
	// successors has been used; after that, or once a successor was used,
	// presenting it revokes the family. Default 30s; 0 turns the window off.
	RefreshGrace *Duration `yaml:"refresh_grace"`
}

// Signing selects the JWS algorithm of access tokens (RFC 9068 §2.1).
type Signing struct {
	Algorithm string `yaml:"algorithm"`
	// KeyReload is how often a running server reloads signing keys from
	// storage, so a key rotated elsewhere is picked up.
	KeyReload Duration `yaml:"key_reload"`
}

// Registration is the RFC 7591 dynamic client registration policy.
type Registration struct {
	// Enabled serves POST /register at all.
	Enabled *bool `yaml:"enabled"`
	// Open lets anyone register; when false an initial access token
	// (RFC 7591 §3) from InitialAccessTokens is required.
	Open                 *bool     `yaml:"open"`
	InitialAccessTokens  []string  `yaml:"initial_access_tokens"`
	AllowedRedirectHosts []string  `yaml:"allowed_redirect_hosts"`
	DeniedRedirectHosts  []string  `yaml:"denied_redirect_hosts"`
	RateLimit            RateLimit `yaml:"rate_limit"`
	// TrustedProxies is the older spelling of the top-level
	// trusted_proxies; when only this one is set it is used for every
	// component.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Caps on a registration request.
	MaxBodyBytes    int `yaml:"max_body_bytes"`
	MaxRedirectURIs int `yaml:"max_redirect_uris"`
	MaxStringLength int `yaml:"max_string_length"`
	// SecretLifetime is how long a generated client secret is valid; 0:
	// it does not expire.
	SecretLifetime Duration `yaml:"secret_lifetime"`
	// AllowClientCredentials lets registrants ask for client_credentials.
	AllowClientCredentials bool `yaml:"allow_client_credentials"`
	// Scopes and Resources are what registrants may be granted; empty means
	// every configured scope / resource.
	Scopes    []string `yaml:"scopes"`
	Resources []string `yaml:"resources"`
	// ReapNeverUsedAfter deletes registered clients never used at the token
	// endpoint this long after registration (default 24h); ReapIdleAfter
	// deletes clients unused this long (default 2160h). 0 turns either off.
	ReapNeverUsedAfter *Duration `yaml:"reap_never_used_after"`
	ReapIdleAfter      *Duration `yaml:"reap_idle_after"`
}

// RateLimit limits registrations per client IP address.
type RateLimit struct {
	// PerMinute is the sustained rate; 0 turns the limit off.
	PerMinute int `yaml:"per_minute"`
	Burst     int `yaml:"burst"`
}

// CIMD configures Client ID Metadata Documents
// (draft-ietf-oauth-client-id-metadata-document).
type CIMD struct {
	Enabled        *bool    `yaml:"enabled"`
	AllowedDomains []string `yaml:"allowed_domains"`
	DeniedDomains  []string `yaml:"denied_domains"`
	// AllowHosts lets these host:port pairs (an IP literal or localhost) be
	// fetched over plain http and on loopback or private addresses: for
	// development and tests only.
	AllowHosts []string `yaml:"allow_hosts"`
	CacheMin   Duration `yaml:"cache_min"`
	CacheMax   Duration `yaml:"cache_max"`
	Timeout    Duration `yaml:"timeout"`
}

// ExchangeRule allows RFC 8693 token exchange from a token for one resource
// to a token for another, with at most these scopes.
type ExchangeRule struct {
	From   string   `yaml:"from"`
	To     string   `yaml:"to"`
	Scopes []string `yaml:"scopes"`
	// SubjectScopes must all be carried by the subject token for the rule
	// to apply; empty: none required.
	SubjectScopes []string `yaml:"subject_scopes"`
	// Clients may use the rule; empty means every client allowed the
	// token-exchange grant.
	Clients []string `yaml:"clients"`
}

// ClientAssertions configures the checks of private_key_jwt client
// assertions (RFC 7523 §3, draft-ietf-oauth-rfc7523bis §3).
type ClientAssertions struct {
	// AcceptTokenEndpointAudience also accepts an assertion whose sole aud
	// is the token endpoint URL, as RFC 7523 allowed; by default only the
	// issuer identifier (with or without one trailing slash) is.
	AcceptTokenEndpointAudience bool `yaml:"accept_token_endpoint_audience"`
}

// JWKS is a JWK Set (RFC 7517 §5) written as a YAML mapping; JSON is valid
// YAML, so a published document can be pasted as it is.
type JWKS map[string]any

// Enterprise configures enterprise-managed authorization: Identity
// Assertion JWT Authorization Grants (ID-JAG) redeemed with the jwt-bearer
// grant.
type Enterprise struct {
	IdPs []EnterpriseIdP `yaml:"idps"`
}

// EnterpriseIdP is one trusted enterprise identity provider.
type EnterpriseIdP struct {
	// Issuer is the https issuer identifier its ID-JAGs carry as iss.
	Issuer string `yaml:"issuer"`
	// JWKS (the key set itself) or JWKSURI (where to fetch it): one of them.
	JWKS    JWKS   `yaml:"jwks"`
	JWKSURI string `yaml:"jwks_uri"`
	// Clients are the configured confidential clients that may redeem its
	// ID-JAGs.
	Clients []string `yaml:"clients"`
	// LinkByEmail makes the token's subject the ID-JAG's email (the local
	// account of that name) instead of "<issuer>#<sub>".
	LinkByEmail bool `yaml:"link_by_email"`
}

// Workload configures workload identity federation: workload JWTs
// exchanged with the jwt-bearer grant, without client authentication.
type Workload struct {
	Issuers []WorkloadIssuer `yaml:"issuers"`
}

// WorkloadIssuer is one trusted issuer of workload tokens.
type WorkloadIssuer struct {
	// Issuer is the iss of its tokens: an https URL, or any string when
	// JWKS is given.
	Issuer string `yaml:"issuer"`
	// JWKS or JWKSURI; with neither, OpenID Connect Discovery of Issuer.
	JWKS    JWKS           `yaml:"jwks"`
	JWKSURI string         `yaml:"jwks_uri"`
	Rules   []WorkloadRule `yaml:"rules"`
}

// WorkloadRule admits workloads: the first rule matching the token's sub
// and claims that allows the requested resource applies.
type WorkloadRule struct {
	// Subject is the exact sub, or a pattern with "*" for any characters.
	Subject string `yaml:"subject"`
	// Claims the token must carry with exactly these string values.
	Claims map[string]string `yaml:"claims"`
	// ClientID is the client_id of the issued tokens (not a configured client).
	ClientID  string   `yaml:"client_id"`
	Resources []string `yaml:"resources"`
	Scopes    []string `yaml:"scopes"`
}

// Sessions are the lifetimes of a signed-in browser session, which is
// stored so that logging out ends it everywhere.
type Sessions struct {
	// IdleTTL ends a session unused this long.
	IdleTTL Duration `yaml:"idle_ttl"`
	// AbsoluteTTL ends a session this long after the login, however busy.
	AbsoluteTTL Duration `yaml:"absolute_ttl"`
}

// GC configures the periodic removal of expired records.
type GC struct {
	Interval  Duration `yaml:"interval"`
	BatchSize int      `yaml:"batch_size"`
}

// Log configures the structured log.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text, json
	// Access writes one line per HTTP request (message "access", level
	// info). Default true.
	Access *bool `yaml:"access"`
}

// Duration is a time.Duration written as a Go duration string ("15m", "1h").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML prints the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration (use Go syntax such as 90s, 15m, 720h): %q", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("must not be negative: %q", s)
	}
	return v, nil
}

// Defaults shared by files and the no-file development setup.
const (
	DefaultIssuer  = "http://127.0.0.1:9000"
	DefaultListen  = "127.0.0.1:9000"
	DefaultStorage = "sqlite:./authserver.db"
	// DefaultResource is the resource of the development setup.
	DefaultResource = "http://127.0.0.1:8080/mcp"
)

// Lookup reads an environment variable; os.LookupEnv is one.
type Lookup = envvar.Lookup

// Load reads the configuration file at path, or returns the development
// defaults when path is "". Then it applies the environment overrides from
// env and validates the result.
func Load(path string, env Lookup) (*Config, error) {
	if env == nil {
		env = os.LookupEnv
	}
	if path == "" {
		c := Dev()
		// Without a file the issuer follows listen (AUTHSERVER_LISTEN), unless
		// AUTHSERVER_ISSUER names it.
		c.Issuer = ""
		if err := c.finish(env); err != nil {
			return nil, err
		}
		if err := devAllowed(c, env); err != nil {
			return nil, err
		}
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, env)
}

// Parse parses a configuration file's content, expands `${VAR}` references
// from env, applies the environment overrides, fills defaults and validates.
func Parse(data []byte, env Lookup) (*Config, error) {
	if env == nil {
		env = os.LookupEnv
	}
	c, err := decode(data, env)
	if err != nil {
		return nil, err
	}
	c.FromFile = true
	if err := c.finish(env); err != nil {
		return nil, err
	}
	return c, nil
}

// Dev returns the development configuration used when there is no file:
// loopback issuer and listener, the embedded SQLite database, one default
// resource, open registration and CIMD. No users are in it; the command adds
// the admin account.
func Dev() *Config {
	return &Config{
		Issuer:  DefaultIssuer,
		Listen:  DefaultListen,
		Storage: DefaultStorage,
		Resources: []Resource{{
			URI:           DefaultResource,
			Name:          "Example MCP server",
			Scopes:        []string{"mcp:tools", "mcp:admin"},
			DefaultScopes: []string{"mcp:tools"},
			Default:       true,
		}},
	}
}

// DevOptIn is the environment variable that lets the development defaults
// (no configuration file) serve on an address other than loopback.
const DevOptIn = "AUTHSERVER_DEV"

// devAllowed refuses the development defaults (open registration, a
// generated admin password, SQLite in the working directory) on a listen
// address that is not loopback, unless AUTHSERVER_DEV=1 asks for them: that
// is how a container started with no configuration ends up, and it must say
// what to provide rather than serve a demo to the network.
func devAllowed(c *Config, env Lookup) error {
	host, _, _ := net.SplitHostPort(c.Listen)
	if IsLoopback(host) {
		return nil
	}
	if v, _ := env(DevOptIn); v == "1" {
		return nil
	}
	return fmt.Errorf("config: no configuration file, and listen is %s, not loopback: give one with --config FILE or AUTHSERVER_CONFIG=FILE "+
		"(in the container image: mount it, for example at /etc/mcpauth/authserver.yaml, and set AUTHSERVER_CONFIG to that path), "+
		"or set %s=1 to serve the development defaults (open registration, a generated admin password) on this address", c.Listen, DevOptIn)
}

// Overrides are the environment variables that replace the key of the same
// name. Each is read with envvar.Get, so NAME_FILE works too.
var Overrides = []string{"AUTHSERVER_ISSUER", "AUTHSERVER_LISTEN", "AUTHSERVER_STORAGE", "AUTHSERVER_SECRET"}

// finish applies the environment overrides and defaults, then validates.
func (c *Config) finish(env Lookup) error {
	for i, dst := range []*string{&c.Issuer, &c.Listen, &c.Storage, &c.Secret} {
		v, ok, err := envvar.Get(env, Overrides[i])
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if ok && v != "" {
			*dst = v
		}
	}
	if c.Issuer == "" && !c.FromFile {
		if c.Listen == "" {
			c.Listen = DefaultListen
		}
		c.Issuer = issuerForListen(c.Listen)
	}
	// An explicit 0 or "" that a default would replace is a mistake (a
	// zero interval, an empty ${VAR}): refuse it instead of running on
	// something the file does not say.
	zeros := c.explicitZeros()
	c.defaults()
	if err := c.checkZeros(zeros); err != nil {
		return err
	}
	return c.Validate()
}

func boolPtr(b bool) *bool { return &b }

// defaults fills every unset field with its documented default.
func (c *Config) defaults() {
	if c.Issuer == "" {
		c.Issuer = DefaultIssuer
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Storage == "" {
		c.Storage = DefaultStorage
	}
	t := &c.Tokens
	if t.AccessTTL == 0 {
		t.AccessTTL = Duration(15 * time.Minute)
	}
	if t.RefreshTTL == 0 {
		t.RefreshTTL = Duration(30 * 24 * time.Hour)
	}
	if t.CodeTTL == 0 {
		t.CodeTTL = Duration(5 * time.Minute)
	}
	if t.RefreshGrace == nil {
		d := Duration(30 * time.Second) // as.DefaultRefreshGrace
		t.RefreshGrace = &d
	}
	if c.Signing.Algorithm == "" {
		c.Signing.Algorithm = "ES256"
	}
	if c.Signing.KeyReload == 0 {
		c.Signing.KeyReload = Duration(15 * time.Second)
	}
	if c.Admin.AuditRetention == nil {
		d := Duration(DefaultAuditRetention)
		c.Admin.AuditRetention = &d
	}
	r := &c.Registration
	if r.Enabled == nil {
		r.Enabled = boolPtr(true)
	}
	if r.Open == nil {
		r.Open = boolPtr(len(r.InitialAccessTokens) == 0)
	}
	if r.RateLimit.PerMinute == 0 && r.RateLimit.Burst == 0 &&
		!c.set["registration.rate_limit.per_minute"] && !c.set["registration.rate_limit.burst"] {
		r.RateLimit = RateLimit{PerMinute: 20, Burst: 10}
	}
	if r.MaxBodyBytes == 0 {
		r.MaxBodyBytes = 16 << 10
	}
	if r.MaxRedirectURIs == 0 {
		r.MaxRedirectURIs = 10
	}
	if r.MaxStringLength == 0 {
		r.MaxStringLength = 1024
	}
	if r.ReapNeverUsedAfter == nil {
		d := Duration(24 * time.Hour)
		r.ReapNeverUsedAfter = &d
	}
	if r.ReapIdleAfter == nil {
		d := Duration(90 * 24 * time.Hour)
		r.ReapIdleAfter = &d
	}
	m := &c.CIMD
	if m.Enabled == nil {
		m.Enabled = boolPtr(true)
	}
	if m.CacheMin == 0 {
		m.CacheMin = Duration(time.Minute)
	}
	if m.CacheMax == 0 {
		m.CacheMax = Duration(24 * time.Hour)
	}
	if m.Timeout == 0 {
		m.Timeout = Duration(5 * time.Second)
	}
	if c.Sessions.IdleTTL == 0 {
		c.Sessions.IdleTTL = Duration(2 * time.Hour)
	}
	if c.Sessions.AbsoluteTTL == 0 {
		c.Sessions.AbsoluteTTL = Duration(12 * time.Hour)
	}
	if c.Admin.ConsoleSessionTTL == 0 {
		c.Admin.ConsoleSessionTTL = Duration(defaultConsoleSessionTTL)
	}
	if c.GC.Interval == 0 {
		c.GC.Interval = Duration(10 * time.Minute)
	}
	if c.GC.BatchSize == 0 {
		c.GC.BatchSize = 500
	}
	if c.MigrateOnStart == nil {
		c.MigrateOnStart = boolPtr(true)
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Access == nil {
		c.Log.Access = boolPtr(true)
	}
	c.upstreamDefaults()
	c.connectionDefaults()
	for i := range c.Clients {
		cl := &c.Clients[i]
		if len(cl.GrantTypes) == 0 {
			if cl.Public || len(cl.RedirectURIs) > 0 {
				cl.GrantTypes = []string{"authorization_code", "refresh_token"}
			} else {
				cl.GrantTypes = []string{"client_credentials"}
			}
		}
		// A client named by an enterprise IdP redeems its ID-JAGs with the
		// jwt-bearer grant (RFC 7523 §2.1); naming a confidential client there
		// grants it (a public one is refused by validateFederation).
		if !cl.Public && idpClient(c.Enterprise.IdPs, cl.ID) && !slices.Contains(cl.GrantTypes, GrantJWTBearer) {
			cl.GrantTypes = append(cl.GrantTypes, GrantJWTBearer)
		}
	}
}

// idpClient reports whether id is among the clients of one of idps.
func idpClient(idps []EnterpriseIdP, id string) bool {
	for _, x := range idps {
		if slices.Contains(x.Clients, id) {
			return true
		}
	}
	return false
}

// Redacted is the YAML of the effective configuration with every secret
// (secret, client secrets, initial access tokens, password hashes) replaced
// by "[redacted]", for `authserver check-config`.
func (c *Config) Redacted() ([]byte, error) {
	r := *c
	const mark = "[redacted]"
	if r.Secret != "" {
		r.Secret = mark
	}
	r.Storage = c.StorageForLog()
	r.set = nil
	r.Clients = append([]Client(nil), c.Clients...)
	for i := range r.Clients {
		if r.Clients[i].Secret != "" {
			r.Clients[i].Secret = mark
		}
	}
	r.Users = append([]User(nil), c.Users...)
	for i := range r.Users {
		r.Users[i].PasswordHash = mark
	}
	r.Upstreams = append([]Upstream(nil), c.Upstreams...)
	for i := range r.Upstreams {
		if r.Upstreams[i].ClientSecret != "" {
			r.Upstreams[i].ClientSecret = mark
		}
	}
	r.Connections = append([]Connection(nil), c.Connections...)
	for i := range r.Connections {
		if r.Connections[i].ClientSecret != "" {
			r.Connections[i].ClientSecret = mark
		}
	}
	if n := len(c.Registration.InitialAccessTokens); n > 0 {
		r.Registration.InitialAccessTokens = make([]string, n)
		for i := range n {
			r.Registration.InitialAccessTokens[i] = mark
		}
	}
	return yaml.Marshal(&r)
}

// StorageForLog is the storage key with any password (URL user info, a
// password parameter) replaced by "redacted", also when it does not parse.
func (c *Config) StorageForLog() string { return redact.DSN(c.Storage) }

// StorageKind returns "memory", "sqlite" or "postgres" and, for sqlite, the
// database path.
func (c *Config) StorageKind() (kind, path string) {
	return storageKind(c.Storage)
}

// MigrateEnabled reports migrate_on_start (default true).
func (c *Config) MigrateEnabled() bool { return c.MigrateOnStart == nil || *c.MigrateOnStart }

// RegistrationEnabled reports registration.enabled (default true).
func (c *Config) RegistrationEnabled() bool {
	return c.Registration.Enabled == nil || *c.Registration.Enabled
}

// RegistrationOpen reports registration.open.
func (c *Config) RegistrationOpen() bool {
	return c.Registration.Open == nil || *c.Registration.Open
}

// Proxies returns trusted_proxies, or registration.trusted_proxies (its
// older spelling) when only that one is set.
func (c *Config) Proxies() []string {
	if len(c.TrustedProxies) > 0 {
		return c.TrustedProxies
	}
	return c.Registration.TrustedProxies
}

// RegistrationResources are the resources registered and CIMD clients may
// get tokens for: registration.resources, or by default every configured
// resource except exchange-only ones. A resource is exchange-only when it is
// the `to` of some exchange rule and the `from` of none: a downstream API
// reached by RFC 8693 token exchange from another resource, which clients
// are not meant to get tokens for directly.
func (c *Config) RegistrationResources() []string {
	if len(c.Registration.Resources) > 0 {
		return c.Registration.Resources
	}
	canon := func(u string) string {
		if cu, err := metadata.CanonicalResource(u); err == nil {
			return cu
		}
		return u
	}
	from, to := map[string]bool{}, map[string]bool{}
	for _, x := range c.Exchange {
		from[canon(x.From)] = true
		to[canon(x.To)] = true
	}
	var out []string
	for _, r := range c.Resources {
		u := canon(r.URI)
		if to[u] && !from[u] {
			continue
		}
		out = append(out, r.URI)
	}
	return out
}

// CIMDEnabled reports cimd.enabled (default true).
func (c *Config) CIMDEnabled() bool { return c.CIMD.Enabled == nil || *c.CIMD.Enabled }

// DefaultResourceURI returns the canonical URI of the default resource, or "".
func (c *Config) DefaultResourceURI() string {
	for _, r := range c.Resources {
		if r.Default {
			return r.URI
		}
	}
	return ""
}
