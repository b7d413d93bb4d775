package config

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Upstream is one OpenID Connect provider people sign in through (the
// organisation's Okta, Entra ID, Google Workspace, Keycloak, ...). The AS is
// its relying party (OpenID Connect Core 1.0 §3.1, authorization code flow
// with PKCE).
type Upstream struct {
	// ID names the provider in URLs (/upstream/{id}/callback) and in the
	// subjects the AS issues ("{id}:{subject}"): 1 to 32 of [a-z0-9-].
	ID string `yaml:"id"`
	// Name is the label of its button on the login page; default ID.
	Name string `yaml:"name"`
	// Issuer is its issuer identifier; discovery reads
	// {issuer}/.well-known/openid-configuration, whose issuer must be this
	// string exactly (OpenID Connect Discovery 1.0 §4.3). https, or http on
	// a loopback host for development.
	Issuer string `yaml:"issuer"`
	// ClientID is the AS's client id at the provider.
	ClientID string `yaml:"client_id"`
	// ClientSecret authenticates the AS at the provider's token endpoint
	// (client_secret_basic); or PrivateKeyJWT. Exactly one of them.
	ClientSecret  string         `yaml:"client_secret"`
	PrivateKeyJWT *PrivateKeyJWT `yaml:"private_key_jwt"`
	// Scopes asked of the provider; default [openid, email, profile]. Must
	// hold openid.
	Scopes []string `yaml:"scopes"`
	// SubjectClaim is the claim that identifies the person at the provider
	// (default sub; Entra ID needs oid, stable across applications).
	SubjectClaim string `yaml:"subject_claim"`
	// AllowedDomains, when set, admit only people whose verified email
	// (email_verified true) is at one of these domains.
	AllowedDomains []string `yaml:"allowed_domains"`
	// AllowedGroups, when set, admit only people whose groups claim holds
	// one of these values.
	AllowedGroups []string `yaml:"allowed_groups"`
	// ClaimScopes maps claim name -> claim value -> the scopes a person
	// with that value may be granted. When set, it caps every grant: a
	// scope no value of the person's claims maps to is never granted.
	ClaimScopes map[string]map[string][]string `yaml:"claim_scopes"`
	// RecheckAfter makes a refresh of our tokens, when the person was last
	// confirmed longer ago than this, refresh the provider's session with
	// its refresh token and read the claims again. 0 (default) off.
	RecheckAfter Duration `yaml:"recheck_after"`
	// AuthorizationParams are added to the authorization request sent to
	// the provider (Google: access_type: offline, hd: example.com).
	AuthorizationParams map[string]string `yaml:"authorization_params"`
	// Tenant is the tenant of every person from this provider, written
	// into access tokens for resources whose token_claims name tenant; or
	// TenantClaim, the claim of the ID token (or userinfo) that holds it
	// (its first value). At most one of them.
	Tenant      string `yaml:"tenant"`
	TenantClaim string `yaml:"tenant_claim"`
}

// PrivateKeyJWT authenticates the AS at the provider's token endpoint with a
// signed assertion (RFC 7523 §2.2, OpenID Connect Core §9 private_key_jwt).
type PrivateKeyJWT struct {
	// KeyFile is a PEM file with an RSA, P-256 or Ed25519 private key
	// (PKCS#8, or PKCS#1 / SEC 1).
	KeyFile string `yaml:"key_file"`
	// KeyID is the kid the provider registered the public key under.
	KeyID string `yaml:"key_id"`
	// Audience is the assertion's aud; default the provider's token
	// endpoint URL (OpenID Connect Core §9, Okta, Entra ID). Providers
	// following draft-ietf-oauth-rfc7523bis (Zitadel) want the issuer.
	Audience string `yaml:"audience"`
	// Key is the parsed key, set by validation.
	Key crypto.Signer `yaml:"-"`
	// Alg is RS256, ES256 or EdDSA, from the key's type.
	Alg string `yaml:"-"`
}

// Upstream subject syntax and limits.
var upstreamIDPattern = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// reservedUpstreamIDs would make /upstream/{id}/callback or the subject
// form ambiguous with what the AS already serves.
var reservedUpstreamIDs = []string{"local"}

// DefaultUpstreamScopes are asked when an upstream lists none.
var DefaultUpstreamScopes = []string{"openid", "email", "profile"}

// UpstreamIDs returns the ids of the configured upstreams, in order.
func (c *Config) UpstreamIDs() []string {
	out := make([]string, 0, len(c.Upstreams))
	for _, u := range c.Upstreams {
		out = append(out, u.ID)
	}
	return out
}

func (c *Config) upstreamDefaults() {
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Name == "" {
			u.Name = u.ID
		}
		if len(u.Scopes) == 0 {
			u.Scopes = slices.Clone(DefaultUpstreamScopes)
		}
		if u.SubjectClaim == "" {
			u.SubjectClaim = "sub"
		}
	}
}

