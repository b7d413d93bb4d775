// Command mutsel runs the mutants gremlins finds in one package, judging each
// by only the tests that cover its position instead of the whole test suite.
//
// It reads the mutant list of a gremlins dry run (gremlins unleash --dry-run
// --output FILE), then:
//
//  1. builds the package's test binary once with coverage, and runs each
//     top-level test (TestXxx, FuzzXxx seed corpus, ExampleXxx) alone with
//     -test.coverprofile, recording which blocks it covers and how long it
//     takes;
//  2. for each mutant gremlins marks RUNNABLE, selects the tests whose
//     coverage contains the mutant's position, by the same rule gremlins
//     uses for the whole suite (a covered block on a line strictly inside the
//     block, or on its first or last line within its columns);
//  3. compiles the comparisons, && / ||, break / continue and ++ / -- mutants
//     into one schema test binary (see schema.go), chosen at run time by the
//     MUTSEL_MUTANT environment variable, and builds every other mutant
//     (arithmetic, unary minus) alone with go test -c -overlay, the mutated
//     file written outside the tree;
//  4. runs only the selected tests, the quickest first in batches of 1, 2,
//     4, ... tests, with -failfast and a timeout of the coefficient times
//     their measured time (at least a minute).
//
// A mutant is KILLED when a selected test fails, LIVED when they all pass,
// TIMED OUT when they outlast the timeout, NOT VIABLE when it does not
// build, and NOT COVERED (not run) when gremlins found no test covering it.
// Results are appended to a file in the work directory, keyed by the mutated
// file's content, so an interrupted run resumes where it stopped and a file
// that changed is run again.
//
// Usage:
//
//	mutsel -pkg ./as -mutants dry.json [-work DIR] [-coefficient 30] [-no-schema] [-compare full.json] [FILE...]
//
// With FILE arguments (names inside the package, such as authorize.go) only
// the mutants of those files run, in the order given.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	pkg := flag.String("pkg", "", "package directory, such as ./as")
	mutantsFile := flag.String("mutants", "", "gremlins dry-run output (JSON)")
	work := flag.String("work", "", "work directory for binaries, coverage and results (default: a directory named after the package in the system temporary directory)")
	coefficient := flag.Float64("coefficient", 30, "a mutant's timeout is this times the measured time of its selected tests")
	minTimeout := flag.Duration("min-timeout", time.Minute, "the shortest timeout of a mutant's run")
	compare := flag.String("compare", "", "a gremlins report of a whole-suite run (unleash --output) of the same tree, compared mutant by mutant with this run")
	noSchema := flag.Bool("no-schema", false, "build every mutant alone instead of compiling comparisons, && / ||, break / continue and ++ / -- into one schema binary")
	flag.Parse()
	if *pkg == "" || *mutantsFile == "" {
		flag.Usage()
		os.Exit(2)
	}
	r, err := newRunner(*pkg, *work, *coefficient, *minTimeout)
	if err == nil {
		r.useSchema = !*noSchema
		r.compare = *compare
		err = r.run(*mutantsFile, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutsel:", err)
		os.Exit(1)
	}
}

// runner holds the state of one package's run.
type runner struct {
	dir         string // absolute package directory
	importPath  string
	work        string
	coefficient float64
	minTimeout  time.Duration
	tests       []testCoverage
	seconds     map[string]float64 // of each test, alone
	useSchema   bool
	compare     string
}

// testCoverage is what one top-level test covers when it runs alone.
type testCoverage struct {
	Name    string
	Seconds float64
	Failed  bool // failed when run alone on the unmutated code
	Blocks  map[string][]block
}

// block is a covered block of a coverage profile, as gremlins reads it.
type block struct {
	StartLine, StartCol, EndLine, EndCol int
}

