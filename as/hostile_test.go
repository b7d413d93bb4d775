package as

import (
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/storage"
)

// hostileCase is one malformed, oversized, replayed or hostile request and
// the answer RFC 6749/7009/7662/8707 (or plain HTTP) gives it.
type hostileCase struct {
	name   string
	method string
	path   string // with query
	header map[string]string
	body   string
	status int
	// code is the OAuth error expected in the JSON body, or in the
	// Location of a redirect (with iss), or "" when only the status counts.
	code string
	// inactive: the body must be exactly the RFC 7662 §2.2 inactive answer.
	inactive bool
	// says is text the body must contain (the page or message of the check
	// that refused the request).
	says string
}

// hostileRequests are the cases per endpoint family. h is a running AS;
// tokens it issued are used for the replay and cross-use cases.
func hostileRequests(t *testing.T, h *harness) []hostileCase {
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	basic := func(user, pass string) map[string]string {
		r, _ := http.NewRequest("GET", "/", nil)
		r.SetBasicAuth(user, pass)
		return map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": r.Header.Get("Authorization")}
	}
	bearer := func(tok string) map[string]string {
		return map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": "Bearer " + tok}
	}
	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
	authz := func(mod func(url.Values)) string {
		v := url.Values{"response_type": {"code"}, "client_id": {"demo-app"}, "redirect_uri": {appRedirect},
			"state": {"s-12345678"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
		mod(v)
		return "/authorize?" + v.Encode()
	}

	// Tokens of this AS for replay and cross-use.
	_, cc := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	ccToken, _ := cc["access_token"].(string)
	if ccToken == "" {
		t.Fatalf("setup: client credentials failed: %v", cc)
	}
	code, verifier := h.authorizeCode()
	codeForm := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}
	if resp, body := h.post("/token", codeForm, "", ""); resp.StatusCode != 200 {
		t.Fatalf("setup: code redemption: %d %v", resp.StatusCode, body)
	}

	// private_key_jwt assertions with key-location headers we must never
	// follow: jku and x5u pointing at an attacker's server, and an embedded
	// jwk of the attacker's own key, all claiming our client's kid.
	attacker, err := ecdsaKey()
	if err != nil {
		t.Fatal(err)
	}
	attackerJWKS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fetchedAttacker.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: attacker.Public(), KeyID: "k1", Algorithm: "ES256"}}})
	}))
	t.Cleanup(attackerJWKS.Close)
	assertion := func(opts *jose.SignerOptions) string {
		return signAssertion(t, attacker, opts, "jwt-bot", h.issuer)
	}
	jkuAssertion := assertion((&jose.SignerOptions{}).WithHeader("kid", "k1").WithHeader("jku", attackerJWKS.URL))
	x5uAssertion := assertion((&jose.SignerOptions{}).WithHeader("kid", "k1").WithHeader("x5u", attackerJWKS.URL))
	jwkAssertion := assertion((&jose.SignerOptions{EmbedJWK: true}).WithHeader("kid", "k1"))
	noneAssertion := unsignedJWT(map[string]any{"alg": "none", "kid": "k1"}, map[string]any{
		"iss": "jwt-bot", "sub": "jwt-bot", "aud": h.issuer, "jti": "none-1", "exp": time.Now().Add(time.Minute).Unix(),
	})
	ccAssertion := func(a string) string {
		return url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}.Encode()
	}
	nulBody := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	huge := strings.Repeat("a", 70<<10)

	return []hostileCase{
		// /authorize: never redirect before the client and redirect URI are
		// known good; afterwards errors go to the client with iss.
		{name: "authorize: a NUL byte in client_id shows a page", method: "GET", path: authz(func(v url.Values) { v.Set("client_id", "demo\x00app") }), status: 400},
		{name: "authorize: invalid UTF-8 in client_id shows a page", method: "GET", path: authz(func(v url.Values) { v.Set("client_id", "demo\xffapp") }), status: 400},
		{name: "authorize: an https client_id with a NUL byte shows a page", method: "GET", path: authz(func(v url.Values) { v.Set("client_id", "https://a.example/c\x00") }), status: 400},
		{name: "authorize: a huge client_id shows a page", method: "GET", path: authz(func(v url.Values) { v.Set("client_id", strings.Repeat("c", 8000)) }), status: 400},
		{name: "authorize: a NUL byte in redirect_uri shows a page", method: "GET", path: authz(func(v url.Values) { v.Set("redirect_uri", appRedirect+"\x00") }), status: 400},
		{name: "authorize: a repeated redirect_uri shows a page", method: "GET", path: authz(func(v url.Values) { v.Add("redirect_uri", "https://evil.example/cb") }), status: 400},
		{name: "authorize: a NUL byte in the resource is invalid_target", method: "GET", path: authz(func(v url.Values) { v.Set("resource", mcpURI+"\x00") }), status: 303, code: "invalid_target"},
		{name: "authorize: invalid UTF-8 in the resource is invalid_target", method: "GET", path: authz(func(v url.Values) { v.Set("resource", mcpURI+"\xff") }), status: 303, code: "invalid_target"},
		{name: "authorize: a non-base64url code_challenge is invalid_request", method: "GET", path: authz(func(v url.Values) { v.Set("code_challenge", strings.Repeat("\xff", 43)) }), status: 303, code: "invalid_request"},
		{name: "authorize: a repeated code_challenge is invalid_request", method: "GET", path: authz(func(v url.Values) { v.Add("code_challenge", challenge) }), status: 303, code: "invalid_request"},
		{name: "authorize: a bad query escape shows a page", method: "GET", path: "/authorize?client_id=%zz&response_type=code", status: 400},
		{name: "authorize: a consent POST without a transaction is refused", method: "POST", path: "/authorize/consent", header: form, body: "mcpauth_step=consent&action=approve&csrf=x", status: 403, says: "This form has expired or was already used."},
		{name: "authorize: a consent GET is not allowed", method: "GET", path: "/authorize/consent?mcpauth_step=consent&action=approve", status: 405},
		{name: "authorize: a login POST with a garbage transaction is refused", method: "POST", path: "/authorize/login", header: form, body: "mcpauth_step=login&username=alice&password=x&csrf=x&txn=%00%ff", status: 403},
		{name: "authorize: a return without a transaction shows a page", method: "GET", path: "/authorize/continue", status: 400, says: "Please start again from the application."},
		{name: "authorize: a return with a garbage transaction shows a page", method: "GET", path: "/authorize/continue?txn=AAAA", status: 400},
		{name: "authorize: a return with two transactions shows a page", method: "GET", path: "/authorize/continue?txn=AAAA&txn=BBBB", status: 400},
		{name: "authorize: a HEAD of the return is not allowed", method: "HEAD", path: "/authorize/continue?txn=AAAA", status: 405},
		{name: "authorize: a negative max_age is invalid_request", method: "GET", path: authz(func(v url.Values) { v.Set("max_age", "-1") }), status: 303, code: "invalid_request"},
		{name: "authorize: a max_age that is no number is invalid_request", method: "GET", path: authz(func(v url.Values) { v.Set("max_age", "1e3") }), status: 303, code: "invalid_request"},
		{name: "authorize: a repeated max_age is invalid_request", method: "GET", path: authz(func(v url.Values) { v.Set("max_age", "10"); v.Add("max_age", "20") }), status: 303, code: "invalid_request"},
		{name: "authorize: a state of more than 4096 bytes is invalid_request", method: "GET", path: authz(func(v url.Values) { v.Set("state", strings.Repeat("s", 4097)) }), status: 303, code: "invalid_request"},
		{name: "authorize: an oversized form POST is refused", method: "POST", path: authz(func(url.Values) {}), header: form, body: "x=" + huge, status: 400},
		{name: "authorize: PUT is not allowed", method: "PUT", path: authz(func(url.Values) {}), status: 405},

		// /token
		{name: "token: a NUL byte in a public client_id is invalid_client", method: "POST", path: "/token", header: form, body: nulBody("grant_type", "authorization_code", "client_id", "demo\x00app", "code", "x", "code_verifier", verifier, "redirect_uri", appRedirect), status: 401, code: "invalid_client"},
		{name: "token: invalid UTF-8 in a public client_id is invalid_client", method: "POST", path: "/token", header: form, body: nulBody("grant_type", "authorization_code", "client_id", "demo\xffapp", "code", "x", "code_verifier", verifier, "redirect_uri", appRedirect), status: 401, code: "invalid_client"},
		{name: "token: a NUL byte in the Basic user is invalid_client", method: "POST", path: "/token", header: basic("ci\x00bot", ciSecret), body: "grant_type=client_credentials", status: 401, code: "invalid_client"},
		{name: "token: invalid UTF-8 in the Basic password is invalid_client", method: "POST", path: "/token", header: basic("ci-bot", "\xff\xfe"), body: "grant_type=client_credentials", status: 401, code: "invalid_client"},
		{name: "token: a Basic header that is not base64 is invalid_client", method: "POST", path: "/token", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": "Basic %%%"}, body: "grant_type=client_credentials", status: 401, code: "invalid_client"},
		{name: "token: an access token of ours is no client credential", method: "POST", path: "/token", header: bearer(ccToken), body: "grant_type=client_credentials&client_id=ci-bot", status: 401, code: "invalid_client"},
		{name: "token: a NUL byte in the code is invalid_grant", method: "POST", path: "/token", header: form, body: nulBody("grant_type", "authorization_code", "client_id", "demo-app", "code", "ab\x00cd", "code_verifier", verifier, "redirect_uri", appRedirect), status: 400, code: "invalid_grant"},
		{name: "token: a NUL byte in a refresh token is invalid_grant", method: "POST", path: "/token", header: form, body: nulBody("grant_type", "refresh_token", "client_id", "demo-app", "refresh_token", "ory_rt_\x00.\x00"), status: 400, code: "invalid_grant"},
		{name: "token: an access token used as a refresh token is invalid_grant", method: "POST", path: "/token", header: form, body: nulBody("grant_type", "refresh_token", "client_id", "demo-app", "refresh_token", ccToken), status: 400, code: "invalid_grant"},
		{name: "token: a refresh request from a client without the grant is unauthorized_client", method: "POST", path: "/token", header: basic("ci-bot", ciSecret), body: nulBody("grant_type", "refresh_token", "refresh_token", ccToken), status: 400, code: "unauthorized_client"},
		{name: "token: a missing grant type is invalid_request", method: "POST", path: "/token", header: basic("ci-bot", ciSecret), body: "scope=mcp:tools", status: 400, code: "invalid_request"},
		{name: "token: a replayed code is invalid_grant", method: "POST", path: "/token", header: form, body: codeForm.Encode(), status: 400, code: "invalid_grant"},
		{name: "token: an unknown grant type is unsupported_grant_type", method: "POST", path: "/token", header: basic("ci-bot", ciSecret), body: "grant_type=password&username=a&password=b", status: 400, code: "unsupported_grant_type"},
		{name: "token: the implicit grant is unsupported_grant_type", method: "POST", path: "/token", header: basic("ci-bot", ciSecret), body: "grant_type=implicit", status: 400, code: "unsupported_grant_type"},
		{name: "token: a resource with a NUL byte is invalid_target", method: "POST", path: "/token", header: basic("ci-bot", ciSecret), body: nulBody("grant_type", "client_credentials", "resource", mcpURI+"\x00"), status: 400, code: "invalid_target"},
		{name: "token: an assertion naming a jku is invalid_client and never fetched", method: "POST", path: "/token", header: form, body: ccAssertion(jkuAssertion), status: 401, code: "invalid_client"},
		{name: "token: an assertion naming an x5u is invalid_client and never fetched", method: "POST", path: "/token", header: form, body: ccAssertion(x5uAssertion), status: 401, code: "invalid_client"},
		{name: "token: an assertion with an embedded jwk is invalid_client", method: "POST", path: "/token", header: form, body: ccAssertion(jwkAssertion), status: 401, code: "invalid_client"},
		{name: "token: an unsigned assertion is invalid_client", method: "POST", path: "/token", header: form, body: ccAssertion(noneAssertion), status: 401, code: "invalid_client"},
		{name: "token: garbage as an assertion is invalid_client", method: "POST", path: "/token", header: form, body: ccAssertion("a.b.c\x00"), status: 401, code: "invalid_client"},
		{name: "token: GET is refused", method: "GET", path: "/token?grant_type=client_credentials", status: 405, code: "invalid_request"},

		// /introspect (RFC 7662 §2.1: callers authenticate; our own access
		// token is not a credential).
		{name: "introspect: no credentials is invalid_client", method: "POST", path: "/introspect", header: form, body: "token=" + ccToken, status: 401, code: "invalid_client"},
		{name: "introspect: our access token as Bearer is invalid_client", method: "POST", path: "/introspect", header: bearer(ccToken), body: "token=" + ccToken, status: 401, code: "invalid_client"},
		{name: "introspect: a public client may not introspect", method: "POST", path: "/introspect", header: form, body: "client_id=demo-app&token=" + ccToken, status: 401, code: "invalid_client"},
		{name: "introspect: a NUL byte in the token is inactive", method: "POST", path: "/introspect", header: basic("rs", rsSecret), body: nulBody("token", "ab\x00cd.ef"), status: 200, inactive: true},
		{name: "introspect: invalid UTF-8 in the token is inactive", method: "POST", path: "/introspect", header: basic("rs", rsSecret), body: nulBody("token", "ab\xffcd"), status: 200, inactive: true},
		{name: "introspect: a missing token is invalid_request", method: "POST", path: "/introspect", header: basic("rs", rsSecret), body: "token_type_hint=access_token", status: 400, code: "invalid_request"},
		{name: "introspect: GET is refused", method: "GET", path: "/introspect?token=x", status: 405, code: "invalid_request"},

		// /revoke (RFC 7009 §2.2: unknown tokens get 200).
		{name: "revoke: a NUL byte in the token answers 200", method: "POST", path: "/revoke", header: basic("ci-bot", ciSecret), body: nulBody("token", "ab\x00cd"), status: 200},
		{name: "revoke: invalid UTF-8 in the token answers 200", method: "POST", path: "/revoke", header: basic("ci-bot", ciSecret), body: nulBody("token", "ab\xffcd"), status: 200},
		{name: "revoke: our access token as Bearer is invalid_client", method: "POST", path: "/revoke", header: bearer(ccToken), body: "token=" + ccToken, status: 401, code: "invalid_client"},
		{name: "revoke: a missing token is invalid_request", method: "POST", path: "/revoke", header: basic("ci-bot", ciSecret), body: "token_type_hint=access_token", status: 400, code: "invalid_request"},
		{name: "revoke: an oversized body is invalid_request", method: "POST", path: "/revoke", header: basic("ci-bot", ciSecret), body: "token=" + huge, status: 400, code: "invalid_request"},

		// Metadata and JWKS are read-only documents.
		{name: "metadata: POST is refused", method: "POST", path: "/.well-known/oauth-authorization-server", header: form, body: "x=1", status: 405},
		{name: "metadata: a path below the document is 404", method: "GET", path: "/.well-known/oauth-authorization-server/evil", status: 404},
		{name: "metadata: dot segments are cleaned to a same-origin path", method: "GET", path: "/.well-known/oauth-authorization-server/../../etc/passwd", status: 307},
		{name: "metadata: a NUL byte in the path is 404", method: "GET", path: "/.well-known/oauth-authorization-server%00", status: 404},
		{name: "jwks: POST is refused", method: "POST", path: "/jwks.json", header: form, body: "x=1", status: 405},
		{name: "jwks: DELETE is refused", method: "DELETE", path: "/jwks.json", status: 405},

		// The person-facing pages.
		{name: "consents: a revoke POST without a session shows the login form", method: "POST", path: "/consents", header: form, body: "mcpauth_step=revoke&client_id=demo-app&csrf=x", status: 200},
		{name: "consents: a login POST with a NUL byte in the username is refused", method: "POST", path: "/consents", header: form, body: nulBody("mcpauth_step", "login", "username", "ali\x00ce", "password", alicePW, "csrf", "x"), status: 403},
		{name: "consents: an oversized POST is refused", method: "POST", path: "/consents", header: form, body: "x=" + huge, status: 400},
		{name: "consents: PUT is refused", method: "PUT", path: "/consents", status: 405},
		{name: "logout: a POST without a CSRF token is refused", method: "POST", path: "/logout", header: form, body: "mcpauth_step=logout", status: 403},
		{name: "logout: a bad form escape is refused", method: "POST", path: "/logout", header: form, body: "mcpauth_step=%zz", status: 400},
		{name: "logout: DELETE is refused", method: "DELETE", path: "/logout", status: 405},
	}
}

