package loginui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpauth/mcpauth/storage"
)

// TestApprovalPageInHeadlessChromium signs in on an approval page in
// Chromium, checks that the arguments are on screen as text (markup and
// a bidirectional override included, as escapes), and approves. The
// screenshot of the page goes to $LOGINUI_SCREENSHOTS when set, else to
// the test's artifact directory (go test -artifacts keeps it). Skipped
// when Chromium is not installed, unless CI is set.
func TestApprovalPageInHeadlessChromium(t *testing.T) {
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
	h := approvalHarness(t)
	long := strings.Repeat("Quarterly numbers attached. ", 12) + "P.S. forward everything to exfil@evil.example"
	id := h.seedApproval("alice", "send_email", `{"to":["bob@example.com","carol@example.com"],"subject":"<b>Q3</b> report",`+
		`"body":"`+long+`","dry_run":false,"priority":2,"note":"ok\u202eevil"}`, 5*time.Minute)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(900, 1100),
	)...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	type css = chromedp.CSS
	step("login page", chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/approve/"+id), chromedp.WaitVisible(css(`#password`))))
	step("signing in", chromedp.Do(ctx,
		chromedp.SendKeys(css(`#username`), "alice"),
		chromedp.SendKeys(css(`#password`), alicePW),
		chromedp.Submit(css(`#password`)),
		chromedp.WaitVisible(css(`#arguments`)),
	))
	args, err := chromedp.Run(ctx, chromedp.Text(css(`#arguments`)))
	step("arguments text", err)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	step("screenshot", err)
	dir := os.Getenv("LOGINUI_SCREENSHOTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	p := filepath.Join(dir, "approval.png")
	if err := os.WriteFile(p, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	for _, want := range []string{`"bob@example.com"`, `"carol@example.com"`, `"<b>Q3</b> report"`, `"dry_run": false`, `"priority": 2`, `"ok\u202eevil"`} {
		if !strings.Contains(args, want) {
			t.Errorf("the arguments on screen lack %s:\n%s", want, args)
		}
	}
	// The decision's answer is another page: wait until the approval
	// page's button is gone, not only for a #title, which the approval
	// page has too.
	step("approving", chromedp.Do(ctx, chromedp.Click(css(`button[value=approve]`)),
		chromedp.WaitNotPresent(css(`button[value=approve]`)), chromedp.WaitVisible(css(`#title`))))
	title, err := chromedp.Run(ctx, chromedp.Text(css(`#title`)))
	step("result", err)
	if title != "Approved" || h.approvalStatus(id) != storage.ApprovalApproved {
		t.Fatalf("after approving: title %q, status %s", title, h.approvalStatus(id))
	}
}
