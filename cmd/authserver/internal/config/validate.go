package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/internal/clientaddr"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/internal/redact"
	"github.com/mcpauth/mcpauth/metadata"
)

// fieldError is a validation error about one field path.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return "config: " + e.path + ": " + e.msg }

func errf(path, format string, args ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

// Grant types a configured client may have (OAuth 2.1 §4; no implicit, no
// password grant).
var knownGrants = []string{"authorization_code", "refresh_token", "client_credentials", GrantTokenExchange, GrantJWTBearer}

// GrantTokenExchange is the RFC 8693 §2.1 grant type.
const GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"

// GrantJWTBearer is the RFC 7523 §2.1 grant type, with which the clients of
// enterprise.idps redeem ID-JAGs.
const GrantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// Signing algorithms (RFC 7518 §3.1, RFC 8037 §3.1).
var knownAlgs = []string{"ES256", "RS256", "EdDSA"}

// Validate checks every field and canonicalises resource URIs in place. It
// returns the first problem, naming its field path.
func (c *Config) Validate() error {
	if err := validateIssuer(c.Issuer); err != nil {
		return err
	}
	if err := validateListen(c.Listen); err != nil {
		return err
	}
	for i, p := range c.TrustedProxies {
		if _, err := clientaddr.ParsePrefix(p); err != nil {
			return errf(fmt.Sprintf("trusted_proxies[%d]", i), "not an IP address or CIDR: %q", p)
		}
	}
	kind, path := storageKind(c.Storage)
	switch kind {
	case "":
		return errf("storage", "must be memory, sqlite:PATH or postgres://..., got %q", redact.DSN(c.Storage))
	case "sqlite":
		if path == "" {
			return errf("storage", "sqlite: needs a file path, as in sqlite:./authserver.db")
		}
	case "postgres":
		_, rest, _ := strings.Cut(c.Storage, "://")
		at := strings.LastIndexByte(rest, '@')
		if _, err := url.Parse(c.Storage); err != nil || at >= 0 && strings.ContainsAny(rest[:at], "/?#") {
			return errf("storage", "not a valid postgres URL: %s (percent-encode characters such as @ : / ? # %% in the user name and password)", redact.DSN(c.Storage))
		}
		if c.Secret == "" {
			return errf("secret", "required with postgres storage, so every instance shares it (for example secret: ${AUTHSERVER_SECRET})")
		}
	}
	if c.Secret != "" && len(c.Secret) < 32 {
		return errf("secret", "must be at least 32 bytes of key material (got %d)", len(c.Secret))
	}

	// Resources.
	if len(c.Resources) == 0 {
		return errf("resources", "at least one resource is required")
	}
	scopes := map[string]bool{}
	byURI := map[string]*Resource{}
	defaults := 0
	for i := range c.Resources {
		r := &c.Resources[i]
		p := fmt.Sprintf("resources[%d]", i)
		canon, err := metadata.CanonicalResource(r.URI)
		if err != nil {
			return errf(p+".uri", "not an absolute http(s) URI without query or fragment: %q", r.URI)
		}
		r.URI = canon
		if byURI[canon] != nil {
			return errf(p+".uri", "duplicate resource %s", canon)
		}
		byURI[canon] = r
		if len(r.Name) > 200 {
			return errf(p+".name", "longer than 200 characters")
		}
		if err := checkScopes(p+".scopes", r.Scopes); err != nil {
			return err
		}
		for _, s := range r.Scopes {
			scopes[s] = true
		}
		if err := checkScopes(p+".default_scopes", r.DefaultScopes); err != nil {
			return err
		}
		for j, s := range r.DefaultScopes {
			if !slices.Contains(r.Scopes, s) {
				return errf(fmt.Sprintf("%s.default_scopes[%d]", p, j), "scope %q is not one of this resource's scopes", s)
			}
		}
		if r.Default {
			defaults++
			if defaults > 1 {
				return errf(p+".default", "only one resource can be the default")
			}
		}
	}

	// Clients.
	ids := map[string]bool{}
	for i := range c.Clients {
		if err := c.validateClient(i, byURI, scopes, ids); err != nil {
			return err
		}
	}

	for i, r := range c.Resources {
		for j, tc := range r.TokenClaims {
			if tc != "email" && tc != "groups" && tc != "tenant" {
				return errf(fmt.Sprintf("resources[%d].token_claims[%d]", i, j), "%q is not one of email, groups, tenant", tc)
			}
		}
		for j, id := range r.IntrospectionClients {
			k := slices.IndexFunc(c.Clients, func(cl Client) bool { return cl.ID == id })
			if k < 0 || c.Clients[k].Public {
				return errf(fmt.Sprintf("resources[%d].introspection_clients[%d]", i, j), "%q is not a configured confidential client", id)
			}
		}
		for j, id := range r.ApprovalClients {
			k := slices.IndexFunc(c.Clients, func(cl Client) bool { return cl.ID == id })
			if k < 0 || c.Clients[k].Public || c.Clients[k].Secret == "" {
				return errf(fmt.Sprintf("resources[%d].approval_clients[%d]", i, j), "%q is not a configured confidential client with a secret", id)
			}
		}
	}

	// Users.
	names := map[string]bool{}
	for i, u := range c.Users {
		p := fmt.Sprintf("users[%d]", i)
		if u.Username == "" {
			return errf(p+".username", "required")
		}
		if len(u.Username) > 100 || strings.ContainsFunc(u.Username, isSpaceOrControl) {
			return errf(p+".username", "must be at most 100 characters without spaces or control characters")
		}
		if names[u.Username] {
			return errf(p+".username", "duplicate user %q", u.Username)
		}
		names[u.Username] = true
		for j, g := range u.Groups {
			if g == "" || len(g) > 256 {
				return errf(fmt.Sprintf("%s.groups[%d]", p, j), "must be 1 to 256 characters")
			}
		}
		if err := password.Validate(u.PasswordHash); err != nil {
			return errf(p+".password_hash", "not an argon2id or bcrypt hash (make one with `authserver hash-password`): %v", err)
		}
	}

	// Tokens.
	t := c.Tokens
	if t.AccessTTL.D() < time.Minute || t.AccessTTL.D() > 24*time.Hour {
		return errf("tokens.access_ttl", "must be between 1m and 24h, got %s", t.AccessTTL.D())
	}
	if t.CodeTTL.D() < 10*time.Second || t.CodeTTL.D() > 10*time.Minute {
		return errf("tokens.code_ttl", "must be between 10s and 10m (RFC 6749 §4.1.2), got %s", t.CodeTTL.D())
	}
	if t.RefreshTTL.D() < t.AccessTTL.D() {
		return errf("tokens.refresh_ttl", "must not be shorter than tokens.access_ttl")
	}
	if t.RefreshGrace != nil && t.RefreshGrace.D() > time.Minute {
		return errf("tokens.refresh_grace", "must be at most 1m, got %s", t.RefreshGrace.D())
	}
	if !slices.Contains(knownAlgs, c.Signing.Algorithm) {
		return errf("signing.algorithm", "must be one of ES256, RS256, EdDSA, got %q", c.Signing.Algorithm)
	}

	if k := c.Signing.KeyReload.D(); k < time.Second || k > time.Hour {
		return errf("signing.key_reload", "must be between 1s and 1h, got %s", k)
	}
	if d := c.Sessions.AbsoluteTTL.D(); d < time.Minute || d > 30*24*time.Hour {
		return errf("sessions.absolute_ttl", "must be between 1m and 720h, got %s", d)
	}
	if d := c.Sessions.IdleTTL.D(); d < time.Minute || d > c.Sessions.AbsoluteTTL.D() {
		return errf("sessions.idle_ttl", "must be between 1m and sessions.absolute_ttl (%s), got %s", c.Sessions.AbsoluteTTL.D(), d)
	}
	if err := c.validateRegistration(byURI, scopes); err != nil {
		return err
	}
	if err := c.validateCIMD(); err != nil {
		return err
	}

	// DPoP (RFC 9449): resources whose tokens must be sender-constrained.
	for i, u := range c.DPoP.RequiredFor {
		canon, err := configuredResource(u, byURI)
		if err != nil {
			return errf(fmt.Sprintf("dpop.required_for[%d]", i), "%v", err)
		}
		c.DPoP.RequiredFor[i] = canon
	}

	// Token exchange policy (RFC 8693).
	for i, x := range c.Exchange {
		p := fmt.Sprintf("exchange[%d]", i)
		from, err := configuredResource(x.From, byURI)
		if err != nil {
			return errf(p+".from", "%v", err)
		}
		to, err := configuredResource(x.To, byURI)
		if err != nil {
			return errf(p+".to", "%v", err)
		}
		if from == to {
			return errf(p+".to", "must differ from exchange[%d].from", i)
		}
		c.Exchange[i].From, c.Exchange[i].To = from, to
		if len(x.Scopes) == 0 {
			return errf(p+".scopes", "at least one scope is required")
		}
		for j, sc := range x.SubjectScopes {
			if !slices.Contains(byURI[from].Scopes, sc) {
				return errf(fmt.Sprintf("%s.subject_scopes[%d]", p, j), "scope %q is not a scope of resource %s", sc, from)
			}
		}
		for j, id := range x.Clients {
			if !ids[id] {
				return errf(fmt.Sprintf("%s.clients[%d]", p, j), "%q is not a configured client", id)
			}
		}
		for j, s := range x.Scopes {
			if !slices.Contains(byURI[to].Scopes, s) {
				return errf(fmt.Sprintf("%s.scopes[%d]", p, j), "scope %q is not a scope of resource %s", s, to)
			}
		}
	}

	if err := c.validateFederation(byURI, ids); err != nil {
		return err
	}
	if err := c.validateUpstreams(scopes); err != nil {
		return err
	}

	if c.GC.Interval.D() < time.Second {
		return errf("gc.interval", "must be at least 1s")
	}
	if c.GC.BatchSize < 1 || c.GC.BatchSize > 10000 {
		return errf("gc.batch_size", "must be between 1 and 10000")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return errf("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return errf("log.format", "must be text or json, got %q", c.Log.Format)
	}
	return c.validateAdmin()
}

func (c *Config) validateClient(i int, byURI map[string]*Resource, scopes, ids map[string]bool) error {
	cl := &c.Clients[i]
	p := fmt.Sprintf("clients[%d]", i)
	if cl.ID == "" {
		return errf(p+".id", "required")
	}
	if len(cl.ID) > 255 || strings.ContainsFunc(cl.ID, isSpaceOrControl) {
		return errf(p+".id", "must be at most 255 characters without spaces or control characters")
	}
	if strings.HasPrefix(cl.ID, "https://") || strings.HasPrefix(cl.ID, "http://") {
		return errf(p+".id", "must not be a URL (URL client ids are Client ID Metadata Documents)")
	}
	if ids[cl.ID] {
		return errf(p+".id", "duplicate client %q", cl.ID)
	}
	ids[cl.ID] = true
	if cl.Public && cl.Secret != "" {
		return errf(p+".secret", "a public client has no secret")
	}
	keyed := len(cl.JWKS) > 0 || cl.JWKSURI != ""
	switch {
	case keyed && cl.Public:
		return errf(p+".jwks", "a public client has no keys")
	case keyed && cl.Secret != "":
		return errf(p+".jwks", "a client authenticates with a secret or with keys (private_key_jwt), not both")
	case len(cl.JWKS) > 0 && cl.JWKSURI != "":
		return errf(p+".jwks", "set jwks or jwks_uri, not both")
	case cl.JWKSURI != "":
		if u, err := url.Parse(cl.JWKSURI); err != nil || u.Scheme != "https" || u.Host == "" {
			return errf(p+".jwks_uri", "must be an https URL, got %q", cl.JWKSURI)
		}
	}
	if !cl.Public && !keyed {
		if cl.Secret == "" {
			return errf(p+".secret", "required for a confidential client (or set public: true)")
		}
		if len(cl.Secret) < 16 {
			return errf(p+".secret", "must be at least 16 characters")
		}
	}
	for j, g := range cl.GrantTypes {
		gp := fmt.Sprintf("%s.grant_types[%d]", p, j)
		if !slices.Contains(knownGrants, g) {
			return errf(gp, "must be authorization_code, refresh_token, client_credentials, %s or %s, got %q", GrantTokenExchange, GrantJWTBearer, g)
		}
		if (g == "client_credentials" || g == GrantTokenExchange || g == GrantJWTBearer) && cl.Public {
			return errf(gp, "a public client cannot use %s", g)
		}
	}
	code := slices.Contains(cl.GrantTypes, "authorization_code")
	if code && len(cl.RedirectURIs) == 0 {
		return errf(p+".redirect_uris", "required for the authorization_code grant")
	}
	if slices.Contains(cl.GrantTypes, "refresh_token") && !code {
		return errf(p+".grant_types", "refresh_token needs authorization_code")
	}
	for j, u := range cl.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return errf(fmt.Sprintf("%s.redirect_uris[%d]", p, j), "%v", err)
		}
	}
	for j, s := range cl.Scopes {
		if !scopes[s] {
			return errf(fmt.Sprintf("%s.scopes[%d]", p, j), "scope %q is not a scope of any configured resource", s)
		}
	}
	for j, r := range cl.Resources {
		canon, err := configuredResource(r, byURI)
		if err != nil {
			return errf(fmt.Sprintf("%s.resources[%d]", p, j), "%v", err)
		}
		cl.Resources[j] = canon
	}
	if len(cl.Name) > 200 {
		return errf(p+".name", "longer than 200 characters")
	}
	return nil
}

