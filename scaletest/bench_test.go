package scaletest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcpauth/mcpauth/scaletest/load"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// Benchmarks of the served binary, 32 connections:
//
//	go test -run XXX -bench Served -benchtime 20000x ./scaletest
//
// PostgreSQL needs AUTHSERVER_TEST_POSTGRES (a fresh database per run is
// created next to it). -scale.cpuprofile DIR writes a CPU profile of the
// server for each benchmark into DIR (the binary is then built with a
// loopback-only pprof listener added by a build overlay; the sources and
// the shipped binary have none).
var (
	pprofFlag      = flag.Bool("scale.pprof", false, "build the authserver with a loopback pprof listener (set by -scale.cpuprofile)")
	cpuProfileFlag = flag.String("scale.cpuprofile", "", "directory for CPU profiles of the server under benchmark load")
	connsFlag      = flag.Int("scale.conns", 32, "connections of the benchmark load")
	pgDirectFlag   = flag.Bool("scale.pgdirect", false, "connect the server to PostgreSQL directly, without the counting proxy (throughput without the proxy's hop)")
)

// overlaySource adds a debug listener to cmd/authserver at build time, only
// for profiling and measuring benchmarks: it serves on SCALETEST_DEBUG_LISTEN
// (loopback only) /cpu/start?file=F and /cpu/stop around the timed phase, and
// /heap, the bytes of live heap after a collection (runtime.MemStats.HeapAlloc).
const overlaySource = `package main

import (
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
)

func init() {
	addr := os.Getenv("SCALETEST_DEBUG_LISTEN")
	host, _, err := net.SplitHostPort(addr)
	if addr == "" || err != nil || host != "127.0.0.1" {
		return
	}
	var mu sync.Mutex
	var f *os.File
	mux := http.NewServeMux()
	mux.HandleFunc("/cpu/start", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var err error
		if f, err = os.Create(r.URL.Query().Get("file")); err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	mux.HandleFunc("/cpu/stop", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		pprof.StopCPUProfile()
		if f != nil {
			f.Close()
			f = nil
		}
	})
	mux.HandleFunc("/heap", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.Write([]byte(strconv.FormatUint(ms.HeapAlloc, 10)))
	})
	go http.ListenAndServe(addr, mux)
}
`

func writeOverlay(dir string) (string, error) {
	src := filepath.Join(dir, "zz_scaletest_pprof.go")
	if err := os.WriteFile(src, []byte(overlaySource), 0o600); err != nil {
		return "", err
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	target := filepath.Join(filepath.Dir(wd), "cmd", "authserver", "zz_scaletest_pprof.go")
	overlay := filepath.Join(dir, "overlay.json")
	js := fmt.Sprintf(`{"Replace":{%q:%q}}`, target, src)
	return overlay, os.WriteFile(overlay, []byte(js), 0o600)
}

// pgCounter is a TCP proxy in front of PostgreSQL that reads the frontend
// protocol of every connection and counts:
//   - round trips: each Sync (extended protocol) or Query (simple protocol)
//     message ends a request the client then waits on;
//   - statements executed, by their SQL (Bind names a statement prepared by
//     an earlier Parse; a Query carries its text);
//   - durable commits: COMMITs of explicit transactions plus write
//     statements run outside one (each its own transaction).
type pgCounter struct {
	ln      net.Listener
	target  string
	trips   atomic.Int64
	commits atomic.Int64

	mu    sync.Mutex
	stmts map[string]int64 // normalized SQL -> executions
}

func newPGCounter(tb testing.TB, target string) *pgCounter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &pgCounter{ln: ln, target: target, stmts: map[string]int64{}}
	go p.serve()
	tb.Cleanup(func() { ln.Close() })
	return p
}

// snapshot copies the statement counts.
func (p *pgCounter) snapshot() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.stmts))
	for k, v := range p.stmts {
		out[k] = v
	}
	return out
}

func (p *pgCounter) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.relay(c)
	}
}

// normalize shortens SQL to a readable key.
func normalize(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 90 {
		s = s[:90] + "..."
	}
	return s
}

func isWrite(sql string) bool {
	w, _, _ := strings.Cut(strings.TrimSpace(strings.ToLower(sql)), " ")
	return w == "insert" || w == "update" || w == "delete" || w == "with"
}

