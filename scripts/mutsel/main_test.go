package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const sample = `package main

import "fmt"

func main() {
	n := 0
	for _, i := range []int{0, 1, 2, 3, 4, 5} {
		if i == 4 {
			break
		}
		if i%2 == 1 && i > 0 {
			continue
		}
		n++
	}
	fmt.Println(n, n >= 2 || n < 0)
}
`

// sampleMutants lists gremlins' mutants of sample: every mutator type of
// .gremlins.yaml that applies to an operator or branch token.
func sampleMutants(t *testing.T) []mutant {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", sample, 0)
	if err != nil {
		t.Fatal(err)
	}
	types := []string{"CONDITIONALS_BOUNDARY", "CONDITIONALS_NEGATION", "INVERT_LOGICAL", "INVERT_LOOPCTRL", "INCREMENT_DECREMENT"}
	var ms []mutant
	ast.Inspect(f, func(n ast.Node) bool {
		var tok token.Token
		var pos token.Pos
		switch n := n.(type) {
		case *ast.BinaryExpr:
			tok, pos = n.Op, n.OpPos
		case *ast.BranchStmt:
			tok, pos = n.Tok, n.TokPos
		case *ast.IncDecStmt:
			tok, pos = n.Tok, n.TokPos
		default:
			return true
		}
		p := fset.Position(pos)
		for _, typ := range types {
			if _, ok := replacements[typ][tok]; ok {
				ms = append(ms, mutant{File: "main.go", Status: "RUNNABLE", Line: p.Line, Column: p.Column, Type: typ})
			}
		}
		return true
	})
	return ms
}

func TestMutateReplacesTheTokenAtThePosition(t *testing.T) {
	out, err := mutate([]byte(sample), 11, 15, "INVERT_LOGICAL")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "if i%2 == 1 || i > 0 {") {
		t.Fatalf("mutated text:\n%s", out)
	}
	if _, err := mutate([]byte(sample), 11, 16, "INVERT_LOGICAL"); err == nil {
		t.Fatal("a position inside a token was accepted")
	}
	if _, err := mutate([]byte(sample), 11, 15, "ARITHMETIC_BASE"); err == nil {
		t.Fatal("a mutator type that does not apply to && was accepted")
	}
}

func TestBlockCoversByGremlinsRule(t *testing.T) {
	b := block{StartLine: 3, StartCol: 10, EndLine: 5, EndCol: 4}
	for _, c := range []struct {
		line, col int
		want      bool
	}{{3, 9, false}, {3, 10, true}, {4, 1, true}, {5, 4, true}, {5, 5, false}, {2, 20, false}, {6, 1, false}} {
		if got := b.covers(c.line, c.col); got != c.want {
			t.Errorf("covers(%d, %d) = %v, want %v", c.line, c.col, got, c.want)
		}
	}
}

// TestSchemaRunsEachMutantAsItsTextualMutation builds the schema of sample
// once and checks that each mutant chosen at run time prints what the
// program mutated in its text prints.
func TestSchemaRunsEachMutantAsItsTextualMutation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(env ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "run", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go run: %v\n%s", err, out)
		}
		return string(out)
	}
	write("go.mod", "module sample\n\ngo 1.22\n")
	ms := sampleMutants(t)

	want := map[string]string{}
	write("main.go", sample)
	original := run()
	for _, m := range ms {
		text, err := mutate([]byte(sample), m.Line, m.Column, m.Type)
		if err != nil {
			t.Fatal(err)
		}
		write("main.go", string(text))
		want[mutantID(m)] = run()
	}

	next := 0
	text, sites, err := schemaFile("main.go", []byte(sample), ms, &next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if next != len(ms) || len(ms) != 13 {
		t.Fatalf("schema holds %d of %d mutants:\n%s", next, len(ms), text)
	}
	write("main.go", string(text))
	write("zz_mutsel_schema.go", "package main\n\nimport (\n\t\"os\"\n\t\"strconv\"\n)\n\nvar mutselActive, _ = strconv.Atoi(os.Getenv(\""+schemaEnv+"\"))\n")
	if got := run(); got != original {
		t.Errorf("schema with no mutant chosen prints %q, the original %q", got, original)
	}
	for _, s := range sites {
		for _, sm := range s.mutants {
			if got := run(schemaEnv + "=" + strconv.Itoa(sm.id)); got != want[mutantID(sm.m)] {
				t.Errorf("%s: schema prints %q, the mutated text %q", mutantID(sm.m), got, want[mutantID(sm.m)])
			}
		}
	}
}