func (c *Config) validateRegistration(byURI map[string]*Resource, scopes map[string]bool) error {
	r := &c.Registration
	if !c.RegistrationOpen() && len(r.InitialAccessTokens) == 0 && c.RegistrationEnabled() {
		return errf("registration.initial_access_tokens", "required when registration.open is false")
	}
	if r.Open != nil && *r.Open && len(r.InitialAccessTokens) > 0 {
		return errf("registration.open", "is true, so no initial access token (RFC 7591 §3) is ever asked for and registration.initial_access_tokens do nothing: "+
			"set open: false to require one of them, or remove them")
	}
	for i, t := range r.InitialAccessTokens {
		if len(t) < 16 {
			return errf(fmt.Sprintf("registration.initial_access_tokens[%d]", i), "must be at least 16 characters")
		}
	}
	for i, h := range r.AllowedRedirectHosts {
		if !validHostPattern(h) || strings.Contains(h, ":") {
			return errf(fmt.Sprintf("registration.allowed_redirect_hosts[%d]", i), "not a host name: %q", h)
		}
	}
	for i, h := range r.DeniedRedirectHosts {
		if !validHostPattern(h) || strings.Contains(h, ":") {
			return errf(fmt.Sprintf("registration.denied_redirect_hosts[%d]", i), "not a host name: %q", h)
		}
	}
	if r.RateLimit.PerMinute > 0 && r.RateLimit.Burst == 0 {
		return errf("registration.rate_limit.burst", "must be at least 1 when per_minute is set")
	}
	if r.MaxRedirectURIs > 100 {
		return errf("registration.max_redirect_uris", "must be at most 100")
	}
	if r.MaxBodyBytes > 1<<20 {
		return errf("registration.max_body_bytes", "must be at most 1048576")
	}
	if len(r.TrustedProxies) > 0 && len(c.TrustedProxies) > 0 && !slices.Equal(r.TrustedProxies, c.TrustedProxies) {
		return errf("registration.trusted_proxies", "is the older spelling of the top-level trusted_proxies; set only trusted_proxies")
	}
	for i, p := range r.TrustedProxies {
		if _, err := clientaddr.ParsePrefix(p); err != nil {
			return errf(fmt.Sprintf("registration.trusted_proxies[%d]", i), "not an IP address or CIDR: %q", p)
		}
	}
	for i, s := range r.Scopes {
		if !scopes[s] {
			return errf(fmt.Sprintf("registration.scopes[%d]", i), "scope %q is not a scope of any configured resource", s)
		}
	}
	for i, u := range r.Resources {
		canon, err := configuredResource(u, byURI)
		if err != nil {
			return errf(fmt.Sprintf("registration.resources[%d]", i), "%v", err)
		}
		r.Resources[i] = canon
	}
	return nil
}

