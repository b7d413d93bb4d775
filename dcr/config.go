package dcr

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/storage"
)

// Hash purposes for internal/secret.NewHasher. The authorization server must
// derive its client-secret Hasher from the same Secret with
// PurposeClientSecret to check secrets issued here.
const (
	PurposeClientSecret       = "client secrets" // as/ uses the same string
	PurposeRegistrationToken  = "registration_access_token"
	purposeInitialAccessToken = "initial_access_token"
)

// Config configures New. Store, Secret and Endpoint are required; every other
// zero value is documented on its field.
type Config struct {
	// Endpoint is the absolute URL of the registration endpoint, as advertised
	// in the AS metadata's registration_endpoint, e.g.
	// "https://auth.example.com/register". The handler serves its path, and
	// registration_client_uri values are Endpoint + "/" + client_id.
	Endpoint string `yaml:"endpoint"`
	// Store keeps the registered clients.
	Store storage.ClientStore `yaml:"-"`
	// Secret (at least 32 bytes) keys the hashes of client secrets,
	// registration access tokens and initial access tokens. Use the AS's.
	Secret []byte `yaml:"-"`
	// Policy says who may register and what a registrant may get.
	Policy Policy `yaml:"policy"`
	// Logger receives registration audit events; nil: slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock; nil: time.Now.
	Now func() time.Time `yaml:"-"`
	// ClientAddr returns the key the rate limit counts a request under (the
	// client's address, IPv6 grouped by /64). Nil: built from
	// Policy.TrustedProxies with internal/clientaddr. The authorization
	// server passes the one resolver all its components share.
	ClientAddr func(*http.Request) string `yaml:"-"`
	// Counters keeps the rate limit's counters. Give it the store every
	// instance shares (usually the same as Store) so the limit holds across
	// instances; nil keeps them in this process's memory.
	Counters CounterStore `yaml:"-"`
}

// Policy is the registration policy. Its zero value is closed registration
// (only holders of an initial access token may register, and there are none)
// with the default limits below.
type Policy struct {
	// Open lets anyone register (RFC 7591 §3 "open registration"). When false,
	// a registration needs one of InitialAccessTokens as a Bearer token.
	Open bool `yaml:"open"`
	// InitialAccessTokens are accepted as RFC 7591 §3 initial access tokens.
	// Compared by keyed hash in constant time.
	InitialAccessTokens []string `yaml:"initial_access_tokens"`

	// Scopes a registered client may be granted. A registration's "scope" is
	// narrowed to these; a request naming none of them (or omitting scope,
	// or asking for "*") gets all of them. Empty: the client record lists no
	// scopes, which as/ reads as "every scope of its resources", so set it.
	Scopes []string `yaml:"scopes"`
	// Resources (resource URIs, RFC 8707; stored canonical) registered
	// clients may get tokens for. Registrants cannot choose them. Empty: the
	// client record lists none, which as/ reads as "every configured
	// resource".
	Resources []string `yaml:"resources"`
	// AllowClientCredentials lets confidential registrants have the
	// client_credentials grant. False: it is removed from grant_types.
	AllowClientCredentials bool `yaml:"allow_client_credentials"`

	// ForceConfidentialRedirectURIs lists https redirect URIs (matched
	// exactly) whose registrations are made confidential even when they ask
	// for token_endpoint_auth_method "none": they get client_secret_post and
	// a client_secret (RFC 7591 §3.2.1 lets the server replace requested
	// metadata). For clients that declare themselves public and then expect a
	// secret (Perplexity, see CLIENT-QUIRKS.md). Empty: no upgrades.
	ForceConfidentialRedirectURIs []string `yaml:"force_confidential_redirect_uris"`

	// RedirectHostAllow, when not empty, lists the only hosts redirect URIs
	// may name: "example.com" matches that host exactly, "*.example.com" any
	// subdomain of it. Applies to every redirect URI that has a host
	// (including loopback and private-use schemes such as
	// cursor://anysphere.cursor-mcp/...).
	RedirectHostAllow []string `yaml:"redirect_host_allow"`
	// RedirectHostDeny lists hosts (same patterns) redirect URIs may not name.
	// Deny wins over allow.
	RedirectHostDeny []string `yaml:"redirect_host_deny"`

	// RateLimit limits registrations per client address.
	RateLimit RateLimit `yaml:"rate_limit"`
	// TrustedProxies (CIDRs or addresses) whose X-Forwarded-For is believed
	// when finding the client address. Empty: RemoteAddr only.
	TrustedProxies []string `yaml:"trusted_proxies"`

	// MaxBodyBytes caps the registration request body; 0 means 16384.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxRedirectURIs caps redirect_uris; 0 means 10.
	MaxRedirectURIs int `yaml:"max_redirect_uris"`
	// MaxStringLength caps every string value (names, URIs, contacts); 0
	// means 1024.
	MaxStringLength int `yaml:"max_string_length"`
	// SecretLifetime is how long a generated client secret is valid; 0 means
	// it does not expire (client_secret_expires_at 0).
	SecretLifetime time.Duration `yaml:"secret_lifetime"`

	// ReapNeverUsedAfter: Reap deletes clients never used at the token
	// endpoint this long after they were created. 0 means 24h; negative
	// disables this rule.
	ReapNeverUsedAfter time.Duration `yaml:"reap_never_used_after"`
	// ReapIdleAfter: Reap deletes clients last used longer ago than this.
	// 0 means 90 days (2160h); negative disables this rule.
	ReapIdleAfter time.Duration `yaml:"reap_idle_after"`
}