// covers reports whether the position lies in the block by gremlins' rule
// (internal/coverage/profile.go of gremlins v0.6.0).
func (b block) covers(line, col int) bool {
	switch {
	case line > b.StartLine && line < b.EndLine:
		return true
	case b.StartLine == b.EndLine:
		return line == b.StartLine && col >= b.StartCol && col <= b.EndCol
	case line == b.StartLine:
		return col >= b.StartCol
	case line == b.EndLine:
		return col <= b.EndCol
	}
	return false
}

func newRunner(pkg, work string, coefficient float64, minTimeout time.Duration) (*runner, error) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}\t{{.ImportPath}}", pkg).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", pkg, err)
	}
	dir, importPath, ok := strings.Cut(strings.TrimSpace(string(out)), "\t")
	if !ok {
		return nil, fmt.Errorf("go list %s: unexpected output %q", pkg, out)
	}
	if work == "" {
		work = filepath.Join(os.TempDir(), "mutsel-"+strings.ReplaceAll(importPath, "/", "_"))
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	return &runner{dir: dir, importPath: importPath, work: work, coefficient: coefficient, minTimeout: minTimeout}, nil
}

// mutant is one entry of gremlins' report.
type mutant struct {
	File   string
	Type   string
	Status string
	Line   int
	Column int
}

func readMutants(path string) ([]mutant, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var report struct {
		Files []struct {
			FileName  string `json:"file_name"`
			Mutations []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
				Line   int    `json:"line"`
				Column int    `json:"column"`
			} `json:"mutations"`
		} `json:"files"`
	}
	if err := json.Unmarshal(data, &report); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var ms []mutant
	for _, f := range report.Files {
		for _, m := range f.Mutations {
			ms = append(ms, mutant{File: f.FileName, Type: m.Type, Status: m.Status, Line: m.Line, Column: m.Column})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].File != ms[j].File {
			return ms[i].File < ms[j].File
		}
		if ms[i].Line != ms[j].Line {
			return ms[i].Line < ms[j].Line
		}
		return ms[i].Column < ms[j].Column
	})
	return ms, nil
}

// orderMutants keeps the mutants of the named files, in the order of the
// names; with no names, all of them.
func orderMutants(ms []mutant, files []string) []mutant {
	if len(files) == 0 {
		return ms
	}
	var out []mutant
	for _, f := range files {
		n := len(out)
		for _, m := range ms {
			if m.File == f {
				out = append(out, m)
			}
		}
		if len(out) == n {
			fmt.Printf("warning: no mutants in %s\n", f)
		}
	}
	return out
}

