package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/internal/freeport"
)

// Processes of BenchmarkGatewayProcesses may be pinned to CPUs (taskset -c
// lists): the gateway to one set, this process (the clients and the
// in-process AS) and the upstream to another, as when the gateway has a
// core of its own. Empty: no pinning.
var (
	pinGateway = flag.String("pin.gateway", "", "taskset CPU list for the gateway process (BenchmarkGatewayProcesses)")
	pinOthers  = flag.String("pin.others", "", "taskset CPU list for the clients and the upstream (BenchmarkGatewayProcesses)")
)

// benchUpstreamEnv makes the test binary serve the Go SDK upstream of
// newUpstream on the address it names, instead of running tests.
const benchUpstreamEnv = "MCPGATEWAY_BENCH_UPSTREAM"

func TestMain(m *testing.M) {
	if addr := os.Getenv(benchUpstreamEnv); addr != "" {
		serveGoUpstream(addr)
		return
	}
	os.Exit(m.Run())
}

// serveGoUpstream serves the Go SDK MCP server of the tests (echo and
// admin_stats, SSE answers) and prints "listening on ADDR".
func serveGoUpstream(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: goUpstreamHandler(false)}
	_ = srv.Serve(ln)
}

// BenchmarkGatewayProcesses measures the gateway as it is deployed: the
// mcpgateway binary (built by go build) in a process of its own, in front of
// an upstream in another process, the MCP Go SDK's clients in this one (with
// the AS, which is idle once the gateway has the signing key). Upstreams:
// go, the Go SDK server of the other tests (this test binary, started
// again); ts, the TypeScript SDK server of e2e/testdata/tsserver (node; run
// npm ci there first). Audit lines go to a file.
//
// As in BenchmarkGatewayThroughput, 16 clients with a session each to the
// upstream and through the gateway call the echo tool in rounds of 16 x 25
// calls, direct and gateway rounds alternating. Reported: calls/s of each
// path and their ratio, and the CPU time per call of each process (from
// /proc/PID/stat and getrusage): the gateway's, the upstream's on either
// path, and this process's (the clients) on either path.
//
//	go test ./cmd/mcpgateway -run '^$' -bench GatewayProcesses -benchtime 8000x
//	go test ./cmd/mcpgateway -run '^$' -bench GatewayProcesses -benchtime 8000x -args -pin.gateway 1 -pin.others 0
func BenchmarkGatewayProcesses(b *testing.B) {
	parent := b
	if *pinOthers != "" {
		// Every thread of this process; the upstream inherits it.
		if out, err := exec.Command("taskset", "-a", "-p", "-c", *pinOthers, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			b.Fatalf("taskset: %v %s", err, out)
		}
	}
	gwBin := filepath.Join(b.TempDir(), "mcpgateway")
	if out, err := exec.Command("go", "build", "-o", gwBin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, up := range []string{"go", "ts"} {
		var ps *procStack
		b.Run("upstream="+up, func(b *testing.B) {
			if ps == nil {
				// Started once for the sub-benchmark's runs, stopped with
				// the parent.
				ps = startProcStack(b, parent, gwBin, up)
			}
			benchProcesses(b, ps)
		})
	}
}

// procStack is an upstream process, a gateway process in front of it and
// sessions of 16 clients to each.
type procStack struct {
	up, gw          *child
	direct, gateway []*mcp.ClientSession
}

func startProcStack(b *testing.B, parent *testing.B, gwBin, up string) *procStack {
	ps := &procStack{}
	switch up {
	case "go":
		ps.up = startChild(parent, "", []string{benchUpstreamEnv + "=127.0.0.1:0"}, os.Args[0])
	case "ts":
		dir := filepath.Join("..", "..", "e2e", "testdata", "tsserver")
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
			b.Skip("the TypeScript MCP SDK is not installed: (cd e2e/testdata/tsserver && npm ci)")
		}
		ps.up = startChild(parent, "", []string{"PORT=0", "JSON_RESPONSE=0"}, "node", filepath.Join(dir, "server.mjs"))
	}
	upURL := "http://" + ps.up.addr + "/mcp"
	gwAddr := freeport.Addr(parent)
	resource := "http://" + gwAddr + "/mcp"
	issuer := startAS(parent, resource, upURL)
	cfgPath := filepath.Join(parent.TempDir(), "mcpgateway.yaml")
	cfg := strings.NewReplacer("ISSUER", issuer, "RESOURCE", resource, "UPSTREAM", upURL).Replace(baseConfig)
	cfg = strings.Replace(cfg, "listen: 127.0.0.1:0", "listen: "+gwAddr, 1)
	cfg = strings.Replace(cfg, "audit: {format: json}", fmt.Sprintf("audit: {format: json, file: %q}", filepath.Join(parent.TempDir(), "audit.jsonl")), 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	ps.gw = startChild(parent, *pinGateway, nil, gwBin, "--config", cfgPath)
	token := issueToken(b, issuer, resource, "user-bot")
	sessions := func(url string, rt http.RoundTripper) []*mcp.ClientSession {
		var out []*mcp.ClientSession
		for range 16 {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			parent.Cleanup(func() { cs.Close() })
			out = append(out, cs)
		}
		return out
	}
	ps.direct, ps.gateway = sessions(upURL, clientTransport), sessions(resource, bearer{token, clientTransport})
	return ps
}

func benchProcesses(b *testing.B, ps *procStack) {
	upProc, gwProc := ps.up, ps.gw
	const clients, perRound = 16, 25
	type target struct {
		sessions     []*mcp.ClientSession
		wall         time.Duration
		self, up, gw time.Duration
		calls        int
	}
	direct, gateway := &target{sessions: ps.direct}, &target{sessions: ps.gateway}
	round := func(tg *target) {
		start, self, up, gw := time.Now(), cpuTime(), upProc.cpu(b), gwProc.cpu(b)
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
		tg.self += cpuTime() - self
		tg.up += upProc.cpu(b) - up
		tg.gw += gwProc.cpu(b) - gw
		tg.calls += clients * perRound
	}
	round(direct) // warm both paths: connections, the gateway's key cache
	round(gateway)
	*direct, *gateway = target{sessions: ps.direct}, target{sessions: ps.gateway}
	b.ResetTimer()
	for done := 0; done < b.N; done += 2 * clients * perRound {
		round(direct)
		round(gateway)
	}
	rate := func(tg *target) float64 { return float64(tg.calls) / tg.wall.Seconds() }
	us := func(d time.Duration, tg *target) float64 { return float64(d.Microseconds()) / float64(tg.calls) }
	b.ReportMetric(rate(direct), "direct-calls/s")
	b.ReportMetric(rate(gateway), "gateway-calls/s")
	b.ReportMetric(rate(gateway)/rate(direct), "throughput-ratio")
	b.ReportMetric(us(gateway.gw, gateway), "gw-cpu-us/call")
	b.ReportMetric(us(direct.up, direct), "up-cpu-us/direct-call")
	b.ReportMetric(us(gateway.up, gateway), "up-cpu-us/gw-call")
	b.ReportMetric(us(direct.self, direct), "client-cpu-us/direct-call")
	b.ReportMetric(us(gateway.self, gateway), "client-cpu-us/gw-call")
	b.ReportMetric(0, "ns/op")
}

// child is a process started for a benchmark, listening on addr.
type child struct {
	cmd  *exec.Cmd
	addr string
}

var listeningOn = "listening on "

// startChild starts name (under taskset -c cpus when cpus is set) and waits
// for the line naming its address: "listening on ADDR" or mcpgateway's
// "addr=ADDR".
func startChild(tb testing.TB, cpus string, env []string, name string, args ...string) *child {
	tb.Helper()
	if cpus != "" {
		args = append([]string{"-c", cpus, name}, args...)
		name = "taskset"
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			a := ""
			if _, rest, ok := strings.Cut(line, listeningOn); ok {
				a = strings.Fields(rest)[0]
			} else if _, rest, ok := strings.Cut(line, "mcpgateway: listening\" addr="); ok {
				a = strings.Fields(rest)[0]
			}
			if a != "" && !sent {
				addr <- a
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case a := <-addr:
		return &child{cmd: cmd, addr: a}
	case <-time.After(60 * time.Second):
		tb.Fatalf("%s: not listening after 60 s", name)
	}
	return nil
}

// cpu is the user and system CPU time the process has used so far.
func (c *child) cpu(tb testing.TB) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) in parentheses:
	// utime and stime are fields 14 and 15, in clock ticks (100 per second
	// on Linux).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
