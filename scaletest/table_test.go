package scaletest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/scaletest/load"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

var (
	tableDurationFlag = flag.Duration("scale.d", 8*time.Second, "duration of each timed row of BenchmarkTable")
	tableCodesFlag    = flag.Int("scale.codes", 12000, "codes minted and redeemed by the code-redemption row of BenchmarkTable")
	tableRowsFlag     = flag.String("scale.rows", "", "comma-separated parts of row names: BenchmarkTable measures only the rows whose name contains one (trivial rows always); empty: every row")
)

// trivialEnv names the variable that turns the test binary into the
// trivial JSON handler of BenchmarkTable (see serveTrivial).
const trivialEnv = "SCALETEST_TRIVIAL_LISTEN"

// serveTrivial serves, on addr, the least an OAuth token endpoint can be:
// RFC 8414 metadata naming /token and /introspect, and on both a form
// parsed, Basic credentials read and a small JSON object encoded with
// encoding/json. It is the reference the rows of BenchmarkTable are
// divided by: the cost of an HTTP request and a JSON answer on this
// machine, served by a process of its own like the authserver.
func serveTrivial(addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{
			"issuer":                 "http://" + addr,
			"token_endpoint":         "http://" + addr + "/token",
			"introspection_endpoint": "http://" + addr + "/introspect",
		})
	})
	type answer struct {
		AccessToken string `json:"access_token,omitempty"`
		TokenType   string `json:"token_type,omitempty"`
		ExpiresIn   int    `json:"expires_in,omitempty"`
		Active      bool   `json:"active,omitempty"`
	}
	reply := func(w http.ResponseWriter, r *http.Request, a answer) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		if _, _, ok := r.BasicAuth(); !ok {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		b, _ := json.Marshal(a)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(b)
	}
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, answer{AccessToken: "trivial", TokenType: "Bearer", ExpiresIn: 3600})
	})
	mux.HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, answer{Active: true})
	})
	return http.ListenAndServe(addr, mux)
}

