package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/unauthorized":
			w.WriteHeader(http.StatusUnauthorized)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	tests := []struct {
		name    string
		url     string
		healthy bool
	}{
		{"a 200 answer is healthy", srv.URL + "/ok", true},
		{"a 401 answer is unhealthy", srv.URL + "/unauthorized", false},
		{"a 404 answer is unhealthy", srv.URL + "/missing", false},
		{"a closed port is unhealthy", "http://127.0.0.1:1/", false},
		{"a malformed URL is unhealthy", "http://[::1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := probe(tc.url, 2*time.Second)
			if (err == nil) != tc.healthy {
				t.Fatalf("probe(%q) = %v, want healthy=%v", tc.url, err, tc.healthy)
			}
		})
	}
}
