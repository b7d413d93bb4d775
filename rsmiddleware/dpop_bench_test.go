package rsmiddleware

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchmarkMiddleware serves one request per iteration through the
// middleware (no network): the token is verified once and then cached, as
// on a live server, so the DPoP case differs from Bearer by the proof check
// (one ES256 verification, the thumbprint and ath hashes). The proof is
// reused: no jti cache, so the replay check is not part of the figure.
func benchmarkMiddleware(b *testing.B, useDPoP bool) {
	ks := newKeyServer(b)
	prm, _ := ResourceMetadataURL(testResource)
	cfg := MiddlewareConfig{Verifier: ks.verifier(b, nil), ResourceMetadataURL: prm, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	k := signer(b)
	tok := ks.mint(ks.claims())
	auth, proof := "Bearer "+tok, ""
	if useDPoP {
		d, err := NewDPoP(DPoPConfig{PublicURL: publicURL})
		if err != nil {
			b.Fatal(err)
		}
		cfg.DPoP = d
		tok = ks.boundToken(k)
		auth = "DPoP " + tok
		if proof, err = k.Proof("POST", publicURL, tok, ""); err != nil {
			b.Fatal(err)
		}
	}
	mw, err := NewMiddleware(cfg)
	if err != nil {
		b.Fatal(err)
	}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader("{}"))
		req.Header.Set("Authorization", auth)
		if proof != "" {
			req.Header.Set("DPoP", proof)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("status %d %v", rec.Code, rec.Header())
		}
	}
}

func BenchmarkMiddlewareBearer(b *testing.B) { benchmarkMiddleware(b, false) }
func BenchmarkMiddlewareDPoP(b *testing.B)   { benchmarkMiddleware(b, true) }
