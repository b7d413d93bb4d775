package loginui

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPagesInHeadlessChromium drives the real pages in Chromium: the
// stylesheet must load under the CSP, and the 303 after the consent POST must
// reach the client's redirect URI (a CSP form-action directive would block
// it). Screenshots go to $LOGINUI_SCREENSHOTS when set. Skipped when
// Chromium is not installed, unless CI is set.
func TestPagesInHeadlessChromium(t *testing.T) {
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
	if testing.Short() {
		t.Skip("-short")
	}
	h := newHarness(t, nil)
	callback := h.srv.URL + "/callback"

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(900, 900),
	)...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	path := authorizePath("redirect_uri", callback, "test_client_name", "Demo <App>", "scope", "mcp:tools mcp:admin")
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	type css = chromedp.CSS
	step("login page", chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+path), chromedp.WaitVisible(css(`#password`))))
	cardRadius, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('main.card')).borderTopLeftRadius`))
	step("computed style", err)
	loginShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	step("login screenshot", err)
	step("logging in", chromedp.Do(ctx,
		chromedp.SendKeys(css(`#username`), "alice"),
		chromedp.SendKeys(css(`#password`), alicePW),
		chromedp.Submit(css(`#password`)),
		chromedp.WaitVisible(css(`button[value=approve]`)),
	))
	consentText, err := chromedp.Run(ctx, chromedp.Text(css(`main`)))
	step("consent text", err)
	consentShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	step("consent screenshot", err)
	step("approving", chromedp.Do(ctx, chromedp.Click(css(`button[value=approve]`)), chromedp.WaitVisible(css(`#result`))))
	finalURL, err := chromedp.Run(ctx, chromedp.Location())
	step("location", err)
	if cardRadius != "12px" {
		t.Errorf("stylesheet not applied: card border radius %q", cardRadius)
	}
	for _, want := range []string{"Demo <App>", "mcp:admin", "Local application."} {
		if !strings.Contains(consentText, want) {
			t.Errorf("consent page text lacks %q:\n%s", want, consentText)
		}
	}
	if !strings.HasPrefix(finalURL, callback+"?") || !strings.Contains(finalURL, "code=code-for-alice") {
		t.Fatalf("browser ended at %s, want the callback with a code", finalURL)
	}
	if dir := os.Getenv("LOGINUI_SCREENSHOTS"); dir != "" {
		for name, b := range map[string][]byte{"login.png": loginShot, "consent.png": consentShot} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
}

// callbackPage stands in for the client's redirect URI in the browser test.
func callbackPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(`<!doctype html><title>Client</title><p id="result">Client received the response.</p>`))
}
