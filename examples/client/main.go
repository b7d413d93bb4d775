// Command client is a minimal MCP client that authorizes itself with OAuth 2.1
// the way the MCP authorization specification describes, using the official Go
// SDK's auth.AuthorizationCodeHandler:
//
//  1. it calls the MCP server, gets 401 and discovers the authorization server
//     from the protected resource metadata (RFC 9728);
//  2. it registers, by Dynamic Client Registration (RFC 7591) or by naming a
//     Client ID Metadata Document URL (--client-metadata-url), or uses a
//     pre-registered client (--client-id);
//  3. it prints the authorization URL (PKCE S256, RFC 8707 resource) and waits
//     on a loopback redirect URI (RFC 8252 §7.3) for the browser to come back;
//  4. it calls one tool and prints the result. A 403 insufficient_scope on the
//     call triggers step-up authorization, which prints a second URL.
//
// Usage against the example stack (go run ./examples/stack):
//
//	go run ./examples/client --server http://127.0.0.1:8080/mcp --tool whoami
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// config is what the flags say.
type config struct {
	server            string        // MCP endpoint, e.g. http://127.0.0.1:8080/mcp
	tool              string        // tool to call
	args              string        // JSON object of tool arguments
	callback          string        // host:port of the loopback redirect listener
	clientMetadataURL string        // CIMD client_id URL; empty: DCR
	clientID          string        // pre-registered client id; empty: DCR
	clientSecret      string        // for a pre-registered confidential client
	timeout           time.Duration // for the whole run, browser included
}

func main() {
	var cfg config
	flag.StringVar(&cfg.server, "server", "http://127.0.0.1:8080/mcp", "URL of the MCP server's Streamable HTTP endpoint")
	flag.StringVar(&cfg.tool, "tool", "whoami", "name of the tool to call")
	flag.StringVar(&cfg.args, "args", "{}", "tool arguments as a JSON object")
	flag.StringVar(&cfg.callback, "callback", "127.0.0.1:7777", "loopback address for the OAuth redirect (port 0 picks a free one)")
	flag.StringVar(&cfg.clientMetadataURL, "client-metadata-url", "", "https URL of a Client ID Metadata Document to use as client_id (instead of dynamic registration)")
	flag.StringVar(&cfg.clientID, "client-id", "", "pre-registered client id (instead of dynamic registration)")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	cfg.clientSecret = os.Getenv("MCP_CLIENT_SECRET")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

// run connects, authorizes when asked to, calls the tool and prints the result
// to out. Authorization URLs go to out as lines starting "Open this URL".
func run(ctx context.Context, cfg config, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	var args map[string]any
	if err := json.Unmarshal([]byte(cfg.args), &args); err != nil {
		return fmt.Errorf("--args is not a JSON object: %w", err)
	}

	cb, err := newCallback(cfg.callback)
	if err != nil {
		return err
	}
	defer cb.Close()

	hcfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL: cb.redirectURI,
		AuthorizationCodeFetcher: func(ctx context.Context, a *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			fmt.Fprintf(out, "Open this URL in a browser to authorize:\n%s\n", a.URL)
			return cb.wait(ctx)
		},
		RequestRefreshToken: true,
	}
	switch {
	case cfg.clientMetadataURL != "":
		hcfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: cfg.clientMetadataURL}
	case cfg.clientID != "":
		pre := &oauthex.ClientCredentials{ClientID: cfg.clientID}
		if cfg.clientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: cfg.clientSecret}
		}
		hcfg.PreregisteredClient = pre
	default:
		hcfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName:              "mcpauth example client",
				RedirectURIs:            []string{cb.redirectURI},
				TokenEndpointAuthMethod: "none",
				GrantTypes:              []string{"authorization_code", "refresh_token"},
				ResponseTypes:           []string{"code"},
			},
		}
	}
	handler, err := auth.NewAuthorizationCodeHandler(hcfg)
	if err != nil {
		return err
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "mcpauth-example-client", Version: "0.1.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:     cfg.server,
		OAuthHandler: handler,
	}, nil)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", cfg.server, err)
	}
	defer session.Close()

	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: cfg.tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("call %s: %w", cfg.tool, err)
	}
	if res.IsError {
		return fmt.Errorf("tool %s failed: %s", cfg.tool, toolText(res))
	}
	fmt.Fprintf(out, "%s: %s\n", cfg.tool, toolText(res))
	return nil
}

// toolText joins the text contents of a tool result, or falls back to its
// structured content.
func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

// callback is the loopback redirect endpoint (RFC 8252 §7.3). Each
// authorization waits for one redirect.
type callback struct {
	redirectURI string
	srv         *http.Server
	results     chan callbackResult
}

type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

// callbackTimeout bounds every phase of a connection to the redirect
// endpoint: headers, body, response and idle keep-alive.
var callbackTimeout = 10 * time.Second

func newCallback(addr string) (*callback, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--callback %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("--callback %q: must be a loopback IP literal (RFC 8252 §8.3)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the OAuth redirect: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cb := &callback{
		redirectURI: "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/callback",
		results:     make(chan callbackResult, 1),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", cb.serve)
	// One small GET is all the browser sends; anything slower or idle is cut
	// off (net/http has no timeouts by default).
	cb.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: callbackTimeout,
		ReadTimeout:       callbackTimeout,
		WriteTimeout:      callbackTimeout,
		IdleTimeout:       callbackTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	go cb.srv.Serve(ln)
	return cb, nil
}

// serve receives the authorization response (RFC 6749 §4.1.2, RFC 9207 iss).
func (cb *callback) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var res callbackResult
	if e := q.Get("error"); e != "" {
		res.err = fmt.Errorf("authorization failed: %s %s", e, q.Get("error_description"))
	} else if q.Get("code") == "" {
		res.err = errors.New("authorization response without code")
	} else {
		res.res = &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	if res.err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<!doctype html><title>Authorization failed</title><p>%s</p>", html.EscapeString(res.err.Error()))
	} else {
		fmt.Fprint(w, "<!doctype html><title>Authorized</title><p>Authorized. You can close this window.</p>")
	}
	select {
	case cb.results <- res:
	default: // a duplicate redirect; the first one counts
	}
}

func (cb *callback) wait(ctx context.Context) (*auth.AuthorizationResult, error) {
	select {
	case r := <-cb.results:
		return r.res, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (cb *callback) Close() error { return cb.srv.Close() }
