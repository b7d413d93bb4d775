package as

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/storage"
)

// Defaults for the zero values of Config.
const (
	DefaultAccessTokenTTL  = 15 * time.Minute
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour
	DefaultCodeTTL         = 5 * time.Minute
	// DefaultRefreshGrace covers clients that refresh one credential from
	// several processes (Codex, Goose, OpenCode): each sees the access token
	// expire at about the same time, but a busy or starting process may
	// present the rotated refresh token tens of seconds after another one
	// rotated it. The window ends early once a successor is used, so a
	// longer window does not let a replay through.
	DefaultRefreshGrace  = 30 * time.Second
	DefaultGrantLifetime = 90 * 24 * time.Hour
	// MaxCodeTTL bounds CodeTTL (RFC 9700 §4.2: codes short-lived; OAuth 2.1 §4.1.2: at most 10 minutes).
	MaxCodeTTL = 10 * time.Minute
)

// Resource is a protected resource (an MCP server) this AS issues tokens for
// (RFC 8707).
type Resource struct {
	// URI is the resource indicator; it is canonicalised with
	// metadata.CanonicalResource and that form becomes the tokens' aud.
	URI string
	// Name is shown on the consent page.
	Name string
	// Scopes are the scopes this resource understands. Requested scopes are
	// narrowed to them.
	Scopes []string
	// DefaultScopes are what a request naming no scope gets on this
	// resource (RFC 6749 §3.3: the server's documented default), unless the
	// client registered with a scope of its own. Each must be one of Scopes.
	// Empty means every scope in Scopes; list the least privileged ones to
	// keep clients that send no scope away from administrative scopes.
	DefaultScopes []string
	// Default marks the resource used when a client sends no `resource`.
	// At most one resource is the default; with a single resource it is the
	// default whether marked or not.
	Default bool
	// IntrospectionClients are the ids of configured clients (Config.Clients,
	// confidential) that are this resource's servers: they may introspect
	// any access token whose audience is this resource (RFC 7662 §2.1,
	// §4). Nobody else learns about other clients' tokens for it; in
	// particular no registered or CIMD client ever does.
	IntrospectionClients []string
	// ApprovalClients are the ids of configured confidential clients
	// (Config.Clients) that hold this resource's high-risk tool calls for a
	// person's approval: they may register a call and ask whether it was
	// approved at the approvals endpoint, for access tokens whose audience
	// is this resource. Nobody else may. Empty: no client may.
	ApprovalClients []string
	// TokenClaims are the person attributes written into access tokens
	// for this resource, of PersonClaims (email, groups, tenant), from
	// Config.Attributes; a resource server's policy rules read them
	// (toolpolicy's claims). Empty: none. Client credentials tokens and
	// tokens of federated subjects carry none.
	TokenClaims []string
}

// PersonClaims are the attributes Resource.TokenClaims may name.
var PersonClaims = []string{"email", "groups", "tenant"}

// Person holds the attributes of a person for access tokens.
type Person struct {
	Email  string
	Groups []string
	Tenant string
}

// PersonDirectory gives a person's attributes by subject (the token's
// sub): a local account's from configuration, a person from an upstream
// provider's from their record. ok is false for an unknown subject.
type PersonDirectory interface {
	Person(ctx context.Context, subject string) (p Person, ok bool, err error)
}

// Client is a pre-registered client from configuration. It lives in memory
// and is never written to storage.
type Client struct {
	ID string
	// SecretHash is the internal/secret hash of the secret (as printed by the
	// CLI). Secret is the secret in clear, hashed at start-up; set one of
	// them for a confidential client, neither for a public one.
	SecretHash []byte
	Secret     string
	// Public marks a client that does not authenticate (token_endpoint_auth_method none).
	Public       bool
	RedirectURIs []string
	// GrantTypes default to authorization_code and refresh_token, or to
	// client_credentials for a confidential client with no redirect URIs.
	GrantTypes []string
	// Scopes the client may be granted; empty means every scope of the resources it may use.
	Scopes []string
	// Resources the client may get tokens for; empty means every configured resource.
	Resources []string
	Name      string
	// JWKS (a JWK Set document) or JWKSURI make the client authenticate with
	// private_key_jwt (RFC 7523 §2.2) instead of a secret.
	JWKS    []byte
	JWKSURI string
	// DPoPBoundAccessTokens makes every token request of this client carry a
	// DPoP proof (RFC 9449 §5.2, client metadata dpop_bound_access_tokens).
	DPoPBoundAccessTokens bool
}

// ClientResolver resolves client_ids that are https URLs (Client ID Metadata
// Documents). dcr's CIMD resolver implements it. It returns storage.ErrNotFound
// (wrapped) when the document cannot be used.
type ClientResolver interface {
	ResolveClient(ctx context.Context, id string) (*storage.Client, error)
}