func (p *pgCounter) relay(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { io.Copy(c, s); c.Close() }()
	r := bufio.NewReaderSize(c, 32<<10)
	// Startup, SSLRequest and GSSENCRequest: length, then a code; no type byte.
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		code := binary.BigEndian.Uint32(hdr[4:])
		rest := make([]byte, int(n)-8)
		if _, err := io.ReadFull(r, rest); err != nil {
			return
		}
		if _, err := s.Write(append(hdr[:], rest...)); err != nil {
			return
		}
		if code != 80877103 && code != 80877104 {
			break
		}
	}
	prepared := map[string]string{} // statement name -> SQL
	inTx := false
	count := func(sql string) {
		key := normalize(sql)
		low := strings.ToLower(key)
		switch {
		case strings.HasPrefix(low, "begin"):
			inTx = true
		case strings.HasPrefix(low, "commit"):
			inTx = false
			p.commits.Add(1)
		case strings.HasPrefix(low, "rollback"):
			inTx = false
		case !inTx && isWrite(low):
			p.commits.Add(1)
		}
		p.mu.Lock()
		p.stmts[key]++
		p.mu.Unlock()
	}
	buf := make([]byte, 0, 4096)
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[1:]))
		if cap(buf) < n+1 {
			buf = make([]byte, 0, n+1)
		}
		msg := buf[:n+1]
		copy(msg, hdr[:])
		if _, err := io.ReadFull(r, msg[5:]); err != nil {
			return
		}
		body := msg[5:]
		switch hdr[0] {
		case 'S':
			p.trips.Add(1)
		case 'Q':
			p.trips.Add(1)
			q, _, _ := strings.Cut(string(body), "\x00")
			count(q)
		case 'P': // Parse: name, query
			parts := strings.SplitN(string(body), "\x00", 3)
			if len(parts) >= 2 {
				prepared[parts[0]] = parts[1]
			}
		case 'B': // Bind: portal, statement
			parts := strings.SplitN(string(body), "\x00", 3)
			if len(parts) >= 2 {
				count(prepared[parts[1]])
			}
		}
		if _, err := s.Write(msg); err != nil {
			return
		}
	}
}

// benchDB creates a fresh database next to AUTHSERVER_TEST_POSTGRES and
// drops it afterwards; dsnVia returns its URL through another host:port.
func benchDB(b testing.TB) (dsnVia func(hostport string) string, backends func() []int) {
	base := pgtest.BaseDSN(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		b.Fatal(err)
	}
	rb := make([]byte, 6)
	rand.Read(rb)
	name := "scalebench_" + hex.EncodeToString(rb)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
		conn.Close(context.Background())
	})
	u, _ := url.Parse(base)
	dsnVia = func(hostport string) string {
		v := *u
		v.Host = hostport
		v.Path = "/" + name
		return v.String()
	}
	backends = func() []int {
		rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1", name)
		if err != nil {
			b.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			b.Fatal(err)
		}
		out := make([]int, len(pids))
		for i, p := range pids {
			out[i] = int(p)
		}
		slices.Sort(out)
		return out
	}
	return dsnVia, backends
}

func BenchmarkServed(b *testing.B) {
	if *cpuProfileFlag != "" {
		*pprofFlag = true
	}
	backends := []struct {
		name    string
		storage func(b *testing.B) (string, *pgCounter, func() []int)
	}{
		{"memory", func(*testing.B) (string, *pgCounter, func() []int) { return "memory", nil, nil }},
		{"sqlite", func(b *testing.B) (string, *pgCounter, func() []int) {
			return "sqlite:" + filepath.Join(b.TempDir(), "auth.db"), nil, nil
		}},
		{"postgres", func(b *testing.B) (string, *pgCounter, func() []int) {
			dsnVia, backends := benchDB(b)
			base, _ := url.Parse(pgtest.BaseDSN(b))
			if *pgDirectFlag {
				return dsnVia(base.Host), nil, backends
			}
			counter := newPGCounter(b, base.Host)
			return dsnVia(counter.ln.Addr().String()), counter, backends
		}},
	}
	grants := []load.Grant{load.ClientCredentials, load.AuthorizationCode, load.Refresh, load.Introspection}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			storage, counter, backends := be.storage(b)
			in := newInstance(b, conf{storage: storage})
			var env []string
			debug := ""
			if *pprofFlag {
				debug = freeAddr(b)
				env = append(env, "SCALETEST_DEBUG_LISTEN="+debug)
			}
			if !in.start(b, env...) {
				b.FailNow()
			}
			for _, g := range grants {
				b.Run(string(g), func(b *testing.B) {
					runLoad(b, in, g, debug, counter, backends)
				})
			}
		})
	}
}

