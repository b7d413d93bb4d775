package as

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestOnlyAPreflightGetsTheCORSAnswer: the CORS wrapper answers 204 only to
// an OPTIONS request naming Access-Control-Request-Method (a preflight);
// any other request reaches the endpoint.
func TestOnlyAPreflightGetsTheCORSAnswer(t *testing.T) {
	h := newHarness(t, nil)
	do := func(method string, acrm bool, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, h.issuer+"/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("ci-bot", ciSecret)
		if acrm {
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := do(http.MethodOptions, true, ""); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Methods") == "" {
		t.Errorf("a preflight: %d %v, want 204 with the allowed methods", resp.StatusCode, resp.Header)
	}
	if resp := do(http.MethodOptions, false, ""); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("OPTIONS without Access-Control-Request-Method: %d, want the endpoint's 405", resp.StatusCode)
	}
	form := url.Values{"grant_type": {"client_credentials"}}.Encode()
	if resp := do(http.MethodPost, true, form); resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("a POST naming Access-Control-Request-Method: %d, want the endpoint's 200", resp.StatusCode)
	}
}