func (c *Config) validateCIMD() error {
	m := c.CIMD
	for i, d := range m.AllowedDomains {
		if !validHostPattern(d) {
			return errf(fmt.Sprintf("cimd.allowed_domains[%d]", i), "not a domain name: %q", d)
		}
	}
	for i, d := range m.DeniedDomains {
		if !validHostPattern(d) {
			return errf(fmt.Sprintf("cimd.denied_domains[%d]", i), "not a domain name: %q", d)
		}
	}
	for i, h := range m.AllowHosts {
		host, port, err := net.SplitHostPort(h)
		if err != nil || port == "" || (net.ParseIP(host) == nil && !strings.EqualFold(host, "localhost")) {
			return errf(fmt.Sprintf("cimd.allow_hosts[%d]", i), "must be IP:port or localhost:port, got %q", h)
		}
	}
	if m.CacheMax.D() < m.CacheMin.D() {
		return errf("cimd.cache_max", "must not be less than cimd.cache_min")
	}
	if m.Timeout.D() < 100*time.Millisecond || m.Timeout.D() > time.Minute {
		return errf("cimd.timeout", "must be between 100ms and 1m")
	}
	return nil
}

// validateListen checks a listen address: host:port with a decimal port from
// 0 to 65535 (0: any free port) and a host that is empty (every interface),
// an IP literal or a DNS name (RFC 1123 §2.1 labels; the last one not all
// digits, so a mistyped IP address is not taken for a name).
func validateListen(s string) error { return checkListen("listen", s) }