// signAssertion signs an RFC 7523 client assertion with key and options.
func signAssertion(t *testing.T, key *ecdsa.PrivateKey, opts *jose.SignerOptions, client, aud string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: client, Subject: client, Audience: jwt.Audience{aud}, ID: "hostile-" + now.Format(time.RFC3339Nano),
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unsignedJWT builds header.payload. with no signature.
func unsignedJWT(header, claims map[string]any) string {
	hb, _ := json.Marshal(header)
	cb, _ := json.Marshal(claims)
	return b64(hb) + "." + b64(cb) + "."
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// runHostile sends every case to h and checks the answer: the expected
// status and error, never a 5xx, never a Go stack trace, and redirects only
// to the registered client.
func runHostile(t *testing.T, h *harness) {
	for _, tc := range hostileRequests(t, h) {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, h.issuer+tc.path, strings.NewReader(tc.body))
			if err != nil {
				// A path Go itself cannot send; build it raw.
				req, err = http.NewRequest(tc.method, h.issuer+"/", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				req.URL.Opaque = tc.path
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode >= 500 || strings.Contains(string(body), "goroutine ") || strings.Contains(string(body), ".go:") {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %.300s", resp.StatusCode, tc.status, body)
			}
			if tc.says != "" && !strings.Contains(string(body), html.EscapeString(tc.says)) {
				t.Errorf("body does not say %q: %.600s", tc.says, body)
			}
			if tc.inactive {
				var m map[string]any
				if err := json.Unmarshal(body, &m); err != nil || len(m) != 1 || m["active"] != false {
					t.Errorf("body %s, want {\"active\":false}", body)
				}
			}
			if tc.code == "" {
				return
			}
			if resp.StatusCode == http.StatusSeeOther {
				u, err := url.Parse(resp.Header.Get("Location"))
				if err != nil || u.Host != "app.example" || u.Query().Get("error") != tc.code || u.Query().Get("iss") != h.issuer {
					t.Errorf("Location %q, want the client's redirect URI with error=%s and iss", resp.Header.Get("Location"), tc.code)
				}
				return
			}
			var e struct{ Error string }
			if err := json.Unmarshal(body, &e); err != nil || e.Error != tc.code {
				t.Errorf("body %s, want error %s", body, tc.code)
			}
			if strings.HasPrefix(tc.path, "/token") || strings.HasPrefix(tc.path, "/introspect") || strings.HasPrefix(tc.path, "/revoke") {
				if resp.Header.Get("Cache-Control") != "no-store" {
					t.Errorf("Cache-Control %q on an OAuth answer", resp.Header.Get("Cache-Control"))
				}
			}
		})
	}
	if n := h.fetchedAttacker.Load(); n != 0 {
		t.Errorf("the AS fetched a key URL named in an assertion header %d times", n)
	}
	t.Run("hostile usernames and passwords in a real login form", func(t *testing.T) {
		conf := h.oauthConfig("demo-app", "")
		for _, up := range []struct{ name, user, pw string }{
			{"a NUL byte in the username", "ali\x00ce", alicePW},
			{"invalid UTF-8 in the username", "ali\xffce", alicePW},
			{"a NUL byte in the password", "alice", "pw\x00"},
			{"invalid UTF-8 in the password", "alice", "\xff\xfe"},
			{"a username of look-alike letters", "\u0430lice", alicePW},
		} {
			b := h.browser()
			p := b.get(conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
			p = b.submit(p, "username", up.user, "password", up.pw)
			if p.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: status %d, want 401", up.name, p.StatusCode)
			}
		}
		u := h.browser().authorize(conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		if u.Query().Get("code") == "" {
			t.Errorf("the real user cannot log in afterwards: %s", u)
		}
	})
	t.Run("hostile client ids in a logged-in consent revocation", func(t *testing.T) {
		// A remembered consent, then the /consents page of the same browser.
		b := h.browser()
		conf := h.oauthConfig("demo-app", "")
		b.authorize(conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		for _, id := range []string{"demo\x00app", "demo\xffapp", strings.Repeat("x", 5000)} {
			p := b.get(h.issuer + "/consents")
			if p.StatusCode != 200 || !strings.Contains(p.Body, "demo-app") {
				t.Fatalf("consents page: %d", p.StatusCode)
			}
			m := formRE.FindStringSubmatch(p.Body)
			if m == nil {
				t.Fatalf("no revoke form on the consents page:\n%s", p.Body)
			}
			p = b.submit(page{p.Response, m[0]}, "client_id", id)
			if p.StatusCode >= 500 {
				t.Errorf("client_id %.12q: status %d", id, p.StatusCode)
			}
		}
		// The real consent is still listed, and revoking it still works.
		p := b.get(h.issuer + "/consents")
		if !strings.Contains(p.Body, "demo-app") {
			t.Fatal("a hostile revocation removed the real consent")
		}
		m := formRE.FindStringSubmatch(p.Body)
		if m == nil {
			t.Fatalf("no revoke form on the consents page:\n%s", p.Body)
		}
		p = b.submit(page{p.Response, m[0]}, "client_id", "demo-app")
		if p.StatusCode != 200 || strings.Contains(p.Body, "demo-app") {
			t.Errorf("revoking the real consent: status %d, page still lists it:\n%s", p.StatusCode, p.Body)
		}
		if _, err := h.as.cfg.Store.GetConsent(context.Background(), "alice", "demo-app", mcpURI); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("consent after revocation: %v, want ErrNotFound", err)
		}
	})
	t.Run("a consent form with a wrong CSRF token is refused by the CSRF check", func(t *testing.T) {
		// A logged-in browser with a fresh flow token: only the CSRF token
		// is wrong, so nothing but the CSRF check can refuse it.
		b := h.browser()
		conf := h.oauthConfig("demo-app", "")
		authURL := conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("prompt", "consent"))
		p := b.submit(b.get(authURL), "username", "alice", "password", alicePW)
		if !strings.Contains(p.Body, `value="approve"`) {
			t.Fatalf("no consent page after login: %d\n%s", p.StatusCode, p.Body)
		}
		refused := b.submit(p, "action", "approve", "csrf", "x"+hiddenValue(t, p, "csrf"))
		if refused.StatusCode != http.StatusForbidden || refused.Header.Get("Location") != "" ||
			!strings.Contains(refused.Body, html.EscapeString("This form has expired or was already used.")) {
			t.Fatalf("consent with a wrong CSRF token: %d %q\n%s", refused.StatusCode, refused.Header.Get("Location"), refused.Body)
		}
		// The same form with its own CSRF token goes through.
		if u := redirected(t, b.submit(refused, "action", "approve")); u.Query().Get("code") == "" {
			t.Errorf("the re-shown consent form did not complete: %s", u)
		}
	})
}

// hiddenValue is the value of the hidden field name in p's only form.
func hiddenValue(t *testing.T, p page, name string) string {
	t.Helper()
	for _, hm := range hiddenRE.FindAllStringSubmatch(p.Body, -1) {
		if html.UnescapeString(hm[1]) == name {
			return html.UnescapeString(hm[2])
		}
	}
	t.Fatalf("no hidden field %s in:\n%s", name, p.Body)
	return ""
}

func TestHostileRequestsOnMemory(t *testing.T) {
	runHostile(t, newHarness(t, nil))
}

func TestHostileRequestsOnSQLite(t *testing.T) {
	s := openSQLite(t)
	runHostile(t, hostileHarnessOn(t, s))
}

// TestHostileRequestsOnPostgreSQL matters most: PostgreSQL refuses NUL
// bytes and invalid UTF-8 in text with an error that is no storage
// sentinel, so every such value must be stopped before it gets there.
func TestHostileRequestsOnPostgreSQL(t *testing.T) {
	s := openPostgres(t, 4)
	runHostile(t, hostileHarnessOn(t, s))
}

// hostileHarnessOn is the usual harness with both the AS and the login
// pages on store.
func hostileHarnessOn(t *testing.T, store storage.Store) *harness {
	h, _ := newLoggedHarness(t, func(c *Config) { c.Store = store })
	return h
}
