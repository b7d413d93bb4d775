package dcr_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// BenchmarkRegisterHTTP measures public-client registrations per second over
// real HTTP with 32 concurrent connections on memory storage.
func BenchmarkRegisterHTTP(b *testing.B) {
	e := newEnv(b, defaultPolicy()) // rate limit off
	const conns = 32
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	body := `{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`
	var failed atomic.Int64
	b.SetParallelism((conns + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(e.srv.URL+"/register", "application/json", strings.NewReader(body))
			if err != nil {
				failed.Add(1)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d registrations failed", failed.Load())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "registrations/s")
}

// BenchmarkCIMDResolveWarm measures resolving a cached metadata document: the
// cost the AS pays per request for a CIMD client.
func BenchmarkCIMDResolveWarm(b *testing.B) {
	d := newDocServer(b)
	re := newResolver(b, d, nil)
	id := d.serve("/bench.json", claudeDoc(), "max-age=3600")
	ctx := context.Background()
	if _, err := re.r.ResolveClient(ctx, id); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := re.r.ResolveClient(ctx, id); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStoredClientLookup is the baseline: a client looked up in memory
// storage, as the AS does for registered clients.
func BenchmarkStoredClientLookup(b *testing.B) {
	s := memory.New()
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		s.CreateClient(ctx, &storage.Client{ID: fmt.Sprintf("c%d", i), Source: "dcr", Name: "Claude",
			RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"}, GrantTypes: []string{"authorization_code", "refresh_token"},
			Scopes: []string{"mcp:read", "mcp:write"}, Resources: []string{"https://mcp.example.com/mcp"}, Metadata: []byte(`{"client_name":"Claude"}`)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.GetClient(ctx, "c500"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