// checkListen is validateListen for the listen address at field path.
func checkListen(path, s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || port == "" {
		return errf(path, "not a host:port address: %q", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || port[0] == '+' {
		return errf(path, "port %q is not a number from 0 to 65535", port)
	}
	if host == "" || net.ParseIP(host) != nil {
		return nil
	}
	if !validHostName(host) {
		return errf(path, "host %q is not an IP address or a host name", host)
	}
	return nil
}

func validHostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	labels := strings.Split(strings.TrimSuffix(h, "."), ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	return strings.ContainsFunc(last, func(r rune) bool { return r < '0' || r > '9' })
}

func validateIssuer(s string) error {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return errf("issuer", "not an absolute http(s) URL: %q", s)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") || u.User != nil {
		return errf("issuer", "must have no query, fragment or user info (RFC 8414 §2)")
	}
	if strings.HasSuffix(s, "/") {
		return errf("issuer", "must not end with a slash")
	}
	if u.Scheme != strings.ToLower(u.Scheme) || u.Host != strings.ToLower(u.Host) {
		return errf("issuer", "scheme and host must be lower case")
	}
	return nil
}

// IssuerInsecure reports whether the issuer is plain http on a host that is
// not loopback (SECURITY-CHECKLIST: warn at start-up).
func (c *Config) IssuerInsecure() bool {
	u, err := url.Parse(c.Issuer)
	return err == nil && u.Scheme == "http" && !IsLoopback(u.Hostname())
}

// IsLoopback reports whether host is localhost or a loopback IP literal.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func storageKind(s string) (kind, path string) {
	switch {
	case s == "memory":
		return "memory", ""
	case strings.HasPrefix(s, "sqlite:"):
		return "sqlite", strings.TrimPrefix(s, "sqlite:")
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		return "postgres", ""
	}
	return "", ""
}

