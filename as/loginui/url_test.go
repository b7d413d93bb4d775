package loginui

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSelfURLStaysOnThisHost(t *testing.T) {
	for _, tc := range []struct {
		name, requestURI, want string
	}{
		{"a normal path with a query is kept", "/authorize?a=1&b=2", "/authorize?a=1&b=2"},
		{"a protocol-relative target is made local", "//evil.example/authorize", "/evil.example/authorize"},
		{"a backslash target is made local", "/\\evil.example/authorize", "/%5Cevil.example/authorize"},
		{"an absolute-form target uses the path", "http://evil.example/authorize?x=1", "/authorize?x=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/authorize", nil)
			r.RequestURI = tc.requestURI
			if tc.requestURI == "http://evil.example/authorize?x=1" {
				r.URL.RawQuery = "x=1"
			} else if tc.requestURI != "/authorize?a=1&b=2" {
				r.URL.Path = tc.requestURI
			}
			if got := selfURL(r); got != tc.want {
				t.Fatalf("selfURL = %q, want %q", got, tc.want)
			}
		})
	}
}