// cpuTicks is the user+system CPU time of the processes whose pid passes
// keep, in clock ticks (USER_HZ, 100 per second on Linux), from /proc.
func cpuTicks(keep func(pid int, comm string) bool) int64 {
	entries, _ := os.ReadDir("/proc")
	var sum int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... field 14 utime, 15 stime.
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		if !keep(pid, s[open+1:close]) {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + st
	}
	return sum
}

// cpuSplit samples the CPU time of the server, this process (the load
// generator) and the PostgreSQL backends serving the server's database
// (pgs; the shared WAL writer and checkpointer are not counted).
type cpuSplit struct{ server, loadgen, postgres int64 }

func sampleCPU(serverPID int, pgs []int) cpuSplit {
	self := os.Getpid()
	var c cpuSplit
	c.server = cpuTicks(func(pid int, _ string) bool { return pid == serverPID })
	c.loadgen = cpuTicks(func(pid int, _ string) bool { return pid == self })
	c.postgres = cpuTicks(func(pid int, _ string) bool { return slices.Contains(pgs, pid) })
	return c
}

func runLoad(b *testing.B, in *instance, g load.Grant, debug string, counter *pgCounter, pgBackends func() []int) {
	backend := "memory"
	if pgBackends != nil {
		backend = "postgres"
	} else if strings.HasPrefix(in.storage, "sqlite:") {
		backend = "sqlite"
	}
	cfg := load.Config{
		Issuer: in.issuer, Grant: g, Connections: *connsFlag, Requests: b.N,
		ClientID: botID, ClientSecret: botSecret, Scope: "mcp:tools", Resource: resource,
		PublicClientID: appID, RedirectURI: redirectURI, Username: username, Password: userPass,
	}
	var trips0, commits0 int64
	var stmts0 map[string]int64
	var cpu0 cpuSplit
	var pgs []int
	profiling := *cpuProfileFlag != "" && debug != "" && b.N > 1
	cfg.Ready = func() {
		if counter != nil {
			trips0, commits0, stmts0 = counter.trips.Load(), counter.commits.Load(), counter.snapshot()
		}
		if profiling {
			file, _ := filepath.Abs(filepath.Join(*cpuProfileFlag, fmt.Sprintf("%s-%s.pprof", backend, g)))
			resp, err := http.Get("http://" + debug + "/cpu/start?file=" + url.QueryEscape(file))
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("starting the server's CPU profile: %v %v", err, resp)
			}
			resp.Body.Close()
		}
		if pgBackends != nil {
			pgs = pgBackends()
		}
		cpu0 = sampleCPU(in.cmd.Process.Pid, pgs)
		b.ResetTimer()
	}
	res, err := load.Run(context.Background(), cfg)
	b.StopTimer()
	// Backends the pool opened during the run count from zero.
	var pgs1 []int
	if pgBackends != nil {
		pgs1 = pgBackends()
		for _, p := range pgs {
			if !slices.Contains(pgs1, p) {
				pgs1 = append(pgs1, p)
				b.Log("a PostgreSQL connection closed during the run: its CPU time is not counted")
			}
		}
	}
	cpu1 := sampleCPU(in.cmd.Process.Pid, pgs1)
	if profiling {
		if resp, err := http.Get("http://" + debug + "/cpu/stop"); err == nil {
			resp.Body.Close()
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	if counter != nil {
		n := float64(res.Requests)
		b.ReportMetric(float64(counter.trips.Load()-trips0)/n, "roundtrips/op")
		b.ReportMetric(float64(counter.commits.Load()-commits0)/n, "commits/op")
		if b.N > 1 {
			var lines []string
			for sql, c := range counter.snapshot() {
				if d := c - stmts0[sql]; d > 0 {
					lines = append(lines, fmt.Sprintf("%6.3f  %s", float64(d)/n, sql))
				}
			}
			slices.Sort(lines)
			b.Logf("statements per request:\n%s", strings.Join(lines, "\n"))
		}
	}
	// CPU per request in µs (1 tick = 10 ms).
	perOp := func(d int64) float64 { return float64(d) * 1e4 / float64(res.Requests) }
	b.ReportMetric(perOp(cpu1.server-cpu0.server), "server-cpu-us/op")
	b.ReportMetric(perOp(cpu1.loadgen-cpu0.loadgen), "loadgen-cpu-us/op")
	if backend == "postgres" {
		b.ReportMetric(perOp(cpu1.postgres-cpu0.postgres), "pg-cpu-us/op")
	}
	b.ReportMetric(res.PerSecond, "req/s")
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
	if res.Errors > 0 {
		b.Fatalf("%d of %d requests failed: %s", res.Errors, res.Requests, res.FirstError)
	}
	if b.N > 1 {
		b.Log(strings.TrimSpace(res.String()))
	}
}
