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
	// A gateway binary built elsewhere (another commit, for an A/B run);
	// empty: go build of this package.
	gatewayBin = flag.String("gateway.bin", "", "mcpgateway binary to run (BenchmarkGatewayProcesses); empty: go build")
	// A second gateway binary, run beside the first in front of the same
	// upstream, its rounds interleaved with the others (reported as gw2-).
	gatewayBin2 = flag.String("gateway.bin2", "", "second mcpgateway binary, measured beside the first (BenchmarkGatewayProcesses)")
	// GOMAXPROCS of the gateway process; empty: the Go runtime's default.
	gatewayProcs = flag.String("gateway.gomaxprocs", "", "GOMAXPROCS of the gateway process (BenchmarkGatewayProcesses)")
	// Only one path's rounds after the warm-up (direct, gateway or gw2),
	// so that a profiler or perf stat attached to one process sees one
	// path; empty: all, interleaved.
	onlyPath = flag.String("bench.only", "", "run only the rounds of direct, gateway or gw2 (BenchmarkGatewayProcesses)")
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
// path and their ratio, the CPU time per call of each process (from
// /proc/PID/stat, 10 ms ticks, and getrusage): the gateway's, the
// upstream's on either path, and this process's (the clients) on either
// path; and cpu-ratio, direct CPU per call (clients and upstream) over
// gateway CPU per call (clients, upstream and gateway), the throughput
// ratio once every process shares saturated cores; others-cpu-ratio, the
// same without the gateway's CPU, the bound when the gateway has a core of
// its own that it does not saturate and the others' cores are saturated.
//
// -pin.gateway and -pin.others give the gateway a core of its own;
// -gateway.bin and -gateway.bin2 run prebuilt gateways (two of them side
// by side, their rounds interleaved, for an A/B comparison of builds);
// -gateway.gomaxprocs sets the gateway's GOMAXPROCS; -bench.only runs the
// rounds of one path alone (the others' metrics are then NaN).
//
//	go test ./cmd/mcpgateway -run '^$' -bench GatewayProcesses -benchtime 12000x
//	go test ./cmd/mcpgateway -run '^$' -bench GatewayProcesses -benchtime 12000x -args -pin.gateway 1 -pin.others 0
func BenchmarkGatewayProcesses(b *testing.B) {
	parent := b
	if *pinOthers != "" {
		// Every thread of this process; the upstream inherits it.
		if out, err := exec.Command("taskset", "-a", "-p", "-c", *pinOthers, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			b.Fatalf("taskset: %v %s", err, out)
		}
	}
	gwBin := *gatewayBin
	if gwBin == "" {
		gwBin = filepath.Join(b.TempDir(), "mcpgateway")
		if out, err := exec.Command("go", "build", "-o", gwBin, ".").CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
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

// procStack is an upstream process, one or two gateway processes in front
// of it and sessions of 16 clients to each.
type procStack struct {
	up     *child
	gws    []*child
	direct []*mcp.ClientSession
	viaGW  [][]*mcp.ClientSession
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
	// Every gateway has the resource URI of the first (the tokens' aud) and
	// an address of its own.
	gwAddr := freeport.Addr(parent)
	resource := "http://" + gwAddr + "/mcp"
	issuer := startAS(parent, resource, upURL)
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
	ps.direct = sessions(upURL, clientTransport)
	bins := []string{gwBin}
	if *gatewayBin2 != "" {
		bins = append(bins, *gatewayBin2)
	}
	for i, bin := range bins {
		addr := gwAddr
		if i > 0 {
			addr = freeport.Addr(parent)
		}
		cfgPath := filepath.Join(parent.TempDir(), "mcpgateway.yaml")
		cfg := strings.NewReplacer("ISSUER", issuer, "RESOURCE", resource, "UPSTREAM", upURL).Replace(baseConfig)
		cfg = strings.Replace(cfg, "listen: 127.0.0.1:0", "listen: "+addr, 1)
		cfg = strings.Replace(cfg, "audit: {format: json}", fmt.Sprintf("audit: {format: json, file: %q}", filepath.Join(parent.TempDir(), "audit.jsonl")), 1)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
		var env []string
		if *gatewayProcs != "" {
			env = append(env, "GOMAXPROCS="+*gatewayProcs)
		}
		ps.gws = append(ps.gws, startChild(parent, *pinGateway, env, bin, "--config", cfgPath))
		ps.viaGW = append(ps.viaGW, sessions("http://"+addr+"/mcp", bearer{token, clientTransport}))
	}
	return ps
}

func benchProcesses(b *testing.B, ps *procStack) {
	const clients, perRound = 16, 25
	type target struct {
		sessions []*mcp.ClientSession
		gw       *child // nil: direct
		wall     time.Duration
		self, up time.Duration
		gwCPU    time.Duration
		calls    int
	}
	targets := []*target{{sessions: ps.direct}}
	for i, gw := range ps.gws {
		targets = append(targets, &target{sessions: ps.viaGW[i], gw: gw})
	}
	round := func(tg *target) {
		var gw0 time.Duration
		if tg.gw != nil {
			gw0 = tg.gw.cpu(b)
		}
		start, self, up := time.Now(), cpuTime(), ps.up.cpu(b)
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
		tg.up += ps.up.cpu(b) - up
		if tg.gw != nil {
			tg.gwCPU += tg.gw.cpu(b) - gw0
		}
		tg.calls += clients * perRound
	}
	for _, tg := range targets { // warm every path: connections, the gateways' key caches
		round(tg)
		*tg = target{sessions: tg.sessions, gw: tg.gw}
	}
	measured := targets
	if *onlyPath != "" {
		i := map[string]int{"direct": 0, "gateway": 1, "gw2": 2}[*onlyPath]
		if i == 0 && *onlyPath != "direct" || i >= len(targets) {
			b.Fatalf("-bench.only %q: want direct, gateway or gw2 (with -gateway.bin2)", *onlyPath)
		}
		measured = targets[i : i+1]
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += len(measured) * clients * perRound {
		for _, tg := range measured {
			round(tg)
		}
	}
	rate := func(tg *target) float64 { return float64(tg.calls) / tg.wall.Seconds() }
	us := func(d time.Duration, tg *target) float64 { return float64(d.Microseconds()) / float64(tg.calls) }
	direct := targets[0]
	b.ReportMetric(rate(direct), "direct-calls/s")
	b.ReportMetric(us(direct.up, direct), "up-cpu-us/direct-call")
	b.ReportMetric(us(direct.self, direct), "client-cpu-us/direct-call")
	for i, tg := range targets[1:] {
		name := "gateway"
		if i > 0 {
			name = "gw2"
		}
		b.ReportMetric(rate(tg), name+"-calls/s")
		b.ReportMetric(rate(tg)/rate(direct), name+"-throughput-ratio")
		b.ReportMetric(us(tg.gwCPU, tg), name+"-cpu-us/call")
		b.ReportMetric(us(tg.up, tg), "up-cpu-us/"+name+"-call")
		b.ReportMetric(us(tg.self, tg), "client-cpu-us/"+name+"-call")
		// The throughput ratio once CPU is the bound and every process
		// shares it: direct CPU per call over gateway CPU per call.
		b.ReportMetric(us(direct.self+direct.up, direct)/us(tg.self+tg.up+tg.gwCPU, tg), name+"-cpu-ratio")
		// The same with the gateway on a core of its own that it does not
		// saturate: only the clients' and the upstream's CPU bound.
		b.ReportMetric(us(direct.self+direct.up, direct)/us(tg.self+tg.up, tg), name+"-others-cpu-ratio")
	}
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