func (r *runner) run(mutantsFile string, files []string) error {
	all, err := readMutants(mutantsFile)
	if err != nil {
		return err
	}
	ms := orderMutants(all, files)
	if err := r.coverage(); err != nil {
		return err
	}
	r.seconds = map[string]float64{}
	for _, t := range r.tests {
		r.seconds[t.Name] = t.Seconds
	}
	done, err := r.readResults()
	if err != nil {
		return err
	}
	resultsFile, err := os.OpenFile(r.resultsPath(), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer resultsFile.Close()

	var todo []mutant
	sources := map[string][]byte{}
	keys := make([]string, len(ms))
	for i, m := range ms {
		src, ok := sources[m.File]
		if !ok {
			if src, err = os.ReadFile(filepath.Join(r.dir, m.File)); err != nil {
				return err
			}
			sources[m.File] = src
		}
		keys[i] = resultKey(m, src)
		if _, ok := done[keys[i]]; !ok {
			todo = append(todo, m)
		}
	}
	start := time.Now()
	schema := map[string]int{}
	if r.useSchema && len(todo) > 0 {
		if schema, err = r.buildSchema(todo); err != nil {
			return err
		}
	}
	counts := map[string]int{}
	got := map[string]string{}
	same := map[string]result{} // the same mutated text under two mutator names
	for i, m := range ms {
		res, ok := done[keys[i]]
		if !ok {
			text := sameText(m, sources[m.File])
			if prev, dup := same[text]; dup && text != "" {
				res = prev
			} else {
				res = r.runMutant(m, sources[m.File], schema[mutantID(m)])
				same[text] = res
			}
			line := strings.Join([]string{keys[i], res.Status, strconv.Itoa(res.Tests), strings.ReplaceAll(res.Failed, "\t", " "), strconv.FormatFloat(res.Seconds, 'f', 1, 64)}, "\t")
			if _, err := fmt.Fprintln(resultsFile, line); err != nil {
				return err
			}
		}
		counts[res.Status]++
		got[mutantID(m)] = res.Status
		fmt.Println(res.line(m, ok))
	}
	if r.compare != "" {
		if err := compareWith(r.compare, ms, got); err != nil {
			return err
		}
	}
	killed, lived := counts["KILLED"], counts["LIVED"]
	fmt.Printf("Killed: %d, Lived: %d, Timed out: %d, Not viable: %d, Not covered: %d\n",
		killed, lived, counts["TIMED OUT"], counts["NOT VIABLE"], counts["NOT COVERED"])
	if killed+lived > 0 {
		fmt.Printf("Test efficacy: %.2f%%\n", 100*float64(killed)/float64(killed+lived))
	}
	fmt.Printf("Mutants: %d in %s\n", len(ms), time.Since(start).Round(time.Second))
	return nil
}

// compareWith prints how the statuses of a gremlins whole-suite report
// match this run's. A mutant that does not build is "killed" for gremlins
// (go test exits 1), NOT VIABLE here; those count as agreeing.
func compareWith(path string, ms []mutant, got map[string]string) error {
	full, err := readMutants(path)
	if err != nil {
		return err
	}
	agree, differ := 0, 0
	for _, m := range full {
		id := mutantID(m)
		here, ok := got[id]
		switch {
		case !ok:
			continue
		case here == m.Status || (m.Status == "KILLED" && here == "NOT VIABLE"):
			agree++
		default:
			differ++
			fmt.Printf("differs: %s whole suite %s, selected %s\n", id, m.Status, here)
		}
	}
	fmt.Printf("Compared with %s: %d agree, %d differ\n", path, agree, differ)
	return nil
}

// result is the outcome of one mutant.
type result struct {
	Status  string
	Tests   int    // tests selected
	Failed  string // first failing test, or what went wrong
	Seconds float64
}

func (res result) line(m mutant, cached bool) string {
	s := fmt.Sprintf("%12s %-22s at %s:%d:%d", res.Status, m.Type, m.File, m.Line, m.Column)
	if res.Status != "NOT COVERED" {
		s += fmt.Sprintf("  %d tests, %.1fs", res.Tests, res.Seconds)
	}
	if res.Failed != "" {
		s += " (" + res.Failed + ")"
	}
	if cached {
		s += " [earlier run]"
	}
	return s
}

// resultKey names a mutant and the content of the file it mutates.
func resultKey(m mutant, src []byte) string {
	sum := sha256.Sum256(src)
	return fmt.Sprintf("%s:%d:%d\t%s\t%s", m.File, m.Line, m.Column, m.Type, hex.EncodeToString(sum[:6]))
}

func (r *runner) resultsPath() string { return filepath.Join(r.work, "results.tsv") }

func (r *runner) readResults() (map[string]result, error) {
	done := map[string]result{}
	f, err := os.Open(r.resultsPath())
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 7 {
			continue
		}
		tests, _ := strconv.Atoi(fields[4])
		secs, _ := strconv.ParseFloat(fields[6], 64)
		done[strings.Join(fields[:3], "\t")] = result{Status: fields[3], Tests: tests, Failed: fields[5], Seconds: secs}
	}
	return done, sc.Err()
}

