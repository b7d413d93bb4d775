package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkGateway compares a tools/call (Streamable HTTP, SSE answers, the
// MCP Go SDK on both ends) made directly to the upstream with the same call
// through the gateway: token verification (cached after the first call),
// scope check, session binding, the filter's parse of request and answer,
// the audit line (JSON, kept in memory) and the proxy hop.
//
//	go test ./cmd/mcpgateway -run '^$' -bench Gateway -benchtime 2000x -count 3
//
// Each iteration makes one direct call and one through the gateway, timed
// apart, so that both see the same machine load (client, gateway and
// upstream share this process and its cores). sequential: one client
// (latency); parallel: 8 x GOMAXPROCS clients, each with a session to
// both. Reported: direct-us and gateway-us per call, added-us (their
// difference), and throughput-ratio: gateway calls/s over direct calls/s
// with the same number of clients in a closed loop, i.e. direct time over
// gateway time.
func BenchmarkGateway(b *testing.B) {
	s := newStack(b, false, baseConfig)
	token := s.token(b, "user-bot")
	connect := func(b *testing.B, url string, rt http.RoundTripper) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		return cs
	}
	timed := func(b *testing.B, cs *mcp.ClientSession, sum *atomic.Int64) {
		start := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
		sum.Add(int64(time.Since(start)))
		if err != nil || res.IsError {
			b.Fatalf("echo: %v %+v", err, res)
		}
	}
	pair := func(b *testing.B) (direct, gateway *mcp.ClientSession) {
		return connect(b, s.up.srv.URL+"/mcp", clientTransport), connect(b, s.resource, bearer{token, clientTransport})
	}
	report := func(b *testing.B, direct, gateway *atomic.Int64) {
		d := float64(direct.Load()) / float64(b.N) / 1e3
		g := float64(gateway.Load()) / float64(b.N) / 1e3
		b.ReportMetric(d, "direct-us")
		b.ReportMetric(g, "gateway-us")
		b.ReportMetric(g-d, "added-us")
		b.ReportMetric(d/g, "throughput-ratio")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("sequential", func(b *testing.B) {
		var direct, gateway atomic.Int64
		dc, gc := pair(b)
		defer dc.Close()
		defer gc.Close()
		for b.Loop() {
			timed(b, dc, &direct)
			timed(b, gc, &gateway)
		}
		report(b, &direct, &gateway)
	})
	b.Run("parallel", func(b *testing.B) {
		var direct, gateway atomic.Int64
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			dc, gc := pair(b)
			defer dc.Close()
			defer gc.Close()
			for pb.Next() {
				timed(b, dc, &direct)
				timed(b, gc, &gateway)
			}
		})
		report(b, &direct, &gateway)
	})
}

// BenchmarkGatewayThroughput measures throughput: 16 clients, each with a
// session to the upstream and one through the gateway, make calls in
// rounds of 16 x 25 calls, alternating direct and gateway rounds so that
// both see the same machine load. For each target it reports calls/s
// (calls over the wall-clock time of its rounds) and cpu-us/call (the
// process's user and system CPU time per call, getrusage; client and
// upstream included). On a machine shared with other work the CPU time is
// steadier than the rates; throughput-ratio is gateway calls/s over direct
// calls/s, cpu-ratio direct cpu-us/call over gateway cpu-us/call (the
// throughput ratio once the CPU is the bottleneck).
//
//	go test ./cmd/mcpgateway -run '^$' -bench GatewayThroughput -benchtime 4000x -count 3
func BenchmarkGatewayThroughput(b *testing.B) {
	s := newStack(b, false, baseConfig)
	token := s.token(b, "user-bot")
	const clients, perRound = 16, 25
	type target struct {
		sessions  []*mcp.ClientSession
		wall, cpu time.Duration
		calls     int
	}
	newTarget := func(url string, rt http.RoundTripper) *target {
		tg := &target{}
		for range clients {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cs.Close() })
			tg.sessions = append(tg.sessions, cs)
		}
		return tg
	}
	direct := newTarget(s.up.srv.URL+"/mcp", clientTransport)
	gateway := newTarget(s.resource, bearer{token, clientTransport})
	round := func(tg *target) {
		start, cpu := time.Now(), cpuTime()
		var wg sync.WaitGroup
		var failed atomic.Value
		for _, cs := range tg.sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perRound {
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
					if err != nil || res.IsError {
						failed.Store(fmt.Sprintf("echo: %v %+v", err, res))
						return
					}
				}
			}()
		}
		wg.Wait()
		if f := failed.Load(); f != nil {
			b.Fatal(f)
		}
		tg.wall += time.Since(start)
		tg.cpu += cpuTime() - cpu
		tg.calls += clients * perRound
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += 2 * clients * perRound {
		round(direct)
		round(gateway)
	}
	rate := func(tg *target) float64 { return float64(tg.calls) / tg.wall.Seconds() }
	perCall := func(tg *target) float64 { return float64(tg.cpu.Microseconds()) / float64(tg.calls) }
	b.ReportMetric(rate(direct), "direct-calls/s")
	b.ReportMetric(rate(gateway), "gateway-calls/s")
	b.ReportMetric(rate(gateway)/rate(direct), "throughput-ratio")
	b.ReportMetric(perCall(direct), "direct-cpu-us/call")
	b.ReportMetric(perCall(gateway), "gateway-cpu-us/call")
	b.ReportMetric(perCall(direct)/perCall(gateway), "cpu-ratio")
	b.ReportMetric(0, "ns/op")
}

// clientTransport is the benchmark clients' transport, the same for the
// direct and the gateway path: http.DefaultTransport keeps only 2 idle
// connections per host, so 16 concurrent clients would open a new
// connection for most calls and measure TCP setup rather than the call.
var clientTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 64
	return t
}()

// cpuTime is the user and system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
