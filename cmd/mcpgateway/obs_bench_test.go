package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/internal/auditchain"
	"github.com/mcpauth/mcpauth/internal/otelsetup"
	"github.com/mcpauth/mcpauth/internal/otlptest"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// BenchmarkAuditLine prices one tools/call's audit step: the JSON line
// alone (plain), with its chain (chained: HMAC-SHA256 under the lock of the
// write), and with the metrics counted from the event too (chained+metrics).
//
//	go test ./cmd/mcpgateway -run '^$' -bench AuditLine -count 3
func BenchmarkAuditLine(b *testing.B) {
	e := rsmiddleware.AuditEvent{Time: time.Now(), Event: "tool.call", Method: "tools/call", Tool: "echo", RequestID: "7",
		Session: "3f2a.c0ffee", Subject: "user-bot", ClientID: "user-bot", Tenant: "acme",
		ArgsSHA256: strings.Repeat("ab", 32), Result: rsmiddleware.AuditOK, Status: 200, Latency: 1234 * time.Microsecond}
	key, _ := auditchain.DeriveKey([]byte(chainKey), ChainPurpose)
	for _, mode := range []string{"plain", "chained", "chained+metrics"} {
		b.Run(mode, func(b *testing.B) {
			var w io.Writer = io.Discard
			if mode != "plain" {
				w = auditchain.NewWriter(io.Discard, key, auditchain.JSON).Chained()
			}
			audit := rsmiddleware.AuditLog(w, "json")
			if mode == "chained+metrics" {
				m, write := newMetrics([]string{"echo"}), audit
				audit = func(e rsmiddleware.AuditEvent) { m.audit(e); write(e) }
			}
			b.ReportAllocs()
			for b.Loop() {
				audit(e)
			}
		})
	}
}

// BenchmarkGatewayObservability compares the process CPU per tools/call
// through a gateway without metrics and chain (plain) and through one with
// metrics.listen and audit.chain_key (observed), 16 clients each, in
// alternating rounds of 16 x 25 calls so that both see the same machine
// load. The CPU (getrusage) includes the clients and the upstream, the
// same on both sides: added-cpu-us/call is what metrics and chain cost.
//
//	go test ./cmd/mcpgateway -run '^$' -bench GatewayObservability -benchtime 4000x -count 3
func BenchmarkGatewayObservability(b *testing.B) {
	observed := strings.Replace(baseConfig, "audit: {format: json}", "audit: {format: json, chain_key: "+chainKey+"}", 1) +
		"metrics: {listen: \"127.0.0.1:0\"}\n"
	compareGateways(b, "observed", newStack(b, false, baseConfig), newStack(b, false, observed))
}

// BenchmarkGatewayTracing is BenchmarkGatewayObservability for traces: a
// gateway without a TracerProvider (plain) against one exporting OTLP/HTTP
// to a receiver in the process (traced), the sampler
// parentbased_traceidratio at 1% and at 100%, batched as by default.
//
//	go test ./cmd/mcpgateway -run '^$' -bench GatewayTracing -benchtime 16000x -count 3
func BenchmarkGatewayTracing(b *testing.B) {
	for _, ratio := range []string{"0.01", "1"} {
		b.Run("ratio="+ratio, func(b *testing.B) {
			rc := otlptest.New(b)
			b.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
			b.Setenv("OTEL_TRACES_SAMPLER_ARG", ratio)
			p, err := otelsetup.New(context.Background(), "mcpgateway", func(k string) (string, bool) {
				if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
					return rc.URL(), true
				}
				return "", false
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
			compareGateways(b, "traced", newStack(b, false, baseConfig), newStackTraced(b, false, baseConfig, p.TracerProvider))
		})
	}
}

// compareGateways measures the process CPU per tools/call through plain
// and other, 16 clients each, in alternating rounds of 16 x 25 calls so
// that both see the same machine load, and reports plain-cpu-us/call,
// NAME-cpu-us/call and added-cpu-us/call.
func compareGateways(b *testing.B, name string, plainStack, otherStack *stack) {
	const clients, perRound = 16, 25
	type target struct {
		sessions []*mcp.ClientSession
		cpu      time.Duration
		calls    int
	}
	newTarget := func(s *stack) *target {
		token := s.token(b, "user-bot")
		tg := &target{}
		for range clients {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: s.resource, HTTPClient: &http.Client{Transport: bearer{token, clientTransport}}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cs.Close() })
			tg.sessions = append(tg.sessions, cs)
		}
		return tg
	}
	plain, obs := newTarget(plainStack), newTarget(otherStack)
	round := func(tg *target) {
		cpu := cpuTime()
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
		tg.cpu += cpuTime() - cpu
		tg.calls += clients * perRound
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += 2 * clients * perRound {
		round(plain)
		round(obs)
	}
	perCall := func(tg *target) float64 { return float64(tg.cpu.Microseconds()) / float64(tg.calls) }
	b.ReportMetric(perCall(plain), "plain-cpu-us/call")
	b.ReportMetric(perCall(obs), name+"-cpu-us/call")
	b.ReportMetric(perCall(obs)-perCall(plain), "added-cpu-us/call")
	b.ReportMetric(0, "ns/op")
}