// sourceHash identifies the package's Go files (code and tests) and
// go.sum, so coverage measured on other code is measured again.
func (r *runner) sourceHash() (string, error) {
	h := sha256.New()
	names, err := filepath.Glob(filepath.Join(r.dir, "*.go"))
	if err != nil {
		return "", err
	}
	sum, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	names = append(names, strings.TrimSuffix(strings.TrimSpace(string(sum)), ".mod")+".sum")
	sort.Strings(names)
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(n), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// coverage measures, or loads from an earlier run on the same sources,
// what each top-level test covers when run alone.
func (r *runner) coverage() error {
	hash, err := r.sourceHash()
	if err != nil {
		return err
	}
	cache := filepath.Join(r.work, "coverage-"+hash+".json")
	if data, err := os.ReadFile(cache); err == nil {
		if err := json.Unmarshal(data, &r.tests); err == nil {
			fmt.Printf("per-test coverage: %d tests, from %s\n", len(r.tests), cache)
			return nil
		}
	}
	start := time.Now()
	bin := filepath.Join(r.work, "cover.test")
	build := exec.Command("go", "test", "-c", "-vet=off", "-cover", "-covermode=set", "-o", bin, r.dir)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the coverage binary: %w", err)
	}
	list, err := exec.Command(bin, "-test.list", ".").Output()
	if err != nil {
		return fmt.Errorf("listing tests: %w", err)
	}
	profile := filepath.Join(r.work, "one.cov")
	r.tests = nil
	for _, name := range strings.Fields(string(list)) {
		if strings.HasPrefix(name, "Benchmark") {
			continue
		}
		t0 := time.Now()
		cmd := exec.Command(bin, "-test.run", "^"+regexp.QuoteMeta(name)+"$", "-test.count=1", "-test.coverprofile="+profile)
		cmd.Dir = r.dir
		out, runErr := cmd.CombinedOutput()
		tc := testCoverage{Name: name, Seconds: time.Since(t0).Seconds(), Failed: runErr != nil}
		if tc.Failed {
			fmt.Printf("warning: %s fails when run alone; it is not used to judge mutants\n%s\n", name, lastLines(out, 10))
		}
		if tc.Blocks, err = readProfile(profile, r.importPath); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.tests = append(r.tests, tc)
	}
	data, err := json.Marshal(r.tests)
	if err != nil {
		return err
	}
	if err := os.WriteFile(cache, data, 0o644); err != nil {
		return err
	}
	fmt.Printf("per-test coverage: %d tests measured in %s\n", len(r.tests), time.Since(start).Round(time.Second))
	return nil
}

// readProfile reads the covered blocks of a coverage profile, by file name
// inside the package.
func readProfile(path, importPath string) (map[string][]block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blocks := map[string][]block{}
	for i, line := range strings.Split(string(data), "\n") {
		if i == 0 || line == "" {
			continue
		}
		// name.go:L1.C1,L2.C2 statements count
		loc, rest, ok := strings.Cut(line, " ")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 2 {
			return nil, fmt.Errorf("profile line %d: %q", i+1, line)
		}
		if fields[1] == "0" {
			continue
		}
		colon := strings.LastIndex(loc, ":")
		if colon < 0 {
			return nil, fmt.Errorf("profile line %d: %q", i+1, line)
		}
		file := strings.TrimPrefix(loc[:colon], importPath+"/")
		var b block
		if _, err := fmt.Sscanf(loc[colon+1:], "%d.%d,%d.%d", &b.StartLine, &b.StartCol, &b.EndLine, &b.EndCol); err != nil {
			return nil, fmt.Errorf("profile line %d: %w", i+1, err)
		}
		blocks[file] = append(blocks[file], b)
	}
	return blocks, nil
}

// selectTests returns the tests that cover the mutant's position, in the
// order go test runs them.
func (r *runner) selectTests(m mutant) (names []string, seconds float64) {
	for i := range r.tests {
		t := &r.tests[i]
		if t.Failed {
			continue
		}
		for _, b := range t.Blocks[m.File] {
			if b.covers(m.Line, m.Column) {
				names = append(names, t.Name)
				seconds += t.Seconds
				break
			}
		}
	}
	return names, seconds
}

