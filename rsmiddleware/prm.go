package rsmiddleware

import (
	"errors"
	"net/http"
	"slices"

	"github.com/mcpauth/mcpauth/metadata"
)

// NewProtectedResourceMetadata returns the RFC 9728 §2 document of resource
// as MCP requires it: "resource" is the canonical URI (byte-equal to the URL
// the document is served under), "authorization_servers" lists the issuers,
// and "bearer_methods_supported" is ["header"]. "offline_access" is dropped
// from scopes, which MCP says must not be advertised by a resource.
func NewProtectedResourceMetadata(resource string, authorizationServers, scopes []string) (metadata.ProtectedResourceMetadata, error) {
	res, err := metadata.CanonicalResource(resource)
	if err != nil {
		return metadata.ProtectedResourceMetadata{}, err
	}
	if len(authorizationServers) == 0 {
		return metadata.ProtectedResourceMetadata{}, errors.New("rsmiddleware: at least one authorization server is required")
	}
	sc := slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return s == "offline_access" })
	return metadata.ProtectedResourceMetadata{
		Resource:               res,
		AuthorizationServers:   slices.Clone(authorizationServers),
		ScopesSupported:        sc,
		BearerMethodsSupported: []string{"header"},
	}, nil
}

// MountPRM serves doc on mux at the path-inserted well-known path of
// doc.Resource (RFC 9728 §3.1) and, when root is true, also at
// "/.well-known/oauth-protected-resource" (for a server that is the only
// resource on its origin). Both answer CORS preflights.
func MountPRM(mux *http.ServeMux, doc metadata.ProtectedResourceMetadata, root bool) error {
	h, err := metadata.Handler(doc)
	if err != nil {
		return err
	}
	p, err := metadata.WellKnownPath(doc.Resource, metadata.SuffixProtectedResource)
	if err != nil {
		return err
	}
	mux.Handle(p, h)
	rootPath := "/.well-known/" + metadata.SuffixProtectedResource
	if root && p != rootPath {
		mux.Handle(rootPath, h)
	}
	return nil
}
