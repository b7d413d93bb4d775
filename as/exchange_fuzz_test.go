package as

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ory/fosite"
)

// FuzzExchangeForm throws arbitrary token exchange parameters at the
// parser and, with a real subject token mixed in, at /token as an
// authenticated exchanging client: the parser answers parameters or an
// invalid_request/invalid_target error, and the endpoint a JSON OAuth answer
// with Cache-Control no-store, never a 5xx.
func FuzzExchangeForm(f *testing.F) {
	h := exchangeHarness(f, nil)
	_, cc := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	subject := cc["access_token"].(string)
	f.Add("subject_token=SUBJECT&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token&resource=http%3A%2F%2F127.0.0.1%3A8081%2Fother")
	f.Add("subject_token=SUBJECT&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Ajwt&audience=http%3A%2F%2F127.0.0.1%3A8081%2Fother%2F&scope=other%3Aread+x")
	f.Add("subject_token=SUBJECT&subject_token=x&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token")
	f.Add("subject_token=a.b.c&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid_token&actor_token=x")
	f.Add("subject_token=SUBJECT&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token&resource=urn%3Ax&audience=%zz")
	f.Add("subject_token=SUBJECT&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token&resource=http%3A%2F%2F127.0.0.1%3A8082%2Fthird&requested_token_type=x&%00subject_signature=y")
	handler := h.as.Handler()
	f.Fuzz(func(t *testing.T, params string) {
		params = strings.ReplaceAll(params, "SUBJECT", url.QueryEscape(subject))
		if form, err := url.ParseQuery(params); err == nil {
			p, err := parseExchangeForm(form)
			var rfc *fosite.RFC6749Error
			switch {
			case err == nil:
				if p.subjectToken == "" || p.target == "" {
					t.Fatalf("accepted %q without subject or target", params)
				}
			case !errors.As(err, &rfc) || (rfc.ErrorField != "invalid_request" && rfc.ErrorField != "invalid_target"):
				t.Fatalf("parser error %v", err)
			}
		}
		body := "grant_type=" + url.QueryEscape(GrantTypeTokenExchange) + "&" + params
		req := httptest.NewRequest(http.MethodPost, h.issuer+"/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("mcp-server", mcpSrvSecret)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d body %s", rec.Code, rec.Body)
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("Cache-Control %q", rec.Header().Get("Cache-Control"))
		}
		var answer map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("status %d, body not JSON: %s", rec.Code, rec.Body)
		}
		if rec.Code == 200 {
			tok, _ := answer["access_token"].(string)
			_, payload, ok := peekJWT(tok)
			var c map[string]any
			if !ok || json.Unmarshal(payload, &c) != nil {
				t.Fatalf("issued a token that is not a JWT: %s", rec.Body)
			}
			if c["sub"] != "ci-bot" || c["aud"] != otherURI || c["scope"] != "other:read" {
				t.Fatalf("issued %v for %q", c, params)
			}
		} else if answer["error"] == nil {
			t.Fatalf("status %d without error: %s", rec.Code, rec.Body)
		}
	})
}
