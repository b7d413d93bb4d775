package mcpsdk

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// RefHeader is the request header in which RequestContexts.Wrap passes the
// reference of the current HTTP request to tool handlers (the SDK hands
// handlers the request headers as mcp.RequestExtra.Header). Wrap always
// overwrites it, so a value sent by the client is never used.
const RefHeader = "Mcpauth-Request-Ref"

// Errors returned by RequestContexts.
var (
	// ErrNoHTTPRequest: the call did not arrive over HTTP (for example an
	// in-memory or stdio transport), so there is no request context.
	ErrNoHTTPRequest = errors.New("mcpsdk: tool call carries no HTTP request")
	// ErrUnknownRequest: the call's reference names no live request, because
	// the handler is not behind Wrap or the request has already ended.
	ErrUnknownRequest = errors.New("mcpsdk: request context not found")
	// ErrUnauthenticated: the request's context holds no principal, because
	// Wrap does not sit inside rsmiddleware.Middleware.
	ErrUnauthenticated = errors.New("mcpsdk: request carries no verified principal")
)

// RequestContexts gives tool handlers the context of the HTTP request that
// carries their tools/call.
//
// The Go SDK's StreamableHTTPHandler runs tool handlers in the context of the
// session, that is of the HTTP request that opened it (initialize), not of the
// request carrying the call. rsmiddleware.Middleware puts the verified
// Principal and the inbound bearer token (RFC 6750 §2.1) in each request's
// context, so a handler that reads them from its own ctx sees those of the
// session opener: a token since refreshed, or one from before a step-up
// (RFC 6750 §3.1 insufficient_scope, MCP authorization "Scope challenge
// handling"). An RFC 8693 token exchange (rsmiddleware.Exchanger.Token or
// Transport) would then exchange a stale, possibly expired, token.
//
// Wrap sits between rsmiddleware.Middleware (and SessionBinding) and the
// SDK's handler; it records each request's context under a fresh reference
// from crypto/rand, sets RefHeader to that reference (overwriting any value
// the client sent), and forgets the reference when the request ends. Context
// and Principal look the reference up from the call's headers.
//
// The zero value is ready to use; it is safe for concurrent use.
type RequestContexts struct {
	m sync.Map // reference -> context.Context
}

// Wrap returns a handler that makes the context of each request it serves
// available to the tool handlers of next for as long as the request lasts.
func (rc *RequestContexts) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ref := rand.Text()
		rc.m.Store(ref, r.Context())
		defer rc.m.Delete(ref)
		r.Header.Set(RefHeader, ref)
		next.ServeHTTP(w, r)
	})
}

// Context returns the context of the HTTP request that carries req. It is
// done when that request ends; to make an outgoing call that must outlive it
// or be cancelled with the tool call, take only its values.
func (rc *RequestContexts) Context(req *mcp.CallToolRequest) (context.Context, error) {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return nil, ErrNoHTTPRequest
	}
	ref := req.Extra.Header.Get(RefHeader)
	if ref == "" {
		return nil, ErrUnknownRequest
	}
	v, ok := rc.m.Load(ref)
	if !ok {
		return nil, ErrUnknownRequest
	}
	return v.(context.Context), nil
}

// Principal returns the principal rsmiddleware.Middleware verified for the
// HTTP request that carries req, and that request's context (which also
// holds the inbound token for rsmiddleware.Exchanger).
func (rc *RequestContexts) Principal(req *mcp.CallToolRequest) (*rsmiddleware.Principal, context.Context, error) {
	ctx, err := rc.Context(req)
	if err != nil {
		return nil, nil, err
	}
	p, ok := rsmiddleware.PrincipalFromContext(ctx)
	if !ok {
		return nil, nil, ErrUnauthenticated
	}
	return p, ctx, nil
}
