package as

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/metadata"
)

// Metadata returns the RFC 8414 §2 authorization server metadata document
// served at every discovery location.
func (s *Server) Metadata() metadata.AuthorizationServerMetadata {
	var scopes []string
	for _, r := range s.resources {
		for _, sc := range r.Scopes {
			if !slices.Contains(scopes, sc) {
				scopes = append(scopes, sc)
			}
		}
	}
	// offline_access (OpenID Connect Core §11) is an AS scope: accepted on
	// every resource, never listed in a resource's own metadata.
	if !slices.Contains(scopes, offlineAccess) {
		scopes = append(scopes, offlineAccess)
	}
	grants := []string{"authorization_code", "refresh_token", "client_credentials"}
	for _, g := range grantExtensions {
		if g.enabled == nil || g.enabled(s) {
			grants = append(grants, g.grantType)
		}
	}
	// draft-ietf-oauth-identity-assertion-authz-grant §7.2: the ID-JAG
	// profile, listed only with the jwt-bearer grant it rides on. It never
	// names the trusted IdPs (§8.4).
	var profiles []string
	if len(s.cfg.EnterpriseIdPs) > 0 {
		profiles = []string{GrantProfileIDJAG}
	}
	authMethods := []string{authNone, authSecretBasic, authSecretPost, authPrivateKeyJWT}
	return metadata.AuthorizationServerMetadata{
		Issuer:                            s.issuer,
		AuthorizationEndpoint:             s.endpoint("/authorize"),
		TokenEndpoint:                     s.endpoint("/token"),
		JWKSURI:                           s.endpoint("/jwks.json"),
		RegistrationEndpoint:              s.cfg.RegistrationEndpoint,
		ScopesSupported:                   scopes,
		ResponseTypesSupported:            []string{"code"},
		ResponseModesSupported:            []string{"query"},
		GrantTypesSupported:               grants,
		TokenEndpointAuthMethodsSupported: authMethods,
		TokenEndpointAuthSigningAlgValuesSupported: assertionAlgs,
		RevocationEndpoint:                         s.endpoint("/revoke"),
		RevocationEndpointAuthMethodsSupported:     authMethods,
		IntrospectionEndpoint:                      s.endpoint("/introspect"),
		IntrospectionEndpointAuthMethodsSupported:  []string{authSecretBasic, authSecretPost, authPrivateKeyJWT},
		CodeChallengeMethodsSupported:              []string{"S256"},
		AuthorizationResponseISSParameterSupported: true,
		ClientIDMetadataDocumentSupported:          s.cfg.ClientResolver != nil,
		StatusListAggregationEndpoint:              s.endpoint(statusAggregationPath),
		DPoPSigningAlgValuesSupported:              dpop.DefaultAlgs,
		AuthorizationGrantProfilesSupported:        profiles,
	}
}

func (s *Server) buildMetadata() ([]byte, error) {
	return json.MarshalIndent(s.Metadata(), "", "  ")
}

// serveMetadata serves the metadata document (RFC 8414 §3) at the
// path-inserted RFC 8414 location and both OpenID Connect discovery forms.
func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "GET only.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(s.metadata)
}