// runMutant judges one mutant: by the schema binary when the schema holds
// it (schemaID > 0), otherwise by a test binary built for it alone.
func (r *runner) runMutant(m mutant, src []byte, schemaID int) result {
	if m.Status != "RUNNABLE" {
		return result{Status: m.Status}
	}
	start := time.Now()
	res := func(status, failed string, tests int) result {
		return result{Status: status, Failed: failed, Tests: tests, Seconds: time.Since(start).Seconds()}
	}
	names, seconds := r.selectTests(m)
	if len(names) == 0 {
		// Covered by the whole suite but by no test alone: a test
		// depends on another's effects. Judge it by the whole suite.
		for _, t := range r.tests {
			if !t.Failed {
				names = append(names, t.Name)
				seconds += t.Seconds
			}
		}
	}
	bin := filepath.Join(r.work, "schema.test")
	var env []string
	if schemaID > 0 {
		env = append(env, fmt.Sprintf("%s=%d", schemaEnv, schemaID))
	} else {
		mutated, err := mutate(src, m.Line, m.Column, m.Type)
		if err != nil {
			return res("ERROR", err.Error(), len(names))
		}
		dir := filepath.Join(r.work, "src")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return res("ERROR", err.Error(), len(names))
		}
		mfile := filepath.Join(dir, m.File)
		if err := os.WriteFile(mfile, mutated, 0o644); err != nil {
			return res("ERROR", err.Error(), len(names))
		}
		overlayFile := filepath.Join(r.work, "overlay.json")
		if err := writeOverlay(overlayFile, map[string]string{filepath.Join(r.dir, m.File): mfile}); err != nil {
			return res("ERROR", err.Error(), len(names))
		}
		bin = filepath.Join(r.work, "mutant.test")
		build := exec.Command("go", "test", "-c", "-vet=off", "-ldflags=-s -w", "-overlay", overlayFile, "-o", bin, r.dir)
		if out, err := build.CombinedOutput(); err != nil {
			return res("NOT VIABLE", firstLine(out), len(names))
		}
	}

	// The selected tests run in batches of 1, 2, 4, ... tests, the
	// quickest first, so a mutant that the quickest test covering it kills
	// costs that test only; a mutant that lives has run them all.
	sort.SliceStable(names, func(i, j int) bool { return r.seconds[names[i]] < r.seconds[names[j]] })
	timeout := time.Duration(r.coefficient * seconds * float64(time.Second))
	if timeout < r.minTimeout {
		timeout = r.minTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for i, size := 0, 1; i < len(names); i, size = i+size, size*2 {
		batch := names[i:min(i+size, len(names))]
		cmd := exec.CommandContext(ctx, bin,
			"-test.run", "^("+strings.Join(batch, "|")+")$",
			"-test.failfast", "-test.count=1", "-test.v",
			"-test.timeout", (timeout + 10*time.Second).String())
		cmd.Dir = r.dir
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		out, err := cmd.CombinedOutput()
		switch {
		case ctx.Err() != nil:
			return res("TIMED OUT", "", len(names))
		case err == nil:
			continue
		case bytes.Contains(out, []byte("panic: test timed out")):
			return res("TIMED OUT", "", len(names))
		}
		return res("KILLED", firstFailure(out), len(names))
	}
	return res("LIVED", "", len(names))
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// firstFailure names the innermost failing test of the first top-level
// test that failed, or says the binary failed without a test failing.
func firstFailure(out []byte) string {
	ms := failLine.FindAllSubmatch(out, -1)
	if len(ms) == 0 {
		if bytes.Contains(out, []byte("panic:")) {
			return "panic"
		}
		return "exit status"
	}
	return string(ms[0][1])
}

func firstLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			return strings.TrimSpace(l)
		}
	}
	return "build failed"
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// replacements is gremlins' table of token mutations (internal/engine of
// gremlins v0.6.0), by the mutator type name of its report.
var replacements = map[string]map[token.Token]token.Token{
	"ARITHMETIC_BASE":       {token.ADD: token.SUB, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL, token.SUB: token.ADD},
	"CONDITIONALS_BOUNDARY": {token.GEQ: token.GTR, token.GTR: token.GEQ, token.LEQ: token.LSS, token.LSS: token.LEQ},
	"CONDITIONALS_NEGATION": {token.EQL: token.NEQ, token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR, token.LSS: token.GEQ, token.NEQ: token.EQL},
	"INCREMENT_DECREMENT":   {token.DEC: token.INC, token.INC: token.DEC},
	"INVERT_ASSIGNMENTS":    {token.ADD_ASSIGN: token.SUB_ASSIGN, token.MUL_ASSIGN: token.QUO_ASSIGN, token.QUO_ASSIGN: token.MUL_ASSIGN, token.REM_ASSIGN: token.REM_ASSIGN, token.SUB_ASSIGN: token.ADD_ASSIGN},
	"INVERT_BITWISE":        {token.AND: token.OR, token.OR: token.AND, token.XOR: token.AND, token.AND_NOT: token.AND, token.SHL: token.SHR, token.SHR: token.SHL},
	"INVERT_BWASSIGN":       {token.AND_ASSIGN: token.OR_ASSIGN, token.OR_ASSIGN: token.AND_ASSIGN, token.XOR_ASSIGN: token.AND_ASSIGN, token.AND_NOT_ASSIGN: token.AND_ASSIGN, token.SHL_ASSIGN: token.SHR_ASSIGN, token.SHR_ASSIGN: token.SHL_ASSIGN},
	"INVERT_LOGICAL":        {token.LAND: token.LOR, token.LOR: token.LAND},
	"INVERT_LOOPCTRL":       {token.BREAK: token.CONTINUE, token.CONTINUE: token.BREAK},
	"INVERT_NEGATIVES":      {token.SUB: token.ADD},
	"REMOVE_SELF_ASSIGNMENTS": {token.ADD_ASSIGN: token.ASSIGN, token.AND_ASSIGN: token.ASSIGN, token.AND_NOT_ASSIGN: token.ASSIGN, token.MUL_ASSIGN: token.ASSIGN,
		token.OR_ASSIGN: token.ASSIGN, token.QUO_ASSIGN: token.ASSIGN, token.REM_ASSIGN: token.ASSIGN, token.SHL_ASSIGN: token.ASSIGN,
		token.SHR_ASSIGN: token.ASSIGN, token.SUB_ASSIGN: token.ASSIGN, token.XOR_ASSIGN: token.ASSIGN},
}

