package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzCallback: whatever query the redirect carries, the callback answers
// without echoing markup, and hands over a code only when there is one.
func FuzzCallback(f *testing.F) {
	f.Add("code=abc&state=xyz&iss=http%3A%2F%2F127.0.0.1%3A9000")
	f.Add("error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E")
	f.Add("code=&code=x")
	f.Add("%zz")
	f.Fuzz(func(t *testing.T, query string) {
		cb := &callback{results: make(chan callbackResult, 1)}
		req := httptest.NewRequest(http.MethodGet, "/callback", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		cb.serve(rec, req)
		if strings.Contains(rec.Body.String(), "<b>") || strings.Contains(rec.Body.String(), "<script") {
			t.Fatalf("markup echoed: %q", rec.Body.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		res, err := cb.wait(ctx)
		if err == nil && (res == nil || res.Code == "" || rec.Code != http.StatusOK) {
			t.Fatalf("handed over %+v with status %d", res, rec.Code)
		}
		if err != nil && rec.Code == http.StatusOK {
			t.Fatalf("status 200 for a failed response: %v", err)
		}
	})
}
