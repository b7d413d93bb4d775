package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// chromiumPath finds Debian's chromium (installed by .ci/run) or another
// Chrome build.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactsDir is where screenshots go: $ARTIFACTS_DIR, or
// e2e/testdata/artifacts (ignored by git).
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// loopbackCallback is a real redirect endpoint (RFC 8252 §7.3) for the
// browser to land on.
type loopbackCallback struct {
	URI     string
	results chan *auth.AuthorizationResult
}

func newLoopbackCallback(t *testing.T) *loopbackCallback {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cb := &loopbackCallback{URI: "http://" + ln.Addr().String() + "/callback", results: make(chan *auth.AuthorizationResult, 4)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if e := q.Get("error"); e != "" {
			fmt.Fprintf(w, "<!doctype html><title>Failed</title><p id=result>failed</p>")
		} else {
			fmt.Fprintf(w, "<!doctype html><title>Authorized</title><p id=result>authorized</p>")
		}
		cb.results <- &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return cb
}

// TestLoginAndConsentInHeadlessChromium runs the authorization in a real
// browser: chromium renders the AS's login and consent pages, a person's
// actions are typed and clicked through the DevTools protocol, screenshots of
// both pages are saved, and the browser's redirect reaches a real loopback
// callback.
func TestLoginAndConsentInHeadlessChromium(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		requireCI(t, "chromium is not installed (apt-get install -y chromium)")
	}
	s := startStack(t, stackOptions{})
	cb := newLoopbackCallback(t)
	artifacts := artifactsDir(t)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox, // running as root in a container
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1024, 900),
	)...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting chromium %s: %v", chromium, err)
	}

	const clientName = "mcpauth e2e browser client"
	var loginShot, consentShot []byte
	var loginText, consentText, consentTitle string
	fetch := func(ctx context.Context, a *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		bctx, cancel := context.WithTimeout(browser, 60*time.Second)
		defer cancel()
		password := chromedp.CSS(`input[type=password]`)
		err := chromedp.Do(bctx, chromedp.Navigate(a.URL), chromedp.WaitVisible(password))
		if err != nil {
			return nil, fmt.Errorf("browser: login page: %w", err)
		}
		if loginText, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`))); err != nil {
			return nil, err
		}
		if loginShot, err = chromedp.Run(bctx, chromedp.FullScreenshot(100)); err != nil {
			return nil, err
		}
		err = chromedp.Do(bctx,
			chromedp.SendKeys(chromedp.CSS(`form input:not([type=hidden]):not([type=password]):not([type=submit]):not([type=checkbox])`), demoUser),
			chromedp.SendKeys(password, demoPassword),
			chromedp.Submit(password),
			chromedp.WaitNotPresent(password),
		)
		if err != nil {
			return nil, fmt.Errorf("browser: logging in: %w", err)
		}
		// Mark the approve button; DevTools evaluation is not subject to
		// the page's script CSP.
		_, err = chromedp.Run(bctx, chromedp.Poll[bool](`(() => {
			const b = [...document.querySelectorAll('button, input[type=submit]')]
				.find(e => /approve|allow|accept|authori[sz]e/i.test(e.textContent + ' ' + (e.value || '') + ' ' + (e.name || '')));
			if (!b) return false;
			b.setAttribute('data-e2e', 'approve');
			return true;
		})()`, chromedp.WithPollingTimeout(20*time.Second)))
		if err != nil {
			body, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`)))
			return nil, fmt.Errorf("browser: no approve button on the page after login: %w\n%s", err, body)
		}
		if consentTitle, err = chromedp.Run(bctx, chromedp.Title()); err != nil {
			return nil, err
		}
		if consentText, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`))); err != nil {
			return nil, err
		}
		if consentShot, err = chromedp.Run(bctx, chromedp.FullScreenshot(100)); err != nil {
			return nil, err
		}
		if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`[data-e2e=approve]`)), chromedp.WaitVisible(chromedp.CSS(`#result`))); err != nil {
			return nil, fmt.Errorf("browser: approving: %w", err)
		}
		select {
		case r := <-cb.results:
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return nil, errors.New("the browser never reached the callback")
		}
	}

	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              cb.URI,
		AuthorizationCodeFetcher: fetch,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName:              clientName,
				RedirectURIs:            []string{cb.URI},
				TokenEndpointAuthMethod: "none",
				GrantTypes:              []string{"authorization_code", "refresh_token"},
				ResponseTypes:           []string{"code"},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "mcpauth-e2e-browser", Version: "0.0.1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.MCPURL, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("connect through the browser login: %v", err)
	}
	defer session.Close()

	for name, shot := range map[string][]byte{"login.png": loginShot, "consent.png": consentShot} {
		if len(shot) < 1000 || string(shot[1:4]) != "PNG" {
			t.Errorf("%s: not a PNG screenshot (%d bytes)", name, len(shot))
			continue
		}
		p := filepath.Join(artifacts, "chromium-"+name)
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}

	t.Run("the consent page names the client, its redirect host, the scopes and the resource", func(t *testing.T) {
		for _, want := range []string{clientName, "127.0.0.1", "mcp:tools"} {
			if !strings.Contains(consentText, want) {
				t.Errorf("consent page does not show %q; it shows:\n%s", want, consentText)
			}
		}
		if !strings.Contains(consentText, s.MCPURL) && !strings.Contains(consentText, "Example MCP server") {
			t.Errorf("consent page shows neither the resource %s nor its name:\n%s", s.MCPURL, consentText)
		}
		if consentTitle == "" {
			t.Errorf("consent page has no title")
		}
	})
	t.Run("the login page does not show a password", func(t *testing.T) {
		if strings.Contains(loginText, demoPassword) {
			t.Errorf("the login page text contains the password")
		}
	})
	t.Run("the token obtained through the browser works", func(t *testing.T) {
		me := callTool[whoami](t, ctx, session, "whoami")
		if me.Subject == "" || me.ClientID == "" {
			t.Errorf("whoami = %+v", me)
		}
	})
}
