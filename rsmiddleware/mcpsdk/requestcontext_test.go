package mcpsdk_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/rsmiddleware/mcpsdk"
)

// swappableToken sends the current token of a client whose token changes in
// the middle of a session (a refresh or a step-up), and optionally a forged
// reference header.
type swappableToken struct {
	mu     sync.Mutex
	token  string
	forged string
}

func (s *swappableToken) set(token, forged string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token, s.forged = token, forged
}

func (s *swappableToken) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	token, forged := s.token, s.forged
	s.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	if forged != "" {
		r.Header.Set(mcpsdk.RefHeader, forged)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// bridgedServer is a real go-sdk MCP server behind rsmiddleware.Middleware,
// SessionBinding and RequestContexts. Its whoami tool reports the principal
// of the request carrying the call (through RequestContexts) and the one in
// the tool's own context; hold sends its reference on held and blocks until
// release is closed.
type bridgedServer struct {
	resource string
	held     chan string
	release  chan struct{}
}

func newBridgedServer(t *testing.T, as *testAS) *bridgedServer {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	bs := &bridgedServer{resource: srv.URL + "/mcp", held: make(chan string, 1), release: make(chan struct{})}
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: as.issuer, Resource: bs.resource})
	if err != nil {
		t.Fatal(err)
	}
	prmURL, _ := rsmiddleware.ResourceMetadataURL(bs.resource)
	mw, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier: v, ResourceMetadataURL: prmURL,
		Scopes: rsmiddleware.Scopes{Base: []string{"mcp:read"}, Tools: map[string][]string{"admin_whoami": {"repo:admin"}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	var rc mcpsdk.RequestContexts
	type none struct{}
	server := mcp.NewServer(&mcp.Implementation{Name: "bridged", Version: "1"}, nil)
	whoami := func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		p, reqCtx, err := rc.Principal(req)
		if err != nil {
			return nil, nil, err
		}
		if q, ok := rsmiddleware.PrincipalFromContext(reqCtx); !ok || q != p {
			return nil, nil, errors.New("the returned context does not hold the returned principal")
		}
		// subject|jti|scopes|jti seen in the tool's own (session) context
		text := p.Subject + "|" + p.TokenID + "|" + strings.Join(p.Scopes, ",") + "|"
		if q, ok := rsmiddleware.PrincipalFromContext(ctx); ok {
			text += q.TokenID
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	}
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, whoami)
	mcp.AddTool(server, &mcp.Tool{Name: "admin_whoami"}, whoami)
	mcp.AddTool(server, &mcp.Tool{Name: "hold"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		bs.held <- req.Extra.Header.Get(mcpsdk.RefHeader)
		<-bs.release
		return whoami(ctx, req, none{})
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var binding rsmiddleware.SessionBinding
	mux.Handle("/mcp", mw.Wrap(binding.Wrap(rc.Wrap(handler))))
	return bs
}

func connectWith(t *testing.T, endpoint string, rt http.RoundTripper) *mcp.ClientSession {
	c := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestRequestContextsGiveToolsTheCurrentRequest(t *testing.T) {
	as := newTestAS(t)
	bs := newBridgedServer(t, as)

	t.Run("a tool sees the token of the current call, not of the session opener, after a step-up", func(t *testing.T) {
		opener := as.mint(t, "alice", bs.resource, "mcp:read")
		rt := &swappableToken{token: opener}
		cs := connectWith(t, bs.resource, rt)
		first, err := callText(t, cs, "whoami")
		if err != nil {
			t.Fatal(err)
		}
		before := strings.Split(first, "|")
		if len(before) != 4 || before[0] != "alice" || before[2] != "mcp:read" || before[1] != before[3] {
			t.Fatalf("before the step-up the tool saw %q", first)
		}
		// (A refused admin_whoami here would close the go-sdk client's
		// session: its step-up is a new connection. A token replaced by a
		// refresh or a step-up in the same session is what this covers.)
		rt.set(as.mint(t, "alice", bs.resource, "mcp:read repo:admin"), "")
		got, err := callText(t, cs, "admin_whoami")
		if err != nil {
			t.Fatal(err)
		}
		after := strings.Split(got, "|")
		if len(after) != 4 || after[0] != "alice" || after[2] != "mcp:read,repo:admin" || after[1] == before[1] {
			t.Errorf("after the step-up the tool saw %q (before: %q)", got, first)
		}
		// What the bridge is for: the SDK's own context still holds the
		// opener's principal (logged, not asserted: a property of the SDK).
		t.Logf("before: %q; after the step-up: %q", first, got)
	})

	t.Run("a forged reference naming another live request selects nothing of it", func(t *testing.T) {
		bob := connectWith(t, bs.resource, &swappableToken{token: as.mint(t, "bob", bs.resource, "mcp:read")})
		bobDone := make(chan string, 1)
		go func() {
			got, err := callText(t, bob, "hold")
			if err != nil {
				got = "error: " + err.Error()
			}
			bobDone <- got
		}()
		bobRef := <-bs.held // bob's request is live, under this reference
		rt := &swappableToken{token: as.mint(t, "alice", bs.resource, "mcp:read")}
		cs := connectWith(t, bs.resource, rt)
		rt.set(as.mint(t, "alice", bs.resource, "mcp:read"), bobRef)
		got, err := callText(t, cs, "whoami")
		close(bs.release)
		if err != nil || !strings.HasPrefix(got, "alice|") {
			t.Errorf("alice, sending bob's live reference, was answered %q, %v", got, err)
		}
		if b := <-bobDone; !strings.HasPrefix(b, "bob|") {
			t.Errorf("bob was answered %q", b)
		}
	})
}

func TestRequestContextsRefuseCallsWithoutALiveRequest(t *testing.T) {
	var rc mcpsdk.RequestContexts
	var seen string
	var during *mcp.CallToolRequest
	h := rc.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get(mcpsdk.RefHeader)
		during = &mcp.CallToolRequest{Extra: &mcp.RequestExtra{Header: r.Header.Clone()}}
		if ctx, err := rc.Context(during); err != nil || ctx != r.Context() {
			t.Errorf("during the request Context = %v, %v", ctx, err)
		}
	}))
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set(mcpsdk.RefHeader, "attacker-chosen")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if seen == "attacker-chosen" || len(seen) < 26 {
		t.Errorf("the handler saw reference %q", seen)
	}

	for _, tc := range []struct {
		name string
		req  *mcp.CallToolRequest
		want error
	}{
		{"a call without a request is refused", nil, mcpsdk.ErrNoHTTPRequest},
		{"a call over a transport without headers is refused", &mcp.CallToolRequest{}, mcpsdk.ErrNoHTTPRequest},
		{"a call without a reference is refused", &mcp.CallToolRequest{Extra: &mcp.RequestExtra{Header: http.Header{}}}, mcpsdk.ErrUnknownRequest},
		{"a client-chosen reference is refused", &mcp.CallToolRequest{Extra: &mcp.RequestExtra{Header: http.Header{mcpsdk.RefHeader: {"attacker-chosen"}}}}, mcpsdk.ErrUnknownRequest},
		{"the reference of a request that has ended is refused", during, mcpsdk.ErrUnknownRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := rc.Principal(tc.req); !errors.Is(err, tc.want) {
				t.Errorf("Principal: err = %v, want %v", err, tc.want)
			}
		})
	}

	t.Run("a request that did not pass the middleware has no principal", func(t *testing.T) {
		var err error
		rc.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _, err = rc.Principal(&mcp.CallToolRequest{Extra: &mcp.RequestExtra{Header: r.Header}})
		})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil))
		if !errors.Is(err, mcpsdk.ErrUnauthenticated) {
			t.Errorf("err = %v", err)
		}
	})
}
