package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/mcpauth/mcpauth/internal/testop"
)

// browser starts headless Chromium for a test; skipped when it is not
// installed, unless CI is set.
func browser(t *testing.T) context.Context {
	t.Helper()
	chromium := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed")
		}
		t.Skip("chromium is not installed")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900),
	)...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// shot saves a full-page screenshot of the browser's page as name.png.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// step runs browser actions with a bound on their time.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("browser: %s: %v (at %s)\n%s", what, err, loc, body)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return s
}

// signInWithPassword signs in at the console through the server's login
// page (and its consent page, the first time).
func signInWithPassword(t *testing.T, ctx context.Context, consoleURL, user, pw, dir string) {
	t.Helper()
	type css = chromedp.CSS
	step(t, ctx, "console sign-in page", chromedp.Navigate(consoleURL+"/"), chromedp.WaitVisible(css(`#signin`)))
	if dir != "" {
		shot(t, ctx, dir, "00-signin")
	}
	step(t, ctx, "server's login page", chromedp.Click(css(`#signin`)), chromedp.WaitVisible(css(`#password`)))
	step(t, ctx, "logging in",
		chromedp.SendKeys(css(`#username`), user),
		chromedp.SendKeys(css(`#password`), pw),
		chromedp.Submit(css(`#password`)),
		chromedp.WaitNotPresent(css(`#password`)),
		chromedp.WaitReady(css(`main h1`)),
	)
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('button[value=approve]')`)); ok {
		if dir != "" {
			shot(t, ctx, dir, "01-consent")
		}
		step(t, ctx, "approving", chromedp.Click(chromedp.CSS(`button[value=approve]`)), chromedp.WaitNotPresent(chromedp.CSS(`button[value=approve]`)))
	}
}

// An operator signs in with a password in Chromium, sees every page (each
// screenshot), finds the agent's grant and revokes it with the
// confirmation step; the agent's next refresh fails. She revokes a
// person's approval of a held tool call and connected account the same
// way. A person not in admin.people gets the server's "not permitted"
// page and no console.
func TestConsoleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	ctx := browser(t)
	issuer, consoleURL, _, h := startConsoleWithHeld(t, "")
	agent, tok := agentGrant(t, issuer)
	dir := artifactDir(t)
	type css = chromedp.CSS

	signInWithPassword(t, ctx, consoleURL, "alice", alicePW, dir)
	step(t, ctx, "overview", chromedp.WaitVisible(css(`nav.top`)))
	if h := text(t, ctx, `h1`); h != "Overview" {
		t.Fatalf("after sign-in: %q", h)
	}
	for i, pu := range consolePages(consoleURL, "alice", "demo-app") {
		step(t, ctx, "page "+pu, chromedp.Navigate(pu), chromedp.WaitVisible(css(`#title`)))
		name := strings.Trim(strings.NewReplacer("/", "-", "?", "-", "=", "-", "&", "-").Replace(strings.TrimPrefix(pu, consoleURL)), "-")
		if name == "" {
			name = "overview"
		}
		shot(t, ctx, dir, "1"+string(rune('a'+i))+"-"+name)
	}

	// alice's approval and connection: listed without the call's
	// arguments or any token, revoked after a confirmation.
	for _, tc := range []struct{ path, button, row, done string }{
		{"/approvals", `button.revoke-approval`, "send_email", "Revoked approval " + h.approval + "."},
		{"/connections", `button.revoke-connection`, "github", "Revoked 1 connection(s) of alice."},
	} {
		name := strings.Trim(tc.path, "/")
		step(t, ctx, name, chromedp.Navigate(consoleURL+tc.path), chromedp.WaitVisible(css(`#`+name+` tbody tr`)))
		body := text(t, ctx, `body`)
		if row := text(t, ctx, `#`+name+` tbody tr`); !strings.Contains(row, "alice") || !strings.Contains(row, tc.row) {
			t.Fatalf("%s: the row %q", name, row)
		}
		for _, secret := range append([]string{argumentValue}, h.connTokens...) {
			if strings.Contains(body, secret) {
				t.Fatalf("%s shows an argument value or a token", name)
			}
		}
		step(t, ctx, "revoking from "+name, chromedp.Click(css(tc.button)), chromedp.WaitVisible(css(`#confirm`)))
		shot(t, ctx, dir, "24-"+name+"-confirm")
		step(t, ctx, "confirming on "+name, chromedp.Click(css(`#confirm`)), chromedp.WaitVisible(css(`#detail`)))
		if d := text(t, ctx, `#detail`); d != tc.done {
			t.Fatalf("after confirming on %s: %q", name, d)
		}
		step(t, ctx, name+" again", chromedp.Navigate(consoleURL+tc.path), chromedp.WaitVisible(css(`#`+name+` tbody tr`)))
		shot(t, ctx, dir, "25-"+name+"-after")
		if row := text(t, ctx, `#`+name+` tbody tr`); !strings.HasPrefix(row, "No ") {
			t.Fatalf("%s after the revocation: %q", name, row)
		}
	}
	if _, err := h.store.GetApproval(context.Background(), h.approval); err == nil {
		t.Fatal("the approval is still stored")
	}
	if cs, err := h.store.ListConnections(context.Background(), "alice"); err != nil || len(cs) != 0 {
		t.Fatalf("the connection is still stored: %v %v", cs, err)
	}

	// Another site cannot frame the console, even for a signed-in person.
	framer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>framer</title><iframe id="f" src="%s/" width="800" height="600"></iframe>`, consoleURL)
	}))
	defer framer.Close()
	step(t, ctx, "a framing page", chromedp.Navigate(framer.URL), chromedp.WaitReady(css(`#f`)))
	var child *cdp.Frame
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && (child == nil || child.URL == "about:blank"); time.Sleep(200 * time.Millisecond) {
		tree, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (*page.GetFrameTreeResult, error) {
			r, err := cdp.Call(ctx, tg, page.GetFrameTree, cdp.Empty{})
			return &r, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(tree.FrameTree.ChildFrames) == 1 {
			child = tree.FrameTree.ChildFrames[0].Frame
		}
	}
	shot(t, ctx, dir, "23-framed")
	if child == nil || strings.HasPrefix(child.URL, consoleURL) && child.UnreachableURL == "" {
		t.Fatalf("the console loaded in another site's frame: %+v", child)
	}

	// The agent: demo-app's grant, found by client and revoked.
	step(t, ctx, "grants of demo-app", chromedp.Navigate(consoleURL+"/grants?client=demo-app"), chromedp.WaitVisible(css(`table.grants`)))
	step(t, ctx, "selecting the grant", chromedp.Click(css(`table.grants input[type=checkbox]`)), chromedp.Click(css(`#revoke-selected`)), chromedp.WaitVisible(css(`#confirm`)))
	shot(t, ctx, dir, "20-confirm")
	if _, err := refresh(agent, tok); err != nil {
		t.Fatalf("refresh before confirming: %v", err)
	}
	step(t, ctx, "confirming", chromedp.Click(css(`#confirm`)), chromedp.WaitVisible(css(`#detail`)))
	shot(t, ctx, dir, "21-revoked")
	if d := text(t, ctx, `#detail`); d != "Revoked 1 grant(s)." {
		t.Fatalf("after confirming: %q", d)
	}
	if _, err := refresh(agent, tok); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("the agent refreshed after the revocation: %v", err)
	}

	// The charts: the tokens issued today reach the hourly counts (added
	// to storage every 10 s) and are drawn as bars.
	var caption string
	for deadline := time.Now().Add(25 * time.Second); ; time.Sleep(time.Second) {
		step(t, ctx, "overview", chromedp.Navigate(consoleURL+"/"), chromedp.WaitVisible(css(`.charts`)))
		caption = text(t, ctx, `.charts figure figcaption`)
		if !strings.Contains(caption, "(0 in 24 h") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(caption, "Tokens issued") || strings.Contains(caption, "(0 in 24 h") {
		t.Fatalf("the tokens issued are not charted: %q", caption)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('.charts figure:first-child rect')].filter(r => r.getBBox().height > 0).length`)); n < 1 {
		t.Fatalf("no bar drawn for the tokens issued")
	}
	shot(t, ctx, dir, "22-overview-charts")

	// bob, in a browser of his own: the server's refusal, no console.
	bob := browser(t)
	step(t, bob, "bob's sign-in", chromedp.Navigate(consoleURL+"/"), chromedp.WaitVisible(css(`#signin`)), chromedp.Click(css(`#signin`)), chromedp.WaitVisible(css(`#password`)),
		chromedp.SendKeys(css(`#username`), "bob"), chromedp.SendKeys(css(`#password`), bobPW), chromedp.Submit(css(`#password`)), chromedp.WaitNotPresent(css(`#password`)))
	shot(t, bob, dir, "30-not-permitted")
	if h := text(t, bob, `h1`); h != "Access not permitted" {
		t.Fatalf("bob: %q", h)
	}
	step(t, bob, "bob follows the link back", chromedp.Click(css(`main a`)), chromedp.WaitVisible(css(`#signin`)))
	shot(t, bob, dir, "31-refused")
	if h := text(t, bob, `h1`); h != "Not signed in" {
		t.Fatalf("bob back at the console: %q", h)
	}
	step(t, bob, "bob's console", chromedp.Navigate(consoleURL+"/"), chromedp.WaitVisible(css(`#signin`)))
	if ok, _ := chromedp.Run(bob, chromedp.Evaluate[bool](`!!document.querySelector('nav.top')`)); ok {
		t.Fatal("bob sees the console")
	}
}

