package rsmiddleware

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// signedStand is a stand-in for an MCP Streamable HTTP server behind a
// signed SessionBinding: initialize (a request without Mcp-Session-Id)
// creates a session, a request for a session it created succeeds, any
// other session ID is 404, and DELETE ends a session.
type signedStand struct {
	mu       sync.Mutex
	n        int
	sessions map[string]bool
	seen     []string // Mcp-Session-Id of each request reaching the handler
	mint     func(n int) string
}

func (h *signedStand) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := r.Header.Get(SessionHeader)
	h.seen = append(h.seen, id)
	if id == "" {
		h.n++
		id = "session-" + strings.Repeat("x", h.n)
		if h.mint != nil {
			id = h.mint(h.n)
		}
		h.sessions[id] = true
		w.Header().Set(SessionHeader, id)
		w.WriteHeader(http.StatusOK)
		return
	}
	if !h.sessions[id] {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set(SessionHeader, id) // servers may repeat it on each answer
	if r.Method == http.MethodDelete {
		delete(h.sessions, id)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *signedStand) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

type signedFixture struct {
	t     *testing.T
	ks    *keyServer
	mw    *Middleware
	stand *signedStand
}

func newSignedFixture(t *testing.T) *signedFixture {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &signedFixture{t: t, ks: ks, mw: mw, stand: &signedStand{sessions: map[string]bool{}}}
}

// server starts the handler behind a binding of key: one instance of the
// gateway or server; several share the stand's sessions.
func (f *signedFixture) server(key []byte) *httptest.Server {
	b := &SessionBinding{Key: key}
	srv := httptest.NewServer(f.mw.Wrap(b.Wrap(f.stand)))
	f.t.Cleanup(srv.Close)
	return srv
}

func (f *signedFixture) token(sub, client string) string {
	c := f.ks.claims()
	c["sub"], c["client_id"] = sub, client
	return f.ks.mint(c)
}

func (f *signedFixture) do(srv *httptest.Server, method, tok, session string, header ...string) *http.Response {
	f.t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(rpc("tools/list", nil))
	}
	req, _ := http.NewRequest(method, srv.URL, body)
	req.Header.Set("Authorization", "Bearer "+tok)
	if session != "" {
		req.Header.Set(SessionHeader, session)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

var (
	keyA = bytes.Repeat([]byte("a"), 32)
	keyB = bytes.Repeat([]byte("b"), 32)
)

// With Key the client holds "<id>.<mac>": the MAC binds the id to its
// owner, the handler sees its own id, and any other form is 404 before
// the handler, whether or not this instance has seen the session.
func TestSignedSessionBinding(t *testing.T) {
	f := newSignedFixture(t)
	one, two, other := f.server(keyA), f.server(keyA), f.server(keyB)
	alice, aliceOtherClient, bob := f.token("alice", "client-1"), f.token("alice", "client-2"), f.token("bob", "client-1")

	resp := f.do(one, "POST", alice, "")
	sid := resp.Header.Get(SessionHeader)
	raw, mac, ok := strings.Cut(sid, ".")
	if resp.StatusCode != 200 || !ok || raw != "session-x" || len(mac) != 43 || !visibleASCII(sid) {
		t.Fatalf("initialize: %d, session %q, want session-x.<43 base64url>", resp.StatusCode, sid)
	}
	bobSID := f.do(one, "POST", bob, "").Header.Get(SessionHeader)
	if !strings.HasPrefix(bobSID, "session-xx.") {
		t.Fatalf("bob's session %q", bobSID)
	}

	tampered := []byte(sid)
	tampered[len(tampered)-2] ^= 1 // a different character of the alphabet
	// The last of 43 characters carries 4 bits of the MAC and 2 unused
	// bits: a lax decoder reads the same MAC from a second spelling.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	unusedBits := sid[:len(sid)-1] + string(alphabet[strings.IndexByte(alphabet, sid[len(sid)-1])|1])
	tests := []struct {
		name    string
		srv     *httptest.Server
		method  string
		token   string
		session string
		status  int
		handled string // the Mcp-Session-Id the handler got; "" when not reached
	}{
		{"lets the creator use the session and hands the handler its own ID", one, "POST", alice, sid, 200, raw},
		{"lets the creator use the session at another instance with the same key", two, "POST", alice, sid, 200, raw},
		{"refuses the session at an instance with another key", other, "POST", alice, sid, 404, ""},
		{"refuses another user's session ID", one, "POST", bob, sid, 404, ""},
		{"refuses another user's session ID at another instance", two, "POST", bob, sid, 404, ""},
		{"refuses the same user through another client (default owner)", one, "POST", aliceOtherClient, sid, 404, ""},
		{"refuses another user's DELETE", one, "DELETE", bob, sid, 404, ""},
		{"refuses the handler's own ID without a MAC", one, "POST", alice, raw, 404, ""},
		{"refuses a tampered MAC", one, "POST", alice, string(tampered), 404, ""},
		{"refuses a MAC whose last character has unused bits set", one, "POST", alice, unusedBits, 404, ""},
		{"refuses a truncated MAC", one, "POST", alice, sid[:len(sid)-1], 404, ""},
		{"refuses a MAC with padding", one, "POST", alice, sid + "=", 404, ""},
		{"refuses an empty MAC", one, "POST", alice, raw + ".", 404, ""},
		{"refuses a MAC without an id", one, "POST", alice, "." + mac, 404, ""},
		{"refuses alice's MAC on bob's id", one, "POST", alice, "session-xx." + mac, 404, ""},
		{"refuses bob's ID presented by alice", one, "POST", alice, bobSID, 404, ""},
		{"refuses an ID that is not visible ASCII", one, "POST", alice, "s\x80ssion." + mac, 404, ""},
		{"refuses an ID with a space", one, "POST", alice, "a b." + mac, 404, ""},
		{"passes DELETE to the handler with its own ID", two, "DELETE", alice, sid, 204, raw},
		{"passes an ended session to the handler, which does not know it", one, "POST", alice, sid, 404, raw},
		{"lets bob use his session", two, "POST", bob, bobSID, 200, "session-xx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.stand.requests())
			resp := f.do(tt.srv, tt.method, tt.token, tt.session)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			seen := f.stand.requests()[before:]
			switch {
			case tt.handled == "" && len(seen) != 0:
				t.Fatalf("the handler was reached with %q", seen)
			case tt.handled != "" && (len(seen) != 1 || seen[0] != tt.handled):
				t.Fatalf("the handler got %q, want %q", seen, tt.handled)
			}
			if got := resp.Header.Get(SessionHeader); tt.status == 200 && got != tt.session {
				t.Fatalf("answer's Mcp-Session-Id %q, want the signed form %q", got, tt.session)
			}
			if got := resp.Header.Get(SessionHeader); got != "" && !strings.Contains(got, ".") {
				t.Fatalf("the handler's raw ID %q reached the client", got)
			}
		})
	}
}

// A stateless request (MCP 2026-07-28) neither presents nor receives a
// session ID, signed or not.
func TestSignedSessionBindingLeavesStatelessRequestsAlone(t *testing.T) {
	f := newSignedFixture(t)
	srv := f.server(keyA)
	alice := f.token("alice", "c")
	sid := f.do(srv, "POST", alice, "").Header.Get(SessionHeader)
	resp := f.do(srv, "POST", alice, sid, "MCP-Protocol-Version", "2026-07-28")
	if got := resp.Header.Get(SessionHeader); got != "" {
		t.Errorf("a stateless answer carries Mcp-Session-Id %q", got)
	}
	if seen := f.stand.requests(); len(seen) != 2 || seen[1] != "" {
		t.Errorf("the handler got %q, want no Mcp-Session-Id on the stateless request", seen)
	}
}

// A handler's session ID that is not visible ASCII cannot be presented
// by a client (MCP Streamable HTTP), so it is not handed out.
func TestSignedSessionBindingDropsAnIDNoClientCouldSend(t *testing.T) {
	f := newSignedFixture(t)
	f.stand.mint = func(n int) string { return "s\x80" + strings.Repeat("x", n) }
	srv := f.server(keyA)
	resp := f.do(srv, "POST", f.token("alice", "c"), "")
	if resp.StatusCode != 200 || len(resp.Header.Values(SessionHeader)) != 0 {
		t.Fatalf("%d, Mcp-Session-Id %q: want 200 without one", resp.StatusCode, resp.Header.Values(SessionHeader))
	}
}

// The signed form is the id, '.', and the MAC; the split is at the last
// '.', so ids with dots of their own keep them.
func TestSignedSessionIDKeepsDotsOfTheID(t *testing.T) {
	s := newSessionSigner(keyA)
	for _, id := range []string{"a.b.c", "x.", "..", "~!#$%&'()*+,-./:;<=>?@[\\]^_`{|}"} {
		signed, ok := s.sign(id, "alice")
		if !ok || !visibleASCII(signed) {
			t.Fatalf("sign(%q) = %q %v", id, signed, ok)
		}
		if got, ok := s.open(signed, "alice"); !ok || got != id {
			t.Errorf("open(%q) = %q %v, want %q", signed, got, ok, id)
		}
		if _, ok := s.open(signed, "bob"); ok {
			t.Errorf("open(%q) for bob succeeded", signed)
		}
	}
}

func TestSessionBindingRefusesAShortKey(t *testing.T) {
	for _, key := range [][]byte{{}, bytes.Repeat([]byte{1}, 31)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Wrap accepted a %d-byte key", len(key))
				}
			}()
			(&SessionBinding{Key: key}).Wrap(http.NotFoundHandler())
		}()
	}
	(&SessionBinding{Key: keyA}).Wrap(http.NotFoundHandler()) // 32 bytes: accepted
}