// sameText names the mutated text of a mutant (file, position, new token),
// so two mutator names that make the same change (INVERT_NEGATIVES and
// ARITHMETIC_BASE both turn - into +) run once.
func sameText(m mutant, src []byte) string {
	out, err := mutate(src, m.Line, m.Column, m.Type)
	if err != nil || m.Status != "RUNNABLE" {
		return ""
	}
	sum := sha256.Sum256(out)
	return m.File + ":" + hex.EncodeToString(sum[:8])
}

// mutate replaces the token at line:col (1-based, col in bytes) as
// gremlins' mutator type does.
func mutate(src []byte, line, col int, typ string) ([]byte, error) {
	table, ok := replacements[typ]
	if !ok {
		return nil, fmt.Errorf("unknown mutator type %s", typ)
	}
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return nil, fmt.Errorf("no token at %d:%d", line, col)
		}
		p := fset.Position(pos)
		if p.Line < line || (p.Line == line && p.Column < col) {
			continue
		}
		if p.Line != line || p.Column != col {
			return nil, fmt.Errorf("no token starts at %d:%d", line, col)
		}
		to, ok := table[tok]
		if !ok {
			return nil, fmt.Errorf("%s does not mutate %q at %d:%d", typ, lit+tok.String(), line, col)
		}
		off := file.Offset(pos)
		var out []byte
		out = append(out, src[:off]...)
		out = append(out, to.String()...)
		out = append(out, src[off+len(tok.String()):]...)
		return out, nil
	}
}