// Config configures New. Zero values are documented per field.
type Config struct {
	// Issuer is the AS identifier (RFC 8414 §2): an https URL (http only
	// for loopback or tests) with no query or fragment. Required.
	Issuer string
	// Resources lists the protected resources. At least one is required.
	Resources []Resource
	// Clients are the pre-registered clients.
	Clients []Client
	// UI runs the login and consent pages. Required for the authorization
	// endpoint; without it /authorize answers with an error page. Give it
	// Revoker (loginui.Config.Revoker) for the revocations people make on
	// /consents.
	UI *loginui.UI
	// Revoker revokes grants (RevokeGrants, the /consents page): built
	// with NewGrantRevoker on Store before the UI and the server. Nil: New
	// builds one.
	Revoker *GrantRevoker
	// People decides whether a person may still use their grants and what
	// their claims cap them to (policy.People.Active, policy.People.Cap);
	// give the one the UI is given. Nil: built from Users (else the UI's
	// accounts), the UI's providers, UpstreamIDs and the records in Store.
	People *policy.People
	// Users says which local people may still use their grants when People
	// is nil: a grant whose person is no longer configured or is disabled
	// is refused at the token endpoint (code, refresh, token exchange) and
	// its tokens answer active:false at introspection. Nil: the UI's
	// users; with neither, every person without a record may. The
	// person's record in Store (storage.UserStore) is read as well: a
	// disabled record is never active, whatever Users says.
	Users UserDirectory
	// Attributes gives the person attributes Resources[].TokenClaims write
	// into access tokens. Nil: none are written.
	Attributes PersonDirectory
	// UpstreamIDs are the ids of the configured upstream identity
	// providers, when People is nil. A person whose record says they signed in through an
	// upstream (storage.User.Upstream) may use their grants while that
	// upstream is listed here and their record is not disabled; Users is
	// not asked about them.
	UpstreamIDs []string
	// Recheck, when set, is asked at every refresh of a person's grant
	// whether their upstream provider still confirms them
	// (upstreams[].recheck_after, *upstream.Rechecker): false refuses the
	// refresh with invalid_grant, an error with temporarily_unavailable.
	Recheck UpstreamRecheck
	// Store keeps tokens, clients, keys and consents. Required.
	Store storage.Store
	// Secret (at least 32 bytes) is the root of every server-side key: the
	// HMAC key of codes and refresh tokens, the sealing key of token payloads
	// and private keys, and the client secret hash key; each is derived with
	// its own purpose. Required; keep it stable across restarts and instances.
	Secret []byte
	// AccessTokenTTL: zero means DefaultAccessTokenTTL (15 minutes).
	AccessTokenTTL time.Duration
	// RefreshTokenTTL is the idle lifetime of a refresh token: each rotation
	// issues one valid this long. Zero means DefaultRefreshTokenTTL (30 days).
	RefreshTokenTTL time.Duration
	// GrantLifetime is the absolute bound of a grant: no refresh token
	// outlives the authorization it came from by more than this (RFC 9700
	// §4.14.2). Zero means DefaultGrantLifetime (90 days).
	GrantLifetime time.Duration
	// CodeTTL: zero means DefaultCodeTTL (5 minutes); at most MaxCodeTTL.
	CodeTTL time.Duration
	// RefreshGrace is how long a rotated refresh token may still be
	// exchanged (racing refreshes) while none of its successors has been
	// used: presenting it after a successor was used is a replay and
	// revokes the family whatever the window (RFC 9700 §4.14.2). Zero
	// means DefaultRefreshGrace (30 seconds); negative disables the window.
	RefreshGrace time.Duration
	// SigningAlg of access tokens: ES256 (zero value), RS256 or EdDSA.
	SigningAlg string
	// ClientResolver resolves https client_ids (CIMD). Nil: such client_ids are unknown.
	ClientResolver ClientResolver
	// JWKSHTTPClient fetches private_key_jwt jwks_uri documents. It must be
	// SSRF-safe (internal/safehttp). Nil: clients with a jwks_uri cannot
	// authenticate (clients with inline JWKS still can).
	JWKSHTTPClient *http.Client
	// AssertionAudienceTokenEndpoint also accepts private_key_jwt client
	// assertions whose aud is the token endpoint URL. By default only the
	// issuer identifier (with or without one trailing slash) is accepted,
	// as the sole aud value (draft-ietf-oauth-rfc7523bis §3); this switch
	// is for clients written to RFC 7523's older wording.
	AssertionAudienceTokenEndpoint bool
	// RegistrationEndpoint is advertised in the metadata when set.
	RegistrationEndpoint string
	// RegistrationScopes and RegistrationResources are the registration
	// policy: the most a client from dynamic registration (RFC 7591) or a
	// Client ID Metadata Document may be granted. The scope such a client
	// registered with is only its default for requests that name none
	// (RFC 7591 §2 leaves its meaning to the server), so it can later ask
	// for more within the policy (step-up). Empty RegistrationScopes: every
	// scope of the resources it may use. Empty RegistrationResources: the
	// resources stored with the client, or every configured resource when
	// it lists none.
	RegistrationScopes    []string
	RegistrationResources []string
	// ExchangePolicy lists the RFC 8693 token exchanges allowed (see
	// ExchangeRule). Zero value: no exchange is allowed; the grant is still
	// advertised, and every exchange request gets invalid_target.
	ExchangePolicy []ExchangeRule
	// DPoP configures sender-constrained tokens (RFC 9449); the zero value
	// accepts proofs, binds the tokens of requests that carry one, and
	// requires none.
	DPoP DPoPConfig
	// EnterpriseIdPs are the enterprise identity providers whose Identity
	// Assertion JWT Authorization Grants (ID-JAG,
	// draft-ietf-oauth-identity-assertion-authz-grant) this server redeems
	// with the jwt-bearer grant (RFC 7523 §2.1). Empty: none.
	EnterpriseIdPs []EnterpriseIdP
	// WorkloadIssuers are the issuers of workload identity tokens
	// (Kubernetes service account tokens, SPIFFE JWT-SVIDs, cloud workload
	// tokens) this server exchanges for access tokens with the jwt-bearer
	// grant, without client authentication. Empty: none.
	WorkloadIssuers []WorkloadIssuer
	// FederationHTTPClient fetches the jwks_uri and discovery documents of
	// EnterpriseIdPs and WorkloadIssuers. It must be SSRF-safe
	// (internal/safehttp). Nil: JWKSHTTPClient.
	FederationHTTPClient *http.Client
	// KeyReloadInterval is how often signing keys are reloaded from the
	// store. Zero means 15 seconds.
	KeyReloadInterval time.Duration
	// Logger receives internal errors and audit events. Nil discards.
	Logger *slog.Logger
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// EnterpriseIdP is a trusted enterprise identity provider (the issuer of
// ID-JAGs, [EXT-EMA]).
type EnterpriseIdP struct {
	// Issuer is the IdP's issuer identifier, an https URL; an ID-JAG's iss
	// must equal it exactly.
	Issuer string
	// JWKS is the IdP's JWK Set (public keys); JWKSURI is where to fetch
	// it instead. Exactly one is required.
	JWKS    []byte
	JWKSURI string
	// Clients are the client IDs that may redeem this IdP's ID-JAGs. At
	// least one; each a confidential client whose GrantTypes include
	// GrantTypeJWTBearer (else unauthorized_client).
	Clients []string
	// LinkByEmail makes the access token's subject the ID-JAG's email
	// claim (required then), so the token belongs to the local account of
	// that name. Default: the subject is "<iss>#<sub>", the IdP's stable
	// identifier of the person.
	LinkByEmail bool
}

// WorkloadIssuer is a trusted issuer of workload identity JWTs.
type WorkloadIssuer struct {
	// Issuer is the iss of its tokens. An https URL, unless JWKS is given
	// (then any string, such as spiffe://example.org).
	Issuer string
	// JWKS is the issuer's JWK Set; JWKSURI is where to fetch it; with
	// neither, the jwks_uri comes from OpenID Connect Discovery of Issuer.
	JWKS    []byte
	JWKSURI string
	// Rules decide which workloads get tokens; the first rule that
	// matches the subject and claims and allows the requested resource
	// applies. At least one.
	Rules []WorkloadRule
}

// WorkloadRule maps workload tokens to an identity and what it may get.
type WorkloadRule struct {
	// Subject is the sub to match: exact, or a pattern where "*" matches
	// any run of characters (spiffe://example.org/ns/prod/sa/*).
	Subject string
	// Claims are further claims the token must carry with exactly these
	// string values (a Kubernetes namespace, a repository).
	Claims map[string]string
	// ClientID is the client_id of the issued access tokens: the identity
	// the workload acts as. Required; not the ID of a configured client.
	ClientID string
	// Resources the workload may get tokens for (configured resources, at
	// least one); Scopes the most it may be granted there (at least one).
	Resources []string
	Scopes    []string
}

// resource is a validated Resource.
type resource struct {
	URI           string // canonical
	Name          string
	Scopes        []string
	DefaultScopes []string // never empty when Scopes is not
	Default       bool
	// introspectors are Resource.IntrospectionClients.
	introspectors []string
	// approvers are Resource.ApprovalClients.
	approvers []string
	// tokenClaims are Resource.TokenClaims.
	tokenClaims []string
	// fixedPoint is whether metadata.CanonicalResource(URI) is URI: a
	// request naming URI exactly names this resource without parsing.
	fixedPoint bool
}

func (c *Config) validate() error {
	if c.Issuer == "" {
		return errors.New("as: Issuer is required")
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || !u.IsAbs() || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil ||
		(u.Scheme != "https" && u.Scheme != "http") || strings.HasSuffix(c.Issuer, "/") {
		return fmt.Errorf("as: Issuer %q must be an http(s) URL without query, fragment or trailing slash", c.Issuer)
	}
	if c.Store == nil {
		return errors.New("as: Store is required")
	}
	if len(c.Secret) < 32 {
		return errors.New("as: Secret must be at least 32 bytes")
	}
	if len(c.Resources) == 0 {
		return errors.New("as: at least one Resource is required")
	}
	if c.CodeTTL > MaxCodeTTL {
		return fmt.Errorf("as: CodeTTL %s exceeds %s", c.CodeTTL, MaxCodeTTL)
	}
	if c.AccessTokenTTL < 0 || c.RefreshTokenTTL < 0 || c.CodeTTL < 0 || c.GrantLifetime < 0 {
		return errors.New("as: TTLs must not be negative")
	}
	switch c.SigningAlg {
	case "", "ES256", "RS256", "EdDSA":
	default:
		return fmt.Errorf("as: SigningAlg %q: want ES256, RS256 or EdDSA", c.SigningAlg)
	}
	for _, sc := range c.RegistrationScopes {
		if !validScopeToken(sc) {
			return fmt.Errorf("as: RegistrationScopes: invalid scope %q", sc)
		}
	}
	for _, r := range c.RegistrationResources {
		cr, err := metadata.CanonicalResource(r)
		known := err == nil && slices.ContainsFunc(c.Resources, func(x Resource) bool {
			cx, err := metadata.CanonicalResource(x.URI)
			return err == nil && cx == cr
		})
		if !known {
			return fmt.Errorf("as: RegistrationResources: %q is not a configured resource", r)
		}
	}
	if _, err := compileExchangePolicy(c.ExchangePolicy, c.Resources); err != nil {
		return err
	}
	if _, _, err := compileFederation(c, nil); err != nil {
		return err
	}
	return nil
}

func buildResources(in []Resource) ([]resource, error) {
	var out []resource
	defaults := 0
	for i, r := range in {
		c, err := metadata.CanonicalResource(r.URI)
		if err != nil {
			return nil, fmt.Errorf("as: Resources[%d].URI %q: %w", i, r.URI, err)
		}
		for _, o := range out {
			if o.URI == c {
				return nil, fmt.Errorf("as: Resources[%d].URI %q is listed twice", i, r.URI)
			}
		}
		for _, s := range r.Scopes {
			if !validScopeToken(s) {
				return nil, fmt.Errorf("as: Resources[%d].Scopes: invalid scope %q", i, s)
			}
		}
		for _, s := range r.DefaultScopes {
			if !slices.Contains(r.Scopes, s) {
				return nil, fmt.Errorf("as: Resources[%d].DefaultScopes: %q is not one of its Scopes", i, s)
			}
		}
		for _, tc := range r.TokenClaims {
			if !slices.Contains(PersonClaims, tc) {
				return nil, fmt.Errorf("as: Resources[%d].TokenClaims: %q is not one of %s", i, tc, strings.Join(PersonClaims, ", "))
			}
		}
		if r.Default {
			defaults++
		}
		def := slices.Clone(r.DefaultScopes)
		if len(def) == 0 {
			def = slices.Clone(r.Scopes)
		}
		again, err := metadata.CanonicalResource(c)
		out = append(out, resource{URI: c, Name: r.Name, Scopes: slices.Clone(r.Scopes), DefaultScopes: def, Default: r.Default,
			introspectors: slices.Clone(r.IntrospectionClients), approvers: slices.Clone(r.ApprovalClients), tokenClaims: slices.Clone(r.TokenClaims), fixedPoint: err == nil && again == c})
	}
	if defaults > 1 {
		return nil, errors.New("as: more than one Resource is marked Default")
	}
	if len(out) == 1 {
		out[0].Default = true
	}
	return out, nil
}

// validScopeToken reports whether s is a scope-token (RFC 6749 §3.3) and not
// the wildcard "*", which this server refuses to give meaning to.
func validScopeToken(s string) bool {
	if s == "" || s == "*" || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c == 0x22 || c == 0x5c || c > 0x7e {
			return false
		}
	}
	return true
}