// Without Key, a full binding drops the least recently used session: a
// session used since it was opened outlives one opened after it.
func TestSessionBindingEvictsTheLeastRecentlyUsed(t *testing.T) {
	b := SessionBinding{MaxSessions: 2}
	b.bind("a", "alice")
	b.bind("b", "bob")
	if !b.check("a", "alice") {
		t.Fatal("a refused to its owner")
	}
	b.bind("c", "carol") // full: b is the least recently used
	if b.check("a", "mallory") || b.check("c", "mallory") {
		t.Error("a recently used session was dropped")
	}
	if !b.check("b", "mallory") {
		t.Error("b, the least recently used, is still bound")
	}
	if len(b.owner) != 2 || b.lru.Len() != 2 {
		t.Errorf("%d sessions in the map, %d in the list, want 2", len(b.owner), b.lru.Len())
	}
	b.forget("a")
	b.forget("a")
	if len(b.owner) != 1 || b.lru.Len() != 1 {
		t.Errorf("after forget: %d in the map, %d in the list, want 1", len(b.owner), b.lru.Len())
	}
}

// FuzzSignedSessionID: a presented Mcp-Session-Id opens only if it is, byte
// for byte, the signed form of the id it yields for that owner; it never
// opens for another owner; and every visible ASCII id signs to a visible
// ASCII form that opens to it.
func FuzzSignedSessionID(f *testing.F) {
	s := newSessionSigner(keyA)
	good, _ := s.sign("session-1", "alice")
	for _, seed := range []string{good, "session-1", good + "=", "." + good, good[:len(good)-1], "a.b.c", "", ".", "\x80." + good} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, presented string) {
		if id, ok := s.open(presented, "alice"); ok {
			if again, _ := s.sign(id, "alice"); again != presented {
				t.Fatalf("open(%q) = %q, whose signed form is %q", presented, id, again)
			}
			if _, ok := s.open(presented, "bob"); ok {
				t.Fatalf("%q opens for bob too", presented)
			}
		}
		signed, ok := s.sign(presented, "alice")
		if ok != (presented != "" && visibleASCII(presented)) {
			t.Fatalf("sign(%q) ok = %v", presented, ok)
		}
		if !ok {
			return
		}
		if !visibleASCII(signed) {
			t.Fatalf("sign(%q) = %q is not visible ASCII", presented, signed)
		}
		if id, ok := s.open(signed, "alice"); !ok || id != presented {
			t.Fatalf("open(sign(%q)) = %q %v", presented, id, ok)
		}
	})
}
