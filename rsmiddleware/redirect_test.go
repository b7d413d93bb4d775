package rsmiddleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// The AS's metadata, JWKS, introspection and token endpoint answers must come
// from the URL asked: no client of this package follows a redirect.
func TestClientsDoNotFollowRedirects(t *testing.T) {
	var followed atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/from", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/to", http.StatusTemporaryRedirect) })
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		followed.Store(true)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"keys":[],"active":true}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	v, err := NewVerifier(Config{Issuer: srv.URL, Resource: testResource, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewExchanger(ExchangeConfig{TokenURL: srv.URL + "/from", ClientID: "rs", ClientSecret: "s", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Client().CheckRedirect != nil {
		t.Fatal("the caller's client was modified")
	}
	ctx := context.Background()
	var set struct{ Keys []any }
	if err := getJSON(ctx, v.client, srv.URL+"/from", &set); err == nil || !strings.Contains(err.Error(), "status 307") {
		t.Errorf("getJSON: err = %v, want status 307", err)
	}
	for name, c := range map[string]*http.Client{"Verifier": v.client, "Exchanger": e.client} {
		resp, err := postForm(ctx, c, srv.URL+"/from", url.Values{"a": {"b"}}, ClientCredentials{ClientID: "rs", ClientSecret: "s"})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect {
			t.Errorf("%s: postForm answered %d, want the 307 itself", name, resp.StatusCode)
		}
	}
	if _, err := e.Exchange(ctx, "subject-token", testResource); err == nil {
		t.Error("Exchange succeeded through a redirect")
	}
	if followed.Load() {
		t.Fatal("a redirect was followed")
	}
}