// RateLimit limits registrations per client address: a burst, then a
// sustained rate (the generic cell rate algorithm, equivalent to a token
// bucket), counted in Config.Counters.
type RateLimit struct {
	// PerMinute is the sustained number of registrations per address per
	// minute; 0 means 20; negative disables rate limiting.
	PerMinute float64 `yaml:"per_minute"`
	// Burst is the bucket size; 0 means 10.
	Burst int `yaml:"burst"`
}

// compiled is a validated Policy with defaults filled in, shared by the
// registration handler and the CIMD resolver.
type compiled struct {
	scopes          []string
	scopeSet        map[string]bool
	resources       []string
	allowCC         bool
	hostAllow       []string
	hostDeny        []string
	maxBody         int64
	maxRedirectURIs int
	maxString       int
	forceConf       map[string]bool
}

func compileGrants(scopes, resources, hostAllow, hostDeny []string, allowCC bool, maxBody int64, maxURIs, maxString int) (*compiled, error) {
	c := &compiled{scopeSet: map[string]bool{}, allowCC: allowCC,
		maxBody: maxBody, maxRedirectURIs: maxURIs, maxString: maxString}
	if c.maxBody <= 0 {
		c.maxBody = 16 << 10
	}
	if c.maxRedirectURIs <= 0 {
		c.maxRedirectURIs = 10
	}
	if c.maxString <= 0 {
		c.maxString = 1024
	}
	for _, s := range scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			return nil, fmt.Errorf("dcr: policy scope %q is not a valid scope token (RFC 6749 §3.3)", s)
		}
		if !c.scopeSet[s] {
			c.scopeSet[s] = true
			c.scopes = append(c.scopes, s)
		}
	}
	for _, r := range resources {
		cr, err := metadata.CanonicalResource(r)
		if err != nil {
			return nil, fmt.Errorf("dcr: policy resource %q: %w", r, err)
		}
		c.resources = append(c.resources, cr)
	}
	for _, list := range []struct {
		in  []string
		out *[]string
	}{{hostAllow, &c.hostAllow}, {hostDeny, &c.hostDeny}} {
		for _, h := range list.in {
			h = strings.ToLower(strings.TrimSpace(h))
			if h == "" || strings.ContainsAny(h, "/:@ ") || strings.Contains(strings.TrimPrefix(h, "*."), "*") {
				return nil, fmt.Errorf("dcr: host pattern %q: want host or *.domain", h)
			}
			*list.out = append(*list.out, h)
		}
	}
	return c, nil
}

func (c *compiled) setForceConfidential(uris []string) error {
	c.forceConf = map[string]bool{}
	for _, u := range uris {
		if k, err := CheckRedirectURI(u); err != nil || k != RedirectHTTPS {
			return fmt.Errorf("dcr: force-confidential redirect URI %q must be an acceptable https redirect URI", u)
		}
		c.forceConf[u] = true
	}
	return nil
}

// hostMatches reports whether host matches one of patterns ("h" exactly or
// "*.d" for subdomains of d).
func hostMatches(host string, patterns []string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, p := range patterns {
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == p {
			return true
		}
	}
	return false
}

func parseEndpoint(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("dcr: Config.Endpoint is required")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#") {
		return nil, fmt.Errorf("dcr: Config.Endpoint %q must be an absolute http(s) URL without query or fragment", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if u.Path == "" {
		u.Path = "/register"
	}
	u.RawPath = ""
	return u, nil
}
