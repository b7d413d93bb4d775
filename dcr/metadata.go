package dcr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/storage"
)

// ClientMetadata is the RFC 7591 §2 client metadata this server understands.
// Fields it does not know are ignored (RFC 7591 §2, "MUST ignore").
type ClientMetadata struct {
	RedirectURIs            []string        `json:"redirect_uris,omitempty"`
	TokenEndpointAuthMethod string          `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string        `json:"grant_types,omitempty"`
	ResponseTypes           []string        `json:"response_types,omitempty"`
	ClientName              string          `json:"client_name,omitempty"`
	ClientURI               string          `json:"client_uri,omitempty"`
	LogoURI                 string          `json:"logo_uri,omitempty"`
	Scope                   string          `json:"scope,omitempty"`
	Contacts                []string        `json:"contacts,omitempty"`
	TOSURI                  string          `json:"tos_uri,omitempty"`
	PolicyURI               string          `json:"policy_uri,omitempty"`
	JWKSURI                 string          `json:"jwks_uri,omitempty"`
	JWKS                    json.RawMessage `json:"jwks,omitempty"`
	SoftwareID              string          `json:"software_id,omitempty"`
	SoftwareVersion         string          `json:"software_version,omitempty"`
	ApplicationType         string          `json:"application_type,omitempty"`
	// DPoPBoundAccessTokens (RFC 9449 §5.2): the client always sends a
	// DPoP proof, and the authorization server refuses its token requests
	// that lack one.
	DPoPBoundAccessTokens bool `json:"dpop_bound_access_tokens,omitempty"`

	// scopeDefaulted marks accepted metadata whose scope names none of the
	// policy's scopes: Scope then lists the policy's (what the client may
	// use, RFC 7591 §2) and the client has no default scope of its own.
	scopeDefaulted bool
}

// Error codes of RFC 7591 §3.2.2 and RFC 6750 §3.1, and the generic ones this
// package answers with.
const (
	CodeInvalidRedirectURI    = "invalid_redirect_uri"
	CodeInvalidClientMetadata = "invalid_client_metadata"
	CodeInvalidToken          = "invalid_token"
	CodeTemporarilyUnavail    = "temporarily_unavailable"
	CodeServerError           = "server_error"
	CodeInvalidRequest        = "invalid_request"
)

// MetadataError is a refusal of client metadata: Code is
// invalid_redirect_uri or invalid_client_metadata (RFC 7591 §3.2.2) and
// Description names the field and what is wrong with it.
type MetadataError struct {
	Code        string
	Description string
}

func (e *MetadataError) Error() string { return e.Code + ": " + e.Description }

func badMeta(format string, args ...any) *MetadataError {
	return &MetadataError{Code: CodeInvalidClientMetadata, Description: fmt.Sprintf(format, args...)}
}

func badRedirect(format string, args ...any) *MetadataError {
	return &MetadataError{Code: CodeInvalidRedirectURI, Description: fmt.Sprintf(format, args...)}
}

// Grant types and authentication methods (RFC 7591 §2).
const (
	GrantAuthorizationCode = "authorization_code"
	GrantRefreshToken      = "refresh_token"
	GrantClientCredentials = "client_credentials"

	AuthNone              = "none"
	AuthClientSecretBasic = "client_secret_basic"
	AuthClientSecretPost  = "client_secret_post"
	AuthPrivateKeyJWT     = "private_key_jwt"
)

// decodeMetadata parses one JSON object into md, with errors naming the field.
// extra receives the top-level keys so callers can check for forbidden ones.
func decodeMetadata(body []byte) (ClientMetadata, map[string]json.RawMessage, *MetadataError) {
	var md ClientMetadata
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return md, nil, badMeta("request body must be a JSON object")
	}
	if !utf8.Valid(trimmed) {
		return md, nil, badMeta("request body is not valid UTF-8")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return md, nil, badMeta("request body is not valid JSON")
	}
	if err := json.Unmarshal(trimmed, &md); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return md, nil, badMeta("%s: wrong JSON type (got %s)", te.Field, te.Value)
		}
		return md, nil, badMeta("request body is not valid client metadata")
	}
	if j, ok := raw["jwks"]; ok && !bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' {
			return md, nil, badMeta("jwks: must be a JSON Web Key Set object")
		}
	} else {
		md.JWKS = nil
	}
	return md, raw, nil
}

// mode says which rules apply: DCR or a CIMD document.
type mode int

const (
	modeDCR mode = iota
	modeCIMD
)

// validate checks md against the policy and returns the accepted metadata:
// normalised, narrowed (grant types, response types, scope) and with defaults.
func (p *compiled) validate(md ClientMetadata, m mode) (ClientMetadata, *MetadataError) {
	out := md
	// Strings a person may see, or that travel on: safe and bounded.
	for _, f := range []struct{ name, v string }{
		{"client_name", md.ClientName}, {"client_uri", md.ClientURI}, {"logo_uri", md.LogoURI},
		{"scope", md.Scope}, {"tos_uri", md.TOSURI}, {"policy_uri", md.PolicyURI},
		{"jwks_uri", md.JWKSURI}, {"software_id", md.SoftwareID}, {"software_version", md.SoftwareVersion},
		{"token_endpoint_auth_method", md.TokenEndpointAuthMethod}, {"application_type", md.ApplicationType},
	} {
		if err := p.checkString(f.name, f.v); err != nil {
			return out, err
		}
	}
	for _, list := range []struct {
		name string
		vs   []string
	}{{"contacts", md.Contacts}, {"grant_types", md.GrantTypes}, {"response_types", md.ResponseTypes}} {
		if len(list.vs) > 20 {
			return out, badMeta("%s: more than 20 entries", list.name)
		}
		for i, v := range list.vs {
			if err := p.checkString(fmt.Sprintf("%s[%d]", list.name, i), v); err != nil {
				return out, err
			}
		}
	}
	out.ClientName = strings.TrimSpace(md.ClientName)
	if m == modeCIMD && out.ClientName == "" {
		return out, badMeta("client_name: required in a client metadata document")
	}
	for name, v := range map[string]string{"client_uri": md.ClientURI, "logo_uri": md.LogoURI, "tos_uri": md.TOSURI, "policy_uri": md.PolicyURI} {
		if v != "" && !isWebURL(v) {
			return out, badMeta("%s: must be an absolute https URL without userinfo or fragment", name)
		}
	}

	// application_type (OpenID Connect Registration §2, used by MCP clients).
	switch md.ApplicationType {
	case "", "web", "native":
	default:
		return out, badMeta("application_type: must be \"web\" or \"native\"")
	}

	// Authentication method.
	method := md.TokenEndpointAuthMethod
	if method == "" {
		method = AuthClientSecretBasic // RFC 7591 §2 default
		if m == modeCIMD {
			method = AuthNone // CIMD clients have no shared secret
		}
	}
	if method == AuthNone && m == modeDCR {
		for _, u := range md.RedirectURIs {
			if p.forceConf[u] {
				method = AuthClientSecretPost
				break
			}
		}
	}
	switch method {
	case AuthNone, AuthPrivateKeyJWT:
	case AuthClientSecretBasic, AuthClientSecretPost:
		if m == modeCIMD {
			return out, badMeta("token_endpoint_auth_method: %s needs a shared secret, which a client metadata document cannot have", method)
		}
	default:
		return out, badMeta("token_endpoint_auth_method: %q is not supported (none, client_secret_basic, client_secret_post, private_key_jwt)", method)
	}
	out.TokenEndpointAuthMethod = method
	if len(md.JWKS) > 0 && md.JWKSURI != "" {
		return out, badMeta("jwks and jwks_uri: only one of them may be given (RFC 7591 §2)")
	}
	if md.JWKSURI != "" && !isWebURL(md.JWKSURI) {
		return out, badMeta("jwks_uri: must be an absolute https URL without userinfo or fragment")
	}
	if len(md.JWKS) > 0 {
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(md.JWKS, &set); err != nil || len(set.Keys) == 0 {
			return out, badMeta("jwks: not a JSON Web Key Set with at least one key (RFC 7517 §5)")
		}
		for i, k := range set.Keys {
			if !k.Valid() || !k.IsPublic() {
				return out, badMeta("jwks: key %d is not a valid public key", i)
			}
			// The kid is echoed in responses and logs and looked up
			// against assertion headers: printable only.
			if !SafeString(k.KeyID) || !SafeString(k.Algorithm) || !SafeString(k.Use) {
				return out, badMeta("jwks: key %d has a kid, alg or use with characters that cannot be shown safely", i)
			}
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, md.JWKS); err != nil {
			return out, badMeta("jwks: not valid JSON")
		}
		out.JWKS = compact.Bytes()
	}
	if method == AuthPrivateKeyJWT && len(md.JWKS) == 0 && md.JWKSURI == "" {
		return out, badMeta("token_endpoint_auth_method: private_key_jwt needs jwks or jwks_uri")
	}

	// Grant types: requests the policy narrows, not commands (RFC 7591 §2 lets
	// the server replace values). Unknown ones (jwt-bearer) are dropped.
	grants := md.GrantTypes
	if len(grants) == 0 {
		grants = []string{GrantAuthorizationCode}
	}
	var kept []string
	for _, g := range grants {
		ok := false
		switch g {
		case GrantAuthorizationCode, GrantRefreshToken:
			ok = true
		case GrantClientCredentials:
			ok = m == modeDCR && p.allowCC && method != AuthNone
		}
		if ok && !slices.Contains(kept, g) {
			kept = append(kept, g)
		}
	}
	if !slices.Contains(kept, GrantAuthorizationCode) && !slices.Contains(kept, GrantClientCredentials) {
		return out, badMeta("grant_types: none of %q may be used by this client (allowed: authorization_code, refresh_token%s)",
			md.GrantTypes, map[bool]string{true: ", client_credentials for confidential clients", false: ""}[p.allowCC && m == modeDCR])
	}
	out.GrantTypes = kept
	out.ResponseTypes = nil
	if slices.Contains(kept, GrantAuthorizationCode) {
		out.ResponseTypes = []string{"code"} // the only response type OAuth 2.1 keeps
	}

	// Redirect URIs.
	if len(md.RedirectURIs) > p.maxRedirectURIs {
		return out, badRedirect("redirect_uris: more than %d entries", p.maxRedirectURIs)
	}
	if slices.Contains(kept, GrantAuthorizationCode) && len(md.RedirectURIs) == 0 {
		return out, badRedirect("redirect_uris: required for the authorization_code grant")
	}
	appType := md.ApplicationType
	var uris []string
	hasPrivate, hasLoopback := false, false
	for i, u := range md.RedirectURIs {
		if len(u) > p.maxString {
			return out, badRedirect("redirect_uris[%d]: longer than %d characters", i, p.maxString)
		}
		kind, err := CheckRedirectURI(u)
		if err != nil {
			return out, badRedirect("redirect_uris[%d]: %s", i, err)
		}
		switch kind {
		case RedirectPrivateUse:
			hasPrivate = true
			if appType == "web" {
				return out, badRedirect("redirect_uris[%d]: a private-use scheme needs application_type \"native\"", i)
			}
		case RedirectLoopback:
			hasLoopback = true
		}
		if pu, _ := url.Parse(u); pu != nil && pu.Hostname() != "" {
			h := pu.Hostname()
			if hostMatches(h, p.hostDeny) {
				return out, badRedirect("redirect_uris[%d]: host %q is not allowed", i, h)
			}
			if len(p.hostAllow) > 0 && !hostMatches(h, p.hostAllow) {
				return out, badRedirect("redirect_uris[%d]: host %q is not on the allowed list", i, h)
			}
		}
		if !slices.Contains(uris, u) {
			uris = append(uris, u)
		}
	}
	out.RedirectURIs = uris
	if appType == "" {
		appType = "web"
		if hasPrivate || (hasLoopback && method == AuthNone) {
			appType = "native"
		}
	}
	out.ApplicationType = appType

	// Scopes: never beyond policy (policy.Registration); "*" means
	// nothing here.
	scopes, defaulted := policy.Registration(strings.Fields(md.Scope), p.scopes)
	out.Scope, out.scopeDefaulted = strings.Join(scopes, " "), defaulted
	out.Contacts = slices.Clone(md.Contacts) // nil stays nil (omitted)
	return out, nil
}

// applyMetadata sets the fields of c that follow from the accepted metadata
// md (as validate returned it, encoded as metaJSON) and the policy; callers
// set the id, source, secrets and times. validate lets a CIMD client have
// only "none" or "private_key_jwt", so "none" is public in both modes.
func (p *compiled) applyMetadata(c *storage.Client, md ClientMetadata, metaJSON []byte) {
	c.Public = md.TokenEndpointAuthMethod == AuthNone
	c.Name = md.ClientName
	c.RedirectURIs = md.RedirectURIs
	c.GrantTypes = md.GrantTypes
	c.ResponseTypes = md.ResponseTypes
	// The stored scopes are the client's default for requests that name
	// none; what it may be granted is the policy, which the authorization
	// server applies. A registration naming no policy scope has no default
	// of its own: the resources' default scopes apply.
	c.Scopes = strings.Fields(md.Scope)
	if md.scopeDefaulted {
		c.Scopes = nil
	}
	c.Resources = append([]string(nil), p.resources...)
	c.TokenEndpointAuthMethod = md.TokenEndpointAuthMethod
	c.JWKS = md.JWKS
	c.JWKSURI = md.JWKSURI
	c.ApplicationType = md.ApplicationType
	c.Metadata = metaJSON
}

func (p *compiled) checkString(name, v string) *MetadataError {
	if len(v) > p.maxString {
		return badMeta("%s: longer than %d characters", name, p.maxString)
	}
	if !SafeString(v) {
		return badMeta("%s: contains characters that cannot be shown safely (control, bidirectional or invalid UTF-8)", name)
	}
	return nil
}

// SafeString reports whether s can be shown to a person as is: valid UTF-8
// without control characters, bidirectional overrides or other invisible
// format characters that could disguise a client's name.
func SafeString(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError ||
			unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) {
			return false
		}
	}
	return true
}

func isWebURL(raw string) bool {
	for _, r := range raw {
		if r <= ' ' || r > 0x7e {
			return false
		}
	}
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Hostname() != "" &&
		u.User == nil && u.Fragment == "" && !strings.Contains(raw, "#")
}
