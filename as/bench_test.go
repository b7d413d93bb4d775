package as

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

const benchConns = 32

// cpuTime is the user+system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchHTTP sends b.N requests over benchConns keep-alive connections from
// benchConns goroutines and reports requests/s and p50/p99 latency.
func benchHTTP(b *testing.B, h *harness, path string, form url.Values, user, pass string) {
	benchHTTPProofs(b, h, path, form, user, pass, nil)
}

// benchHTTPProofs is benchHTTP with request i carrying proofs[i] in its
// DPoP header (RFC 9449 §4.1) when proofs is not nil. The proofs are made
// before the clock starts: signing them is the client's work.
func benchHTTPProofs(b *testing.B, h *harness, path string, form url.Values, user, pass string, proofs []string) {
	tr := &http.Transport{MaxIdleConns: benchConns, MaxIdleConnsPerHost: benchConns, MaxConnsPerHost: benchConns}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := form.Encode()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for w := 0; w < benchConns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, h.issuer+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.SetBasicAuth(user, pass)
				if proofs != nil {
					req.Header.Set("DPoP", proofs[i])
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed", n, b.N)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	// CPU time of the process (server and client together) per request:
	// on a shared machine the wall-clock rate depends on the neighbours,
	// this does not. 2e6/cpu-us is the rate two idle cores would allow.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}

// BenchmarkClientCredentials drives /token with client_credentials
// (client_secret_basic, default resource) over HTTP, memory storage.
func BenchmarkClientCredentials(b *testing.B) {
	h := newHarness(b, nil)
	benchHTTP(b, h, "/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
}

// BenchmarkClientCredentialsDPoP is BenchmarkClientCredentials with a
// fresh DPoP proof (RFC 9449 §5) on every request: the same client, form
// and HTTP path, so the difference between the two is what the proof
// costs at the AS (parsing, one signature verification, the thumbprint,
// the jti in the one-time-id store, the cnf claim).
func BenchmarkClientCredentialsDPoP(b *testing.B) {
	h := newHarness(b, nil)
	k, err := dpop.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	proofs := make([]string, b.N)
	for i := range proofs {
		if proofs[i], err = k.Proof(http.MethodPost, h.issuer+"/token", "", ""); err != nil {
			b.Fatal(err)
		}
	}
	// One request outside the clock checks the token is really DPoP-bound.
	_, tok := h.postProof(url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret, h.proof(k, ""))
	if tok["token_type"] != "DPoP" {
		b.Fatalf("token response %v, want token_type DPoP", tok)
	}
	benchHTTPProofs(b, h, "/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret, proofs)
}

// BenchmarkECDSAP256Verify is one bare standard-library P-256 signature
// check (the ES256 verification a proof costs), for reading
// BenchmarkClientCredentialsDPoP against BenchmarkClientCredentials in the
// same run.
func BenchmarkECDSAP256Verify(b *testing.B) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("payload"))
	sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !ecdsa.VerifyASN1(&k.PublicKey, d[:], sig) {
			b.Fatal("bad signature")
		}
	}
}

// BenchmarkIntrospection drives /introspect with one active access token.
func BenchmarkIntrospection(b *testing.B) {
	h := newHarness(b, nil)
	_, tok := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	benchHTTP(b, h, "/introspect", url.Values{"token": {tok["access_token"].(string)}}, "rs", rsSecret)
}

// BenchmarkSignAccessToken measures the bound of client credentials: one
// RFC 9068 token signed (ES256 by default) per request.
func BenchmarkSignAccessToken(b *testing.B) {
	for _, alg := range []string{"ES256", "EdDSA", "RS256"} {
		b.Run(alg, func(b *testing.B) {
			h := newHarness(b, func(c *Config) { c.SigningAlg = alg })
			c, _ := h.as.clients.get(context.Background(), "ci-bot")
			req := &fosite.Request{Client: c, Session: newSession(""), GrantedAudience: fosite.Arguments{mcpURI}, GrantedScope: fosite.Arguments{"mcp:tools"}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := h.as.tokens.GenerateAccessToken(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIntrospectionPersonToken drives /introspect with the access
// token of a person's grant (the code flow), on memory storage and on
// PostgreSQL: besides the token record, what decides whether the person
// may still use the grant is read from their record, in the same
// statement. The person has a full record (name, email, groups, claims, a
// sealed upstream session), of which that check needs three columns.
func BenchmarkIntrospectionPersonToken(b *testing.B) {
	for _, backend := range []string{"memory", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var store storage.Store
			h := newHarness(b, func(c *Config) {
				if backend == "postgres" {
					c.Store = benchPostgres(b)
				}
				store = c.Store
			})
			tok := h.codeFlow("mcp:tools")
			if _, err := store.RecordLogin(context.Background(), &storage.User{Subject: "alice", Name: "Alice Admin", Email: "alice@example.com",
				Groups: []string{"mcp-users", "mcp-admins", "staff"}, Claims: map[string][]string{"groups": {"mcp-users", "mcp-admins"}, "hd": {"example.com"}},
				UpstreamRefresh: make([]byte, 160), LastSeen: time.Now()}); err != nil {
				b.Fatal(err)
			}
			benchHTTP(b, h, "/introspect", url.Values{"token": {tok.AccessToken}}, "rs", rsSecret)
		})
	}
}

// benchPostgres opens a fresh, migrated PostgreSQL schema (skipped without
// AUTHSERVER_TEST_POSTGRES).
func benchPostgres(b *testing.B) *postgres.Store {
	dsn, _ := pgtest.Schema(b)
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkLiveTokenMemory issues b.N client-credentials tokens over HTTP
// (memory storage, tokens unexpired) and reports the live heap they hold
// after a collection, per token ("B/token"): what the memory backend keeps
// for a live token, the record and its share of the maps. Run it with a
// large -benchtime (e.g. 50000x) so the maps' growth averages out.
func BenchmarkLiveTokenMemory(b *testing.B) {
	h := newHarness(b, nil)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// One token first: the client, the status block and the caches.
	if resp, _ := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret); resp.StatusCode != http.StatusOK {
		b.Fatalf("token: %d", resp.StatusCode)
	}
	before := heap()
	benchHTTP(b, h, "/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	b.StopTimer()
	after := heap()
	b.ReportMetric(float64(int64(after)-int64(before))/float64(b.N), "B/token")
	runtime.KeepAlive(h)
}