// validateUpstreams checks upstreams[]; scopes are every configured
// resource's scopes.
func (c *Config) validateUpstreams(scopes map[string]bool) error {
	ids := map[string]bool{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		p := fmt.Sprintf("upstreams[%d]", i)
		if !upstreamIDPattern.MatchString(u.ID) {
			return errf(p+".id", "must be 1 to 32 of a-z, 0-9 and -, got %q", u.ID)
		}
		if slices.Contains(reservedUpstreamIDs, u.ID) {
			return errf(p+".id", "%q is reserved", u.ID)
		}
		if ids[u.ID] {
			return errf(p+".id", "duplicate upstream %q", u.ID)
		}
		ids[u.ID] = true
		if len(u.Name) > 80 || strings.ContainsFunc(u.Name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return errf(p+".name", "must be at most 80 characters without control characters")
		}
		if err := checkUpstreamIssuer(u.Issuer); err != nil {
			return errf(p+".issuer", "%v", err)
		}
		if u.ClientID == "" {
			return errf(p+".client_id", "required")
		}
		switch {
		case u.ClientSecret != "" && u.PrivateKeyJWT != nil:
			return errf(p+".client_secret", "set client_secret or private_key_jwt, not both")
		case u.ClientSecret == "" && u.PrivateKeyJWT == nil:
			return errf(p+".client_secret", "client_secret or private_key_jwt is required")
		case u.PrivateKeyJWT != nil:
			if err := u.PrivateKeyJWT.load(); err != nil {
				return errf(p+".private_key_jwt.key_file", "%v", err)
			}
			if u.PrivateKeyJWT.KeyID == "" {
				return errf(p+".private_key_jwt.key_id", "required")
			}
			if a := u.PrivateKeyJWT.Audience; a != "" {
				if au, err := url.Parse(a); err != nil || au.Host == "" || (au.Scheme != "https" && au.Scheme != "http") {
					return errf(p+".private_key_jwt.audience", "must be an absolute URL (the provider's issuer or token endpoint), got %q", a)
				}
			}
		}
		if err := checkScopes(p+".scopes", u.Scopes); err != nil {
			return err
		}
		if !slices.Contains(u.Scopes, "openid") {
			return errf(p+".scopes", "must include openid")
		}
		if !validClaimName(u.SubjectClaim) {
			return errf(p+".subject_claim", "not a claim name: %q", u.SubjectClaim)
		}
		if u.Tenant != "" && u.TenantClaim != "" {
			return errf(p+".tenant", "tenant and tenant_claim are exclusive")
		}
		if u.TenantClaim != "" && !validClaimName(u.TenantClaim) {
			return errf(p+".tenant_claim", "not a claim name: %q", u.TenantClaim)
		}
		for j, d := range u.AllowedDomains {
			if !validHostName(d) || strings.ToLower(d) != d {
				return errf(fmt.Sprintf("%s.allowed_domains[%d]", p, j), "must be a lower-case domain name such as acme.example, got %q", d)
			}
		}
		for j, g := range u.AllowedGroups {
			if g == "" || len(g) > 256 {
				return errf(fmt.Sprintf("%s.allowed_groups[%d]", p, j), "must be 1 to 256 characters")
			}
		}
		claims := make([]string, 0, len(u.ClaimScopes))
		for name := range u.ClaimScopes {
			claims = append(claims, name)
		}
		sort.Strings(claims)
		for _, name := range claims {
			cp := p + ".claim_scopes." + name
			if !validClaimName(name) {
				return errf(cp, "not a claim name")
			}
			values := make([]string, 0, len(u.ClaimScopes[name]))
			for v := range u.ClaimScopes[name] {
				values = append(values, v)
			}
			sort.Strings(values)
			if len(values) == 0 {
				return errf(cp, "maps no claim value to scopes")
			}
			for _, v := range values {
				vp := cp + "." + v
				if err := checkScopes(vp, u.ClaimScopes[name][v]); err != nil {
					return err
				}
				for k, s := range u.ClaimScopes[name][v] {
					if !scopes[s] {
						return errf(fmt.Sprintf("%s[%d]", vp, k), "scope %q is not a scope of any configured resource", s)
					}
				}
			}
		}
		if d := u.RecheckAfter.D(); d != 0 && (d < time.Minute || d > 30*24*time.Hour) {
			return errf(p+".recheck_after", "must be 0 (off) or between 1m and 720h, got %s", d)
		}
		for k := range u.AuthorizationParams {
			switch k {
			case "response_type", "client_id", "redirect_uri", "scope", "state", "nonce",
				"code_challenge", "code_challenge_method", "resource", "request", "request_uri":
				return errf(p+".authorization_params."+k, "is set by the AS and cannot be configured")
			}
		}
	}
	// The subjects of upstream people are "{id}:{subject}": a local
	// username of that form would be the same person to every grant.
	for i, usr := range c.Users {
		if id, _, ok := strings.Cut(usr.Username, ":"); ok && ids[id] {
			return errf(fmt.Sprintf("users[%d].username", i), "must not start with %q: subjects of that form belong to upstream %q", id+":", id)
		}
	}
	return nil
}