// startTrivial runs this test binary as the trivial handler and returns its
// issuer URL and process id.
func startTrivial(b *testing.B) (string, int) {
	addr := freeAddr(b)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), trivialEnv+"="+addr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 300; i++ {
		resp, err := http.Get("http://" + addr + "/.well-known/oauth-authorization-server")
		if err == nil {
			resp.Body.Close()
			return "http://" + addr, cmd.Process.Pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatal("the trivial handler did not start")
	return "", 0
}

// tableRowSelected reports whether -scale.rows selects the row name.
func tableRowSelected(name string) bool {
	if *tableRowsFlag == "" {
		return true
	}
	for _, part := range strings.Split(*tableRowsFlag, ",") {
		if part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// loadAverage is the one-minute load average (/proc/loadavg).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// tableRow is one measured line of BenchmarkTable.
type tableRow struct {
	name                 string
	perSecond            float64
	server, loadgen, pg  float64 // CPU µs per request
	load                 string  // load average when the row started
	trivial              bool
	bytesPerToken        float64
	errors, requests     int
	firstError           string
	hasPG, hasBytesToken bool
}

// liveHeap asks the server's debug listener for its live heap in bytes.
func liveHeap(b *testing.B, debug string) float64 {
	resp, err := http.Get("http://" + debug + "/heap")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n, err := strconv.ParseFloat(string(body), 64)
	if err != nil {
		b.Fatalf("heap: %q", body)
	}
	return n
}

// BenchmarkTable prints, in one run, the throughput of the served
// authserver binary on each path the performance targets name, beside a
// trivial JSON handler measured between them (see serveTrivial), with the
// CPU time per request of server, load generator and PostgreSQL backends,
// the live heap per token of the memory backend, and the load average at
// the start of each row:
//
//	AUTHSERVER_TEST_POSTGRES=... go test -run '^$' -bench '^BenchmarkTable$' -benchtime 1x ./scaletest
//
// scripts/benchtable runs it together with the middleware's verification
// benchmarks. Each row lasts -scale.d (the code row redeems -scale.codes
// codes minted beforehand); -scale.rows keeps only the rows whose name
// contains one of its comma-separated parts. Shares are of the mean of the
// trivial rows.
func BenchmarkTable(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once; use -benchtime 1x")
	}
	*pprofFlag = true
	trivialIssuer, trivialPID := startTrivial(b)

	start := func(storage string) (*instance, string) {
		in := newInstance(b, conf{storage: storage})
		debug := freeAddr(b)
		if !in.start(b, "SCALETEST_DEBUG_LISTEN="+debug) {
			b.FailNow()
		}
		return in, debug
	}
	mem, memDebug := start("memory")
	sqlite, _ := start("sqlite:" + filepath.Join(b.TempDir(), "auth.db"))
	var pg *instance
	var pgBackends func() []int
	if os.Getenv(pgtest.EnvVar) != "" {
		dsnVia, backends := benchDB(b)
		base, _ := url.Parse(pgtest.BaseDSN(b))
		pg, _ = start(dsnVia(base.Host))
		pgBackends = backends
	}

	var rows []tableRow
	measure := func(name, issuer string, pid int, g load.Grant, requests int, pgs func() []int, heapDebug string) {
		if issuer != trivialIssuer && !tableRowSelected(name) {
			return
		}
		cfg := load.Config{
			Issuer: issuer, Grant: g, Connections: *connsFlag, Duration: *tableDurationFlag, Requests: requests,
			ClientID: botID, ClientSecret: botSecret, Scope: "mcp:tools", Resource: resource,
			PublicClientID: appID, RedirectURI: redirectURI, Username: username, Password: userPass,
		}
		if issuer == trivialIssuer {
			cfg.Scope, cfg.Resource = "", ""
		}
		cfg.IntrospectPerson = strings.Contains(name, "a person's token")
		row := tableRow{name: name, trivial: issuer == trivialIssuer, hasPG: pgs != nil, hasBytesToken: heapDebug != ""}
		var cpu0 cpuSplit
		var ids []int
		var heap0 float64
		cfg.Ready = func() {
			if heapDebug != "" {
				heap0 = liveHeap(b, heapDebug)
			}
			if pgs != nil {
				ids = pgs()
			}
			row.load = loadAverage()
			cpu0 = sampleCPU(pid, ids)
		}
		res, err := load.Run(context.Background(), cfg)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		if pgs != nil {
			// Backends the pool opened during the run count from zero.
			for _, id := range pgs() {
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
		cpu1 := sampleCPU(pid, ids)
		n := float64(res.Requests)
		perOp := func(d int64) float64 { return float64(d) * 1e4 / n }
		row.perSecond = res.PerSecond
		row.server, row.loadgen, row.pg = perOp(cpu1.server-cpu0.server), perOp(cpu1.loadgen-cpu0.loadgen), perOp(cpu1.postgres-cpu0.postgres)
		row.errors, row.requests, row.firstError = res.Errors, res.Requests, res.FirstError
		if heapDebug != "" {
			row.bytesPerToken = (liveHeap(b, heapDebug) - heap0) / float64(res.Requests-res.Errors)
		}
		rows = append(rows, row)
	}
	trivial := func() {
		measure("trivial JSON handler", trivialIssuer, trivialPID, load.ClientCredentials, 0, nil, "")
	}

	trivial()
	measure("client credentials, memory", mem.issuer, mem.cmd.Process.Pid, load.ClientCredentials, 0, nil, memDebug)
	measure("introspection, memory", mem.issuer, mem.cmd.Process.Pid, load.Introspection, 0, nil, "")
	measure("introspection of a person's token, memory", mem.issuer, mem.cmd.Process.Pid, load.Introspection, 0, nil, "")
	trivial()
	measure("client credentials, SQLite", sqlite.issuer, sqlite.cmd.Process.Pid, load.ClientCredentials, 0, nil, "")
	if pg != nil {
		measure("client credentials, PostgreSQL", pg.issuer, pg.cmd.Process.Pid, load.ClientCredentials, 0, pgBackends, "")
		trivial()
		measure("introspection, PostgreSQL", pg.issuer, pg.cmd.Process.Pid, load.Introspection, 0, pgBackends, "")
		measure("introspection of a person's token, PostgreSQL", pg.issuer, pg.cmd.Process.Pid, load.Introspection, 0, pgBackends, "")
		trivial()
		measure("code redemption, PostgreSQL", pg.issuer, pg.cmd.Process.Pid, load.AuthorizationCode, *tableCodesFlag, pgBackends, "")
	} else {
		b.Logf("%s is not set: the PostgreSQL rows are skipped", pgtest.EnvVar)
	}
	trivial()

	var sum float64
	var count int
	for _, r := range rows {
		if r.trivial {
			sum += r.perSecond
			count++
		}
	}
	ref := sum / float64(count)
	w := os.Stdout
	fmt.Fprintf(w, "\n%d connections, %v per row, %d cores\n", *connsFlag, *tableDurationFlag, runtime.NumCPU())
	fmt.Fprintf(w, "| path | req/s | share of trivial | server cpu-us/req | loadgen cpu-us/req | PostgreSQL cpu-us/req | live heap per token | load avg |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		pgCPU, heap := "", ""
		if r.hasPG {
			pgCPU = fmt.Sprintf("%.0f", r.pg)
		}
		if r.hasBytesToken {
			heap = fmt.Sprintf("%.0f B", r.bytesPerToken)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f%% | %.0f | %.0f | %s | %s | %s |\n",
			r.name, r.perSecond, 100*r.perSecond/ref, r.server, r.loadgen, pgCPU, heap, r.load)
	}
	fmt.Fprintf(w, "trivial handler mean: %.0f req/s\n", ref)
	for _, r := range rows {
		if r.errors > 0 {
			b.Errorf("%s: %d of %d requests failed: %s", r.name, r.errors, r.requests, r.firstError)
		}
	}
}
