package loginui

import (
	"net/http"
	"strings"
	"testing"
)

// TestPagesAnswerOnlyTheirMethods: the stylesheet answers GET and HEAD and
// /consents also POST; any other method gets 405 with an Allow header.
func TestPagesAnswerOnlyTheirMethods(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/ui/style.css", http.StatusOK, ""},
		{http.MethodHead, "/ui/style.css", http.StatusOK, ""},
		{http.MethodPost, "/ui/style.css", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodPut, "/ui/style.css", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodGet, "/consents", http.StatusOK, ""},
		{http.MethodHead, "/consents", http.StatusOK, ""},
		{http.MethodPut, "/consents", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
		{http.MethodDelete, "/consents", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
	} {
		req, err := http.NewRequest(tc.method, h.srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := h.browser().do(req)
		if p.StatusCode != tc.status || p.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: status %d Allow %q, want %d Allow %q", tc.method, tc.path, p.StatusCode, p.Header.Get("Allow"), tc.status, tc.allow)
		}
		if tc.status == http.StatusOK && tc.path == "/ui/style.css" && !strings.HasPrefix(p.Header.Get("Content-Type"), "text/css") {
			t.Errorf("%s %s: Content-Type %q, want the stylesheet", tc.method, tc.path, p.Header.Get("Content-Type"))
		}
	}
}

// TestPathsWithAndWithoutTheBasePath: a path is served with the BasePath in
// front or without it; a path that only begins with the BasePath's letters
// ("/logout" under "/log") is not cut. Fails if that prefix is cut anyway.
func TestPathsWithAndWithoutTheBasePath(t *testing.T) {
	for _, tc := range []struct {
		base, path, want string
	}{
		{"/log", "/logout", "You are not signed in."},
		{"/log", "/log/logout", "You are not signed in."},
		{"/u", "/ui/style.css", "text/css"},
		{"/u", "/u/ui/style.css", "text/css"},
		{"/auth", "/authlogout", "There is no such page."},
	} {
		h := newHarness(t, func(c *Config) { c.BasePath = tc.base })
		p := h.browser().get(tc.path)
		got := p.Body
		if tc.want == "text/css" {
			got = p.Header.Get("Content-Type")
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("BasePath %s, GET %s: status %d, want %q in:\n%s", tc.base, tc.path, p.StatusCode, tc.want, got)
		}
	}
}
