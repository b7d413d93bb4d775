package rsmiddleware

import (
	"net/http"
	"sync"
	"time"
)

// SessionHeader is the MCP Streamable HTTP session header.
const SessionHeader = "Mcp-Session-Id"

// StateKey is the key under which a server of a stateless MCP revision
// keeps state it hands out as a handle: "<sub>:<handle>", so a handle
// presented with another subject's token finds nothing (MCP security best
// practices, state handle hijacking).
func StateKey(p *Principal, handle string) string { return p.Subject + ":" + handle }

// statelessWriter drops an Mcp-Session-Id the handler sets: a stateless
// exchange never mints one.
type statelessWriter struct {
	http.ResponseWriter
	wrote bool
}

func (sw *statelessWriter) strip() {
	if !sw.wrote {
		sw.wrote = true
		sw.Header().Del(SessionHeader)
	}
}

func (sw *statelessWriter) WriteHeader(code int) {
	sw.strip()
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statelessWriter) Write(p []byte) (int, error) {
	sw.strip()
	return sw.ResponseWriter.Write(p)
}

// Flush supports streaming (SSE) responses.
func (sw *statelessWriter) Flush() {
	sw.strip()
	if f, ok := sw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (sw *statelessWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// SessionBinding binds MCP sessions to the principal (subject and client ID)
// whose request created them: the session ID a handler returns in the
// Mcp-Session-Id response header is recorded with that principal, and a later
// request carrying that ID for another principal is answered 404 Not Found,
// exactly as the MCP Streamable HTTP transport answers an unknown or
// terminated session. 404 (rather than 403) does not confirm that the session
// exists, and the legitimate client's reaction (start a new session) is right.
// A request with more than one Mcp-Session-Id field is answered 400 Bad
// Request (MCP Streamable HTTP: servers answer 400 to a request without a
// valid session header).
//
// Requests of a stateless MCP revision (Stateless: MCP-Protocol-Version
// 2026-07-28 or later) are not bound: their Mcp-Session-Id is removed
// before the handler sees it and any the handler sets is dropped. Older
// revisions, chosen by the same header, keep the binding.
//
// Wrap it inside Middleware.Wrap, so the principal is in the context.
// Sessions not used for IdleTimeout are forgotten; at most MaxSessions are
// kept (the least recently used is dropped). It is safe for concurrent use.
type SessionBinding struct {
	// IdleTimeout: zero value 24 h.
	IdleTimeout time.Duration
	// MaxSessions: zero value 100000.
	MaxSessions int
	// Now: zero value time.Now.
	Now func() time.Time
	// Owner names the party a session is bound to. Zero value: subject and
	// client ID. A server whose clients may re-register in the middle of a
	// session (the MCP Go SDK's AuthorizationCodeHandler runs DCR again for a
	// step-up, so the client ID changes) can bind to the subject alone, the
	// "<user_id>:<session_id>" binding of the MCP security best practices.
	Owner func(*Principal) string

	mu    sync.Mutex
	owner map[string]*sessionEntry
}

type sessionEntry struct {
	owner    string
	lastUsed time.Time
}

func ownerKey(p *Principal) string { return p.Subject + "\x00" + p.ClientID }

func (b *SessionBinding) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Wrap returns next with session binding applied.
func (b *SessionBinding) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := PrincipalFromContext(r.Context())
		if !ok && IsPreflight(r) {
			next.ServeHTTP(w, r) // carries no session and opens none
			return
		}
		if !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		if Stateless(r) {
			// MCP 2026-07-28 has no sessions: an Mcp-Session-Id is neither
			// honoured nor minted, and every request stands on its own
			// token. State the server hands out is bound to the token's
			// subject instead (StateKey).
			r.Header.Del(SessionHeader)
			next.ServeHTTP(&statelessWriter{ResponseWriter: w}, r)
			return
		}
		if len(r.Header.Values(SessionHeader)) > 1 {
			// One value is checked; a server reading another (the last,
			// or the joined list) would serve a session not checked.
			http.Error(w, "more than one Mcp-Session-Id", http.StatusBadRequest)
			return
		}
		me := ownerKey(p)
		if b.Owner != nil {
			me = b.Owner(p)
		}
		id := r.Header.Get(SessionHeader)
		if id != "" && !b.check(id, me) {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		sw := &sessionWriter{ResponseWriter: w, b: b, owner: me}
		next.ServeHTTP(sw, r)
		// A session is forgotten once the handler has ended it (2xx) or
		// does not know it (404). A server may refuse the DELETE (MCP
		// Streamable HTTP: 405 when clients may not end sessions), and the
		// session then lives on: its binding stays.
		if id != "" && r.Method == http.MethodDelete && (sw.status/100 == 2 || sw.status == http.StatusNotFound) {
			b.forget(id)
		}
	})
}

// check reports whether id may be used by owner; unknown IDs pass (the
// handler answers them itself).
func (b *SessionBinding) check(id, owner string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.owner[id]
	if !ok {
		return true
	}
	if e.owner != owner {
		return false
	}
	e.lastUsed = b.now()
	return true
}

func (b *SessionBinding) forget(id string) {
	b.mu.Lock()
	delete(b.owner, id)
	b.mu.Unlock()
}

// bind records id for owner unless another owner holds it already.
func (b *SessionBinding) bind(id, owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.owner == nil {
		b.owner = make(map[string]*sessionEntry)
	}
	if e, ok := b.owner[id]; ok {
		if e.owner == owner {
			e.lastUsed = now
		}
		return
	}
	idle := b.IdleTimeout
	if idle <= 0 {
		idle = 24 * time.Hour
	}
	max := b.MaxSessions
	if max <= 0 {
		max = 100000
	}
	if len(b.owner) >= max {
		var oldestID string
		var oldest time.Time
		for k, e := range b.owner {
			if now.Sub(e.lastUsed) > idle {
				delete(b.owner, k)
				continue
			}
			if oldestID == "" || e.lastUsed.Before(oldest) {
				oldestID, oldest = k, e.lastUsed
			}
		}
		if len(b.owner) >= max {
			delete(b.owner, oldestID)
		}
	}
	b.owner[id] = &sessionEntry{owner: owner, lastUsed: now}
}

// sessionWriter records the session ID the handler hands out.
type sessionWriter struct {
	http.ResponseWriter
	b           *SessionBinding
	owner       string
	wroteHeader bool
	status      int // of the answer; 0 until written
}

func (sw *sessionWriter) capture() {
	if sw.wroteHeader {
		return
	}
	sw.wroteHeader = true
	if id := sw.Header().Get(SessionHeader); id != "" {
		sw.b.bind(id, sw.owner) // new session, or refresh lastUsed of ours
	}
}

func (sw *sessionWriter) WriteHeader(code int) {
	sw.capture()
	if sw.status == 0 {
		sw.status = code
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *sessionWriter) Write(p []byte) (int, error) {
	sw.capture()
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.ResponseWriter.Write(p)
}

// Flush supports streaming (SSE) responses.
func (sw *sessionWriter) Flush() {
	sw.capture()
	if f, ok := sw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (sw *sessionWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }
