package loginui

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden pages in testdata/")

// tokenRE matches the per-request values (CSRF and flow tokens, dates) that
// are scrubbed before comparison.
var (
	tokenRE = regexp.MustCompile(`name="(csrf|flow|txn|session_id)" value="[^"]*"`)
	dateRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}`)
	timeRE  = regexp.MustCompile(`\d{2}:\d{2} UTC`)
)

// TestGoldenPages pins the HTML that goes on the wire, so changes to the
// pages are reviewed. Run with -update to accept a change.
func TestGoldenPages(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	pages := map[string]page{}
	pages["login.html"] = b.get(authorizePath("test_client_name", "Demo <App>", "redirect_uri", "http://127.0.0.1:7777/callback"))
	pages["consent.html"] = b.login(authorizePath("test_client_name", "Demo <App>", "redirect_uri", "http://127.0.0.1:7777/callback", "test_cimd_host", "cimd.example", "scope", "mcp:tools mcp:admin"), "alice", alicePW)
	b.submit(pages["consent.html"].form(t, "action", "approve")).redirectedTo(t)
	pages["continue.html"] = b.get(authorizePath("test_client_name", "Demo <App>", "redirect_uri", "http://127.0.0.1:7777/callback", "test_cimd_host", "cimd.example", "scope", "mcp:tools mcp:admin", "test_confirm", "1"))
	pages["consents.html"] = b.get("/consents")
	pages["logout.html"] = b.get("/logout")
	pages["error.html"] = b.get("/authorize?redirect_uri=%3A")
	for name, p := range pages {
		t.Run(name+" matches its golden file", func(t *testing.T) {
			if p.StatusCode >= 500 {
				t.Fatalf("status %d", p.StatusCode)
			}
			got := tokenRE.ReplaceAllString(p.Body, `name="$1" value="TOKEN"`)
			got = dateRE.ReplaceAllString(got, time.DateOnly)
			got = timeRE.ReplaceAllString(got, "15:04 UTC")
			path := filepath.Join("testdata", name)
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGoldenPages -update)", err)
			}
			if got != string(want) {
				t.Fatalf("%s differs from the golden file (run with -update to accept):\n%s", name, got)
			}
		})
	}
}
