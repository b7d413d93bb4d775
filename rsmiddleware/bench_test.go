package rsmiddleware

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerifyFreshES256 measures a full verification of an ES256 token
// (parse, typ, key lookup, signature, claims, audience) with the cache off.
func BenchmarkVerifyFreshES256(b *testing.B) {
	ks := newKeyServer(b)
	v := ks.verifier(b, func(c *Config) { c.CacheSize = -1 })
	tok := ks.mint(ks.claims())
	if _, err := v.Verify(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyCached measures a token already verified (cache hit).
func BenchmarkVerifyCached(b *testing.B) {
	ks := newKeyServer(b)
	v := ks.verifier(b, nil)
	tok := ks.mint(ks.claims())
	if _, err := v.Verify(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Verify(context.Background(), tok); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchServers(b *testing.B) (unprotected, protected *httptest.Server, token string) {
	ks := newKeyServer(b)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(b, nil), ResourceMetadataURL: prm, Scopes: testScopes,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	unprotected = httptest.NewServer(trivial)
	protected = httptest.NewServer(mw.Wrap(trivial))
	b.Cleanup(unprotected.Close)
	b.Cleanup(protected.Close)
	c := ks.claims()
	c["scope"] = "mcp:read mcp:write"
	c["exp"] = time.Now().Add(time.Hour).Unix()
	return unprotected, protected, ks.mint(c)
}

func benchRequest(b *testing.B, client *http.Client, url, token string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(toolCall("write_file")))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkHTTP serves a trivial JSON-RPC handler over real HTTP (loopback,
// keep-alive) with and without the middleware, interleaving the two request
// by request so both see the same machine load, and reports the protected
// throughput as a fraction of the unprotected one ("protected/unprotected").
func BenchmarkHTTP(b *testing.B) {
	unprotected, protected, token := benchServers(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	benchRequest(b, client, unprotected.URL, "")
	benchRequest(b, client, protected.URL, token)
	var tu, tp time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		benchRequest(b, client, unprotected.URL, "")
		t1 := time.Now()
		benchRequest(b, client, protected.URL, token)
		tp += time.Since(t1)
		tu += t1.Sub(t0)
	}
	b.ReportMetric(float64(b.N)/tu.Seconds(), "unprotected-req/s")
	b.ReportMetric(float64(b.N)/tp.Seconds(), "protected-req/s")
	b.ReportMetric(tu.Seconds()/tp.Seconds(), "protected/unprotected")
}

// BenchmarkHTTPParallel is the same side by side with concurrent clients.
func BenchmarkHTTPParallel(b *testing.B) {
	unprotected, protected, token := benchServers(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, tc := range []struct {
		name, url, token string
	}{{"unprotected", unprotected.URL, ""}, {"protected", protected.URL, token}} {
		b.Run(tc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchRequest(b, client, tc.url, tc.token)
				}
			})
		})
	}
}

// BenchmarkECDSAP256VerifyBaseline is the bare standard-library P-256
// signature check, for reading BenchmarkVerifyFreshES256 against the
// machine's speed.
func BenchmarkECDSAP256VerifyBaseline(b *testing.B) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.Sum256([]byte("payload"))
	sig, err := ecdsa.SignASN1(rand.Reader, k, h[:])
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if !ecdsa.VerifyASN1(&k.PublicKey, h[:], sig) {
			b.Fatal("bad signature")
		}
	}
}