func configuredResource(raw string, byURI map[string]*Resource) (string, error) {
	canon, err := metadata.CanonicalResource(raw)
	if err != nil {
		return "", fmt.Errorf("not an absolute http(s) URI without query or fragment: %q", raw)
	}
	if byURI[canon] == nil {
		return "", fmt.Errorf("%s is not a configured resource", canon)
	}
	return canon, nil
}

// checkScopes checks scope-token syntax (RFC 6749 §3.3) and duplicates.
func checkScopes(path string, scopes []string) error {
	seen := map[string]bool{}
	for i, s := range scopes {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !validScope(s) {
			return errf(p, "not a scope token (RFC 6749 §3.3): %q", s)
		}
		if seen[s] {
			return errf(p, "duplicate scope %q", s)
		}
		seen[s] = true
	}
	return nil
}

func validScope(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < 0x21 || b == 0x22 || b == 0x5c || b > 0x7e {
			return false
		}
	}
	return true
}

// checkRedirectURI accepts https URIs, http URIs on loopback hosts, and
// private-use schemes of native apps (RFC 8252 §7), never with a fragment.
func checkRedirectURI(s string) error {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() {
		return errors.New("not an absolute URI")
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return errors.New("must not contain a fragment (RFC 6749 §3.1.2)")
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		if u.Host == "" {
			return errors.New("https URI without a host")
		}
	case "http":
		if !IsLoopback(u.Hostname()) {
			return errors.New("http is allowed only on loopback hosts; use https")
		}
	case "javascript", "data", "file", "vbscript", "about", "blob":
		return fmt.Errorf("scheme %q is not allowed", u.Scheme)
	}
	return nil
}