func checkUpstreamIssuer(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return fmt.Errorf("must be an absolute https URL without query or fragment, got %q", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !IsLoopback(u.Hostname()) {
			return fmt.Errorf("must be https (plain http only on a loopback host, for development), got %q", s)
		}
	default:
		return fmt.Errorf("must be an absolute https URL without query or fragment, got %q", s)
	}
	return nil
}

func validClaimName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '.' })
}

// load reads and parses KeyFile.
func (k *PrivateKeyJWT) load() error {
	if k.KeyFile == "" {
		return fmt.Errorf("required")
	}
	raw, err := os.ReadFile(k.KeyFile)
	if err != nil {
		return fmt.Errorf("cannot read %q: %v", k.KeyFile, err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return fmt.Errorf("%q holds no PEM block", k.KeyFile)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return fmt.Errorf("%q: PEM block %q is not a private key", k.KeyFile, block.Type)
	}
	if err != nil {
		return fmt.Errorf("%q: %v", k.KeyFile, err)
	}
	switch key := key.(type) {
	case *rsa.PrivateKey:
		if key.N.BitLen() < 2048 {
			return fmt.Errorf("%q: RSA keys must have at least 2048 bits", k.KeyFile)
		}
		k.Key, k.Alg = key, "RS256"
	case *ecdsa.PrivateKey:
		if key.Curve != elliptic.P256() {
			return fmt.Errorf("%q: EC keys must be on P-256", k.KeyFile)
		}
		k.Key, k.Alg = key, "ES256"
	case ed25519.PrivateKey:
		k.Key, k.Alg = key, "EdDSA"
	default:
		return fmt.Errorf("%q: unsupported key type %T", k.KeyFile, key)
	}
	return nil
}
