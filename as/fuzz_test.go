package as

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzTokenRequest throws arbitrary bodies, content types and credentials at
// /token, /introspect and /revoke: the answer is always a JSON OAuth error or
// success, never a 5xx.
func FuzzTokenRequest(f *testing.F) {
	f.Add("grant_type=client_credentials&resource=http%3A%2F%2F127.0.0.1%3A8080%2Fmcp", "application/x-www-form-urlencoded", "ci-bot", ciSecret)
	f.Add("grant_type=authorization_code&code=abc&code_verifier=xyz&client_id=demo-app", "application/x-www-form-urlencoded", "", "")
	f.Add("grant_type=refresh_token&refresh_token=a.b&client_id=demo-app", "application/x-www-form-urlencoded", "", "")
	f.Add("grant_type=client_credentials&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=e30.e30.e30", "application/x-www-form-urlencoded", "", "")
	f.Add("--x\r\nContent-Disposition: form-data; name=\"grant_type\"\r\n\r\nclient_credentials\r\n--x--\r\n", "multipart/form-data; boundary=x", "ci-bot", ciSecret)
	f.Add("%zz=1&grant_type=", "application/x-www-form-urlencoded", "%zz", "")
	f.Add("token=abc.def.ghi&token_type_hint=refresh_token", "application/x-www-form-urlencoded", "rs", rsSecret)
	h := newHarness(f, nil)
	handler := h.as.Handler()
	f.Fuzz(func(t *testing.T, body, ctype, user, pass string) {
		for _, path := range []string{"/token", "/introspect", "/revoke"} {
			req := httptest.NewRequest(http.MethodPost, h.issuer+path, strings.NewReader(body))
			req.Header.Set("Content-Type", ctype)
			if user != "" {
				req.SetBasicAuth(user, pass)
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s: status %d body %s", path, rec.Code, rec.Body)
			}
			if rec.Header().Get("Cache-Control") != "no-store" {
				t.Fatalf("%s: Cache-Control %q", path, rec.Header().Get("Cache-Control"))
			}
		}
	})
}

// FuzzAuthorizeRequest throws arbitrary query strings at /authorize: the
// answer is a redirect to a registered URI, a login page or an error page,
// never a 5xx and never a redirect elsewhere.
func FuzzAuthorizeRequest(f *testing.F) {
	f.Add("response_type=code&client_id=demo-app&redirect_uri=https%3A%2F%2Fapp.example%2Fcallback&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256")
	f.Add("response_type=code&client_id=demo-app&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&resource=http%3A%2F%2F127.0.0.1%3A8080%2Fmcp%2F..%2Fx")
	f.Add("client_id=demo-app&client_id=web-app")
	f.Add("response_type=code&client_id=demo-app&request_uri=urn%3Ax&scope=openid")
	f.Add("%gg&;;&&=")
	h := newHarness(f, nil)
	handler := h.as.Handler()
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest(http.MethodGet, h.issuer+"/authorize", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d body %s", rec.Code, rec.Body)
		}
		if loc := rec.Header().Get("Location"); loc != "" {
			u, err := url.Parse(loc)
			if err != nil {
				t.Fatalf("bad Location %q", loc)
			}
			if u.Host != "app.example" && u.Hostname() != "127.0.0.1" && u.Host != "localhost:7777" {
				t.Fatalf("redirected to %s", loc)
			}
			if u.Query().Get("iss") != h.issuer {
				t.Fatalf("redirect without iss: %s", loc)
			}
		}
	})
}