// BenchmarkVerifyBareES256 is the least a fresh verification of the token
// of BenchmarkVerifyFreshES256 can cost with the standard library alone
// (RFC 7515 §5.2 compact serialisation, RFC 7518 §3.4 ES256): split the
// three segments, base64url-decode header, payload and signature, decode
// the header and the payload with encoding/json into the fields the
// verifier checks, hash the signing input and ecdsa.Verify. Read
// BenchmarkVerifyFreshES256 against it in the same run.
func BenchmarkVerifyBareES256(b *testing.B) {
	ks := newKeyServer(b)
	tok := ks.mint(ks.claims())
	pub := &ks.keys[ks.current].PublicKey
	type header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}
	type claims struct {
		Iss   string          `json:"iss"`
		Sub   string          `json:"sub"`
		Aud   json.RawMessage `json:"aud"`
		Exp   int64           `json:"exp"`
		Iat   int64           `json:"iat"`
		Nbf   int64           `json:"nbf"`
		Scope string          `json:"scope"`
		JTI   string          `json:"jti"`
	}
	verify := func() bool {
		h64, rest, _ := strings.Cut(tok, ".")
		p64, s64, _ := strings.Cut(rest, ".")
		hb, err1 := base64.RawURLEncoding.DecodeString(h64)
		pb, err2 := base64.RawURLEncoding.DecodeString(p64)
		sig, err3 := base64.RawURLEncoding.DecodeString(s64)
		if err1 != nil || err2 != nil || err3 != nil || len(sig) != 64 {
			return false
		}
		var h header
		var c claims
		if json.Unmarshal(hb, &h) != nil || json.Unmarshal(pb, &c) != nil || h.Alg != "ES256" {
			return false
		}
		d := sha256.Sum256([]byte(tok[:len(h64)+1+len(p64)]))
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(pub, d[:], r, s) && c.Exp > time.Now().Unix()
	}
	if !verify() {
		b.Fatal("the token does not verify")
	}
	b.ReportAllocs()
	for b.Loop() {
		if !verify() {
			b.Fatal("the token does not verify")
		}
	}
}

// BenchmarkMiddlewareOverhead runs the middleware in process (no network)
// on a cached token and a tools/call body: the cost it adds per request.
func BenchmarkMiddlewareOverhead(b *testing.B) {
	ks := newKeyServer(b)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(b, nil), ResourceMetadataURL: prm, Scopes: testScopes,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	c := ks.claims()
	c["scope"] = "mcp:read mcp:write"
	auth := "Bearer " + ks.mint(c)
	body := toolCall("write_file")
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("status %d", w.Code)
		}
	}
}

// BenchmarkVerifyCachedWithStatus measures a cache hit of a token with a
// Token Status List claim: the verification of BenchmarkVerifyCached plus
// the bit lookup in the cached list.
func BenchmarkVerifyCachedWithStatus(b *testing.B) {
	ks := newKeyServer(b)
	v := ks.verifier(b, nil)
	tok := ks.statusToken(7)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Verify(context.Background(), tok); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMCPFilterToolCall runs what a gateway does in process around a
// tools/call answered with one event stream event, as the MCP Go SDK
// answers: Middleware (cached token, scope check), SessionBinding and
// MCPFilter (request parse with the argument digest, the event's parse, a
// JSON audit line with the tenant claim).
//
//	go test ./rsmiddleware -run '^$' -bench MCPFilterToolCall -benchmem
func BenchmarkMCPFilterToolCall(b *testing.B) {
	ks := newKeyServer(b)
	prm, _ := ResourceMetadataURL(testResource)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(b, nil), ResourceMetadataURL: prm, Scopes: testScopes, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	filter := NewMCPFilter(MCPFilterConfig{Scopes: testScopes, Audit: AuditLog(io.Discard, "json"), TenantClaim: "client_id", Logger: logger})
	binding := &SessionBinding{}
	event := []byte("event: message\nid: s1_3\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hello\"}]}}\n\n")
	h := mw.Wrap(binding.Wrap(filter.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set(SessionHeader, "SESSIONID0123456789")
		_, _ = w.Write(event)
		w.(http.Flusher).Flush()
	}))))
	c := ks.claims()
	c["scope"] = "mcp:read mcp:write"
	auth := "Bearer " + ks.mint(c)
	body := toolCall("write_file")
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		req.Header.Set(SessionHeader, "SESSIONID0123456789")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 || w.Body.Len() != len(event) {
			b.Fatalf("status %d, %q", w.Code, w.Body)
		}
	}
}
