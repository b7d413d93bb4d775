package rsmiddleware

import (
	"container/list"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"strconv"
	"strings"
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

// sessionHeaderWriter lets final rewrite the Mcp-Session-Id of the
// handler's final answer, once, just before that answer's header goes out:
// at its first WriteHeader of a final code, Write or Flush, or after the
// handler if it wrote nothing (net/http then sends 200 with the header).
// An interim answer (1xx) goes out without the field, which the final
// answer may still carry.
type sessionHeaderWriter struct {
	http.ResponseWriter
	final  func(http.Header)
	done   bool
	status int // of the final answer; 0 until it is written
}

func (sw *sessionHeaderWriter) finish(code int) {
	if sw.done {
		return
	}
	sw.done = true
	sw.status = code
	sw.final(sw.Header())
}

func (sw *sessionHeaderWriter) WriteHeader(code int) {
	if interim(code) && !sw.done {
		h := sw.Header()
		ids, ok := h[SessionHeader]
		delete(h, SessionHeader)
		sw.ResponseWriter.WriteHeader(code)
		if ok {
			h[SessionHeader] = ids
		}
		return
	}
	sw.finish(code)
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *sessionHeaderWriter) Write(p []byte) (int, error) {
	sw.finish(http.StatusOK)
	return sw.ResponseWriter.Write(p)
}

// Flush supports streaming (SSE) responses.
func (sw *sessionHeaderWriter) Flush() {
	sw.finish(http.StatusOK)
	if f, ok := sw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (sw *sessionHeaderWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// SessionBinding binds MCP sessions to the principal (subject and client ID)
// whose request created them, so a session ID presented with another
// principal's token is answered 404 Not Found, exactly as the MCP Streamable
// HTTP transport answers an unknown or terminated session ("the client MUST
// start a new session"). 404 (rather than 403) does not confirm that the
// session exists, and the legitimate client's reaction (start a new
// session) is right. A request with more than one Mcp-Session-Id field is
// answered 400 Bad Request (MCP Streamable HTTP: servers answer 400 to a
// request without a valid session header).
//
// With Key set the binding is signed and keeps no state: the session ID the
// handler hands out in the Mcp-Session-Id response header reaches the client
// as "<id>.<mac>", mac the unpadded base64url HMAC-SHA256 under Key of
// "mcp-session" 0x00 owner 0x00 id; this is the "<user_id>:<session_id>"
// binding of the MCP security best practices (session hijacking), checked
// by a MAC instead of a lookup. A request's Mcp-Session-Id is split at its
// last '.', its MAC checked in constant time for the caller's owner, and the
// handler sees the id it handed out. An ID that is not visible ASCII
// (0x21-0x7E, MCP Streamable HTTP session management), has no valid MAC,
// was signed for another owner, or is the handler's own ID without a MAC is
// answered 404 before the handler sees it. Such a binding fails closed: it
// holds after a restart and across instances that share Key, and nothing is
// forgotten or evicted. Key must be at least 32 bytes; Wrap panics on a
// shorter one.
//
// Without Key, IDs are recorded in memory: a later request carrying a
// recorded ID for another principal is answered 404, and an ID the binding
// does not know (never seen, forgotten after IdleTimeout, pushed out past
// MaxSessions, or minted before a restart) is passed to the handler, which
// answers unknown sessions itself. Use Key in front of a server that
// might know sessions the binding does not (a proxy, several instances).
//
// Requests of a stateless MCP revision (Stateless: MCP-Protocol-Version
// 2026-07-28 or later) are not bound: their Mcp-Session-Id is removed
// before the handler sees it and any the handler sets is dropped. Older
// revisions, chosen by the same header, keep the binding.
//
// The session ID is taken from the final answer: an interim answer (1xx
// but 101, RFC 9110 §15.2, such as 103 Early Hints) goes on before it
// without Mcp-Session-Id when the binding signs or drops it.
//
// Wrap it inside Middleware.Wrap, so the principal is in the context.
// Without Key, sessions not used for IdleTimeout are forgotten and at most
// MaxSessions are kept (the least recently used is dropped). It is safe for
// concurrent use.
type SessionBinding struct {
	// IdleTimeout: zero value 24 h. Not used with Key.
	IdleTimeout time.Duration
	// MaxSessions: zero value 100000. Not used with Key.
	MaxSessions int
	// Now: zero value time.Now.
	Now func() time.Time
	// Owner names the party a session is bound to. Zero value: subject and
	// client ID. A server whose clients may re-register in the middle of a
	// session (the MCP Go SDK's AuthorizationCodeHandler runs DCR again for a
	// step-up, so the client ID changes) can bind to the subject alone, the
	// "<user_id>:<session_id>" binding of the MCP security best practices.
	Owner func(*Principal) string
	// Key, when set (at least MinSessionKeyBytes), signs session IDs
	// instead of recording them; instances sharing Key accept each other's
	// sessions.
	Key []byte

	mu    sync.Mutex
	owner map[string]*list.Element // of *sessionEntry
	lru   list.List                // front: most recently used
}

// MinSessionKeyBytes is the shortest SessionBinding.Key accepted: the
// HMAC-SHA256 key length RFC 2104 §3 recommends (L = 32 bytes).
const MinSessionKeyBytes = 32

type sessionEntry struct {
	id       string
	owner    string
	lastUsed time.Time
}

// ownerKey is the default owner: the subject's length in decimal, ':',
// the subject and the client ID. The length tells the two apart whatever
// bytes they hold (a JSON string may hold U+0000, RFC 8259 §7), so no
// other subject and client ID have the same owner.
func ownerKey(p *Principal) string {
	return strconv.Itoa(len(p.Subject)) + ":" + p.Subject + p.ClientID
}

func (b *SessionBinding) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Wrap returns next with session binding applied. It panics if Key is set
// and shorter than MinSessionKeyBytes.
func (b *SessionBinding) Wrap(next http.Handler) http.Handler {
	if b.Key != nil && len(b.Key) < MinSessionKeyBytes {
		panic("rsmiddleware: SessionBinding.Key is shorter than 32 bytes")
	}
	var signer *sessionSigner
	if b.Key != nil {
		signer = newSessionSigner(b.Key)
	}
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
			// A stateless exchange never mints one either.
			r.Header.Del(SessionHeader)
			sw := &sessionHeaderWriter{ResponseWriter: w, final: func(h http.Header) { h.Del(SessionHeader) }}
			next.ServeHTTP(sw, r)
			sw.finish(http.StatusOK)
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
		if signer != nil {
			if id != "" {
				raw, ok := signer.open(id, me)
				if !ok {
					http.Error(w, "session not found", http.StatusNotFound)
					return
				}
				r.Header.Set(SessionHeader, raw)
			}
			sw := &sessionHeaderWriter{ResponseWriter: w, final: func(h http.Header) { signer.signHeader(h, me) }}
			next.ServeHTTP(sw, r)
			sw.finish(http.StatusOK)
			return
		}
		if id != "" && !b.check(id, me) {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		sw := &sessionHeaderWriter{ResponseWriter: w, final: func(h http.Header) { b.bindHeader(h, me) }}
		next.ServeHTTP(sw, r)
		sw.finish(http.StatusOK)
		// A session is forgotten once the handler has ended it (2xx) or
		// does not know it (404). A server may refuse the DELETE (MCP
		// Streamable HTTP: 405 when clients may not end sessions), and the
		// session then lives on: its binding stays.
		if id != "" && r.Method == http.MethodDelete && (sw.status/100 == 2 || sw.status == http.StatusNotFound) {
			b.forget(id)
		}
	})
}

// interim reports whether code is that of an interim answer (RFC 9110
// §15.2), sent before the final one; 101 Switching Protocols ends the
// exchange and is final, as net/http treats it.
func interim(code int) bool {
	return code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols
}

// visibleASCII reports whether s is made of 0x21-0x7E only, the characters
// of a session ID (MCP Streamable HTTP, session management).
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// macLen is the length of an unpadded base64url HMAC-SHA256.
var macLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// sessionSigner signs and checks session IDs under one key.
type sessionSigner struct {
	states sync.Pool // of *macState
}

// macState is an HMAC-SHA256 under the key and scratch space, reused so
// a check costs no allocation.
type macState struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
	got [sha256.Size]byte
}

func newSessionSigner(key []byte) *sessionSigner {
	key = append([]byte(nil), key...)
	return &sessionSigner{states: sync.Pool{New: func() any { return &macState{h: hmac.New(sha256.New, key)} }}}
}

// mac computes into st.sum the HMAC-SHA256 (RFC 2104) under the key of
// "mcp-session" 0x00 owner 0x00 id. An id holds no 0x00, so owner and id
// are told apart even when owner holds one (a subject may).
func (st *macState) mac(owner, id string) []byte {
	st.buf = append(append(append(append(st.buf[:0], "mcp-session\x00"...), owner...), 0), id...)
	st.h.Reset()
	st.h.Write(st.buf)
	return st.h.Sum(st.sum[:0])
}

// sign returns the form of the handler's session id handed to owner:
// "<id>.<mac>". It reports false for an id that is empty or not visible
// ASCII, which no client could send back.
func (s *sessionSigner) sign(id, owner string) (string, bool) {
	if id == "" || !visibleASCII(id) {
		return "", false
	}
	st := s.states.Get().(*macState)
	defer s.states.Put(st)
	m := st.mac(owner, id)
	out := make([]byte, len(id)+1+macLen)
	copy(out, id)
	out[len(id)] = '.'
	base64.RawURLEncoding.Encode(out[len(id)+1:], m)
	return string(out), true
}

// open checks a signed session ID presented by owner and returns the
// handler's id within it: the part before the last '.', whose MAC (the part
// after it) must be that of owner and id, compared in constant time.
func (s *sessionSigner) open(signed, owner string) (string, bool) {
	if !visibleASCII(signed) {
		return "", false
	}
	dot := strings.LastIndexByte(signed, '.')
	if dot <= 0 || len(signed)-dot-1 != macLen {
		return "", false
	}
	id, enc := signed[:dot], signed[dot+1:]
	st := s.states.Get().(*macState)
	defer s.states.Put(st)
	st.buf = append(st.buf[:0], enc...)
	// Strict: the unpadded form has one encoding of each MAC, so a
	// client cannot send a second spelling of a valid ID.
	if n, err := base64.RawURLEncoding.Strict().Decode(st.got[:], st.buf); err != nil || n != sha256.Size {
		return "", false
	}
	if !hmac.Equal(st.got[:], st.mac(owner, id)) {
		return "", false
	}
	return id, true
}

// check reports whether id may be used by owner; unknown IDs pass (the
// handler answers them itself).
func (b *SessionBinding) check(id, owner string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	el, ok := b.owner[id]
	if !ok {
		return true
	}
	e := el.Value.(*sessionEntry)
	if e.owner != owner {
		return false
	}
	e.lastUsed = b.now()
	b.lru.MoveToFront(el)
	return true
}

func (b *SessionBinding) forget(id string) {
	b.mu.Lock()
	if el, ok := b.owner[id]; ok {
		b.lru.Remove(el)
		delete(b.owner, id)
	}
	b.mu.Unlock()
}

// bind records id for owner unless another owner holds it already. When
// MaxSessions are recorded, the sessions idle longer than IdleTimeout go
// first, then the least recently used: the list is kept in order of use,
// so each eviction takes the back, amortised O(1) per bind.
func (b *SessionBinding) bind(id, owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.owner == nil {
		b.owner = make(map[string]*list.Element)
	}
	if el, ok := b.owner[id]; ok {
		if e := el.Value.(*sessionEntry); e.owner == owner {
			e.lastUsed = now
			b.lru.MoveToFront(el)
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
		for el := b.lru.Back(); el != nil; el = b.lru.Back() {
			e := el.Value.(*sessionEntry)
			if now.Sub(e.lastUsed) <= idle && len(b.owner) < max {
				break
			}
			b.lru.Remove(el)
			delete(b.owner, e.id)
			if now.Sub(e.lastUsed) <= idle {
				break // the least recently used live session made room
			}
		}
	}
	b.owner[id] = b.lru.PushFront(&sessionEntry{id: id, owner: owner, lastUsed: now})
}

// signHeader replaces the session ID the handler hands out by its signed
// form. An ID that cannot be signed (not visible ASCII) is dropped: no
// client could present it.
func (s *sessionSigner) signHeader(h http.Header, owner string) {
	if len(h.Values(SessionHeader)) == 0 {
		return
	}
	if signed, ok := s.sign(h.Get(SessionHeader), owner); ok {
		h.Set(SessionHeader, signed)
	} else {
		h.Del(SessionHeader)
	}
}

// bindHeader binds the session ID the handler hands out to owner. One ID
// goes out, the one bound: a client keeping another field's would hold an
// ID bound to no one.
func (b *SessionBinding) bindHeader(h http.Header, owner string) {
	if len(h.Values(SessionHeader)) == 0 {
		return
	}
	if id := h.Get(SessionHeader); id != "" {
		h.Set(SessionHeader, id)
		b.bind(id, owner) // new session, or refresh lastUsed of ours
	} else {
		h.Del(SessionHeader)
	}
}
