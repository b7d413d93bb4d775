package rsmiddleware

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSessionOwnerTellsSubjectAndClientApart: the default owner of a
// session is its subject and client ID told apart whatever characters
// they hold (a JSON string may hold U+0000, RFC 8259 §7), so subject "a"
// with client "b\x00c" and subject "a\x00b" with client "c" are two owners,
// with Key and without.
func TestSessionOwnerTellsSubjectAndClientApart(t *testing.T) {
	for _, key := range [][]byte{keyA, nil} {
		name := "signed"
		if key == nil {
			name = "recorded"
		}
		t.Run(name, func(t *testing.T) {
			f := newSignedFixture(t)
			srv := httptest.NewServer(f.mw.Wrap((&SessionBinding{Key: key}).Wrap(f.stand)))
			t.Cleanup(srv.Close)
			one, two := f.token("a", "b\x00c"), f.token("a\x00b", "c")
			resp := f.do(srv, http.MethodPost, one, "")
			id := resp.Header.Get(SessionHeader)
			if resp.StatusCode != 200 || id == "" {
				t.Fatalf("initialize: %d %q", resp.StatusCode, id)
			}
			if resp := f.do(srv, http.MethodPost, two, id); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("another subject and client with the session: %d, want 404", resp.StatusCode)
			}
			if resp := f.do(srv, http.MethodPost, one, id); resp.StatusCode != 200 {
				t.Fatalf("the session's owner: %d", resp.StatusCode)
			}
		})
	}
}