func validHostPattern(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == ':':
		default:
			return false
		}
	}
	return true
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// validateFederation checks enterprise.idps (ID-JAG issuers) and
// workload.issuers; as.New checks the key sets themselves.
func (c *Config) validateFederation(byURI map[string]*Resource, ids map[string]bool) error {
	public := map[string]bool{}
	for _, cl := range c.Clients {
		public[cl.ID] = cl.Public
	}
	issuers := map[string]bool{}
	keys := func(p string, jwks JWKS, uri string, discovery bool) error {
		switch {
		case len(jwks) > 0 && uri != "":
			return errf(p+".jwks", "set jwks or jwks_uri, not both")
		case len(jwks) == 0 && uri == "" && !discovery:
			return errf(p+".jwks", "jwks or jwks_uri is required")
		case uri != "":
			if u, err := url.Parse(uri); err != nil || u.Scheme != "https" || u.Host == "" {
				return errf(p+".jwks_uri", "must be an https URL, got %q", uri)
			}
		}
		return nil
	}
	for i, d := range c.Enterprise.IdPs {
		p := fmt.Sprintf("enterprise.idps[%d]", i)
		if u, err := url.Parse(d.Issuer); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return errf(p+".issuer", "must be an https URL without query or fragment, got %q", d.Issuer)
		}
		if issuers[d.Issuer] {
			return errf(p+".issuer", "%q is listed twice", d.Issuer)
		}
		issuers[d.Issuer] = true
		if err := keys(p, d.JWKS, d.JWKSURI, false); err != nil {
			return err
		}
		if len(d.Clients) == 0 {
			return errf(p+".clients", "at least one client is required")
		}
		for j, id := range d.Clients {
			if !ids[id] || public[id] {
				return errf(fmt.Sprintf("%s.clients[%d]", p, j), "%q is not a configured confidential client", id)
			}
		}
	}
	for i, w := range c.Workload.Issuers {
		p := fmt.Sprintf("workload.issuers[%d]", i)
		if w.Issuer == "" {
			return errf(p+".issuer", "required")
		}
		if u, err := url.Parse(w.Issuer); len(w.JWKS) == 0 && (err != nil || u.Scheme != "https" || u.Host == "") {
			return errf(p+".issuer", "must be an https URL unless jwks is given, got %q", w.Issuer)
		}
		if issuers[w.Issuer] {
			return errf(p+".issuer", "%q is listed twice", w.Issuer)
		}
		issuers[w.Issuer] = true
		if err := keys(p, w.JWKS, w.JWKSURI, true); err != nil {
			return err
		}
		if len(w.Rules) == 0 {
			return errf(p+".rules", "at least one rule is required")
		}
		for j, r := range w.Rules {
			rp := fmt.Sprintf("%s.rules[%d]", p, j)
			if r.Subject == "" {
				return errf(rp+".subject", "required")
			}
			if r.ClientID == "" {
				return errf(rp+".client_id", "required")
			}
			if ids[r.ClientID] {
				return errf(rp+".client_id", "%q is a configured client; name the workload identity instead", r.ClientID)
			}
			if len(r.Resources) == 0 {
				return errf(rp+".resources", "at least one resource is required")
			}
			for k, res := range r.Resources {
				canon, err := configuredResource(res, byURI)
				if err != nil {
					return errf(fmt.Sprintf("%s.resources[%d]", rp, k), "%v", err)
				}
				c.Workload.Issuers[i].Rules[j].Resources[k] = canon
			}
			if len(r.Scopes) == 0 {
				return errf(rp+".scopes", "at least one scope is required")
			}
			for k, sc := range r.Scopes {
				if !slices.ContainsFunc(r.Resources, func(res string) bool { return slices.Contains(byURI[res].Scopes, sc) }) {
					return errf(fmt.Sprintf("%s.scopes[%d]", rp, k), "scope %q is not a scope of the rule's resources", sc)
				}
			}
		}
	}
	return nil
}