// A security engineer signs in through the company's OpenID provider (a
// member of the group admin.groups names), finds the agent that should
// not have access, revokes it, and sees the revocation in the audit list,
// all in the browser. The agent's next refresh fails. A colleague outside
// the group gets the server's "not permitted" page.
func TestSecurityEngineerRevokesAnAgentInTheConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	ctx := browser(t)
	op := testop.Start(t, []testop.Person{
		{ID: "u-sec", Username: "sam", Password: "sam-pw", Email: "sam@acme.example", EmailVerified: true, Name: "Sam Security", Groups: []string{"staff", "security"}},
		{ID: "u-dev", Username: "dana", Password: "dana-pw", Email: "dana@acme.example", EmailVerified: true, Name: "Dana", Groups: []string{"staff"}},
	}, testop.Client{ID: "mcpauth", Secret: "op-secret", ClaimsInIDToken: true})
	dir := t.TempDir()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	issuer := "http://" + addr
	op.SetRedirectURIs("mcpauth", issuer+"/upstream/corp/callback")
	cfg := consoleConfig(t, issuer, addr, adminAddr, "sqlite:"+filepath.Join(dir, "a.db"))
	cfg = strings.Replace(cfg, "  people: [alice]\n", "  people: [alice]\n  groups: [security]\n", 1)
	cfg += `upstreams:
  - id: corp
    name: Acme SSO
    issuer: ` + op.Issuer + `
    client_id: mcpauth
    client_secret: op-secret
    scopes: [openid, email, profile, groups]
`
	start(t, dir, issuer, testEnv, "--config", writeConfig(t, dir, cfg))
	consoleURL := "http://" + adminAddr + "/console"
	agent, tok := agentGrant(t, issuer)
	shots := artifactDir(t)
	type css = chromedp.CSS

	signInUpstream := func(ctx context.Context, user, pw string) {
		t.Helper()
		step(t, ctx, "console sign-in", chromedp.Navigate(consoleURL+"/"), chromedp.WaitVisible(css(`#signin`)), chromedp.Click(css(`#signin`)),
			chromedp.WaitVisible(css(`form.upstream button`)))
		// The provider's login page has a hidden "id" field; ours has none.
		step(t, ctx, "the company's provider", chromedp.Click(css(`form.upstream button`)), chromedp.WaitReady(css(`input[name=id]`)), chromedp.WaitVisible(css(`#username`)))
		step(t, ctx, "signing in at the provider",
			chromedp.SendKeys(css(`#username`), user), chromedp.SendKeys(css(`#password`), pw),
			chromedp.Submit(css(`#password`)), chromedp.WaitNotPresent(css(`#password`)), chromedp.WaitReady(css(`main h1`)))
		if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('button[value=approve]')`)); ok {
			step(t, ctx, "approving the console", chromedp.Click(css(`button[value=approve]`)), chromedp.WaitNotPresent(css(`button[value=approve]`)))
		}
	}

	signInUpstream(ctx, "sam", "sam-pw")
	step(t, ctx, "overview", chromedp.WaitVisible(css(`nav.top`)))
	if who := text(t, ctx, `nav.top .who`); who != "corp:u-sec" {
		t.Fatalf("signed in as %q", who)
	}
	shot(t, ctx, shots, "40-engineer-overview")

	// Find the agent: search the clients, open it, select its grant.
	step(t, ctx, "clients", chromedp.Click(css(`nav.top a[href="/console/clients"]`)), chromedp.WaitVisible(css(`#q`)))
	// The list before the search shows the agent too: mark that page, and
	// wait for the agent on the search's own page, not the marked one (a
	// screenshot taken while the page is replaced never returns).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.dataset.before = "search"; true`)); err != nil {
		t.Fatalf("browser: marking the list: %v", err)
	}
	step(t, ctx, "search", chromedp.SendKeys(css(`#q`), "demo"), chromedp.Submit(css(`#q`)),
		chromedp.WaitVisible(css(`body:not([data-before]) #clients a[href*="demo-app"]`)))
	shot(t, ctx, shots, "41-engineer-search")
	step(t, ctx, "the agent", chromedp.Click(css(`#clients a[href*="demo-app"]`)), chromedp.WaitVisible(css(`table.grants`)))
	shot(t, ctx, shots, "42-engineer-agent")
	step(t, ctx, "revoke", chromedp.Click(css(`table.grants input[type=checkbox]`)), chromedp.Click(css(`#revoke-selected`)), chromedp.WaitVisible(css(`#confirm`)))
	step(t, ctx, "confirm", chromedp.Click(css(`#confirm`)), chromedp.WaitVisible(css(`#detail`)))
	if d := text(t, ctx, `#detail`); d != "Revoked 1 grant(s)." {
		t.Fatalf("after confirming: %q", d)
	}
	if _, err := refresh(agent, tok); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("the agent refreshed after the revocation: %v", err)
	}

	// The audit list shows it, by the engineer.
	var row string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		step(t, ctx, "audit", chromedp.Navigate(consoleURL+"/audit?event=admin.&client=demo-app"), chromedp.WaitVisible(css(`#audit`)))
		row = text(t, ctx, `#audit tbody tr`)
		if strings.Contains(row, "admin.grants.revoked") || time.Now().After(deadline) {
			break
		}
	}
	shot(t, ctx, shots, "43-engineer-audit")
	for _, want := range []string{"admin.grants.revoked", "alice", "demo-app", "corp:u-sec"} {
		if !strings.Contains(row, want) {
			t.Fatalf("the audit list's newest row %q lacks %q", row, want)
		}
	}

	// Dana, outside the group: the refusal, no console.
	dana := browser(t)
	step(t, dana, "dana's sign-in", chromedp.Navigate(consoleURL+"/"), chromedp.WaitVisible(css(`#signin`)), chromedp.Click(css(`#signin`)),
		chromedp.WaitVisible(css(`form.upstream button`)), chromedp.Click(css(`form.upstream button`)), chromedp.WaitReady(css(`input[name=id]`)), chromedp.WaitVisible(css(`#username`)),
		chromedp.SendKeys(css(`#username`), "dana"), chromedp.SendKeys(css(`#password`), "dana-pw"), chromedp.Submit(css(`#password`)),
		chromedp.WaitNotPresent(css(`#password`)), chromedp.WaitVisible(css(`h1`)))
	shot(t, dana, shots, "44-colleague-refused")
	if h := text(t, dana, `h1`); h != "Access not permitted" {
		t.Fatalf("dana: %q", h)
	}
}
