package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A mutant schema compiles many mutants into one test binary: each mutated
// operator becomes a choice made at run time by the MUTSEL_MUTANT
// environment variable, so the package is built once instead of once per
// mutant. Only mutants whose choice needs no type information take part:
// comparisons and && / || (the choice is a func() bool), break / continue
// and ++ / -- statements (the choice is an if). The others (arithmetic,
// unary minus), and any that make the schema fail to compile, are built one
// at a time.
//
// In the schema, `x op y` becomes
//
//	func() bool { switch mutselActive { case 3: return (x) op3 (y) }; return (x) op (y) }()
//
// which evaluates x and y once, in the same order, as the original does.

// schemaMutant is one mutant of the schema.
type schemaMutant struct {
	id         int
	m          mutant
	start, end int // offsets of the rewritten node in the original file
}

// site is a node that one or more mutants rewrite.
type site struct {
	node       ast.Node
	start, end int
	mutants    []*schemaMutant
	outStart   int // offsets of its text in the generated file
	outEnd     int
	x, y       ast.Expr // operands of a binary expression
	statement  bool
	tokenText  string
	tokenStart int
}

const schemaEnv = "MUTSEL_MUTANT"

// schemaFile rewrites one file. It returns the generated text and the sites
// (with their offsets in it); mutants not in a site are built one at a time.
func schemaFile(name string, src []byte, ms []mutant, nextID *int, skip map[string]bool) ([]byte, []*site, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, err
	}
	tf := fset.File(f.Pos())
	byPos := map[[2]int][]mutant{}
	for _, m := range ms {
		byPos[[2]int{m.Line, m.Column}] = append(byPos[[2]int{m.Line, m.Column}], m)
	}
	var sites []*site
	add := func(n ast.Node, opPos token.Pos, tok token.Token, x, y ast.Expr, statement bool, allowed map[string]bool) {
		p := fset.Position(opPos)
		key := [2]int{p.Line, p.Column}
		s := &site{node: n, start: tf.Offset(n.Pos()), end: tf.Offset(n.End()), x: x, y: y, statement: statement,
			tokenText: tok.String(), tokenStart: tf.Offset(opPos)}
		for _, m := range byPos[key] {
			if !allowed[m.Type] || skip[mutantID(m)] {
				continue
			}
			if _, ok := replacements[m.Type][tok]; !ok {
				continue
			}
			*nextID++
			s.mutants = append(s.mutants, &schemaMutant{id: *nextID, m: m, start: s.start, end: s.end})
		}
		if len(s.mutants) > 0 {
			sites = append(sites, s)
		}
	}
	// Statements that may be replaced by a block: those in a statement list.
	inList := map[ast.Stmt]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		var list []ast.Stmt
		switch n := n.(type) {
		case *ast.BlockStmt:
			list = n.List
		case *ast.CaseClause:
			list = n.Body
		case *ast.CommClause:
			list = n.Body
		}
		for _, s := range list {
			inList[s] = true
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			// Package-level constants and variables: no function runs them.
			return n.Tok != token.CONST
		case *ast.BinaryExpr:
			switch n.Op {
			case token.EQL, token.NEQ, token.LSS, token.LEQ, token.GTR, token.GEQ:
				add(n, n.OpPos, n.Op, n.X, n.Y, false, map[string]bool{"CONDITIONALS_NEGATION": true, "CONDITIONALS_BOUNDARY": true})
			case token.LAND, token.LOR:
				add(n, n.OpPos, n.Op, n.X, n.Y, false, map[string]bool{"INVERT_LOGICAL": true})
			}
		case *ast.BranchStmt:
			if inList[n] && (n.Tok == token.BREAK || n.Tok == token.CONTINUE) {
				add(n, n.TokPos, n.Tok, nil, nil, true, map[string]bool{"INVERT_LOOPCTRL": true})
			}
		case *ast.IncDecStmt:
			if inList[n] {
				add(n, n.TokPos, n.Tok, nil, nil, true, map[string]bool{"INCREMENT_DECREMENT": true})
			}
		}
		return true
	})
	sort.Slice(sites, func(i, j int) bool {
		if sites[i].start != sites[j].start {
			return sites[i].start < sites[j].start
		}
		return sites[i].end > sites[j].end // outer first
	})
	var out strings.Builder
	render(&out, src, sites, 0, len(src))
	return []byte(out.String()), sites, nil
}

// render writes src[from:to] with every outermost site inside it rewritten,
// and records where each site's text landed.
func render(out *strings.Builder, src []byte, sites []*site, from, to int) {
	pos := from
	for i := 0; i < len(sites); i++ {
		s := sites[i]
		if s.start < pos || s.end > to {
			continue
		}
		// sites nested in s
		j := i + 1
		for j < len(sites) && sites[j].start < s.end {
			j++
		}
		inner := sites[i+1 : j]
		out.Write(src[pos:s.start])
		s.outStart = out.Len()
		writeSite(out, src, s, inner)
		s.outEnd = out.Len()
		pos = s.end
		i = j - 1
	}
	out.Write(src[pos:to])
}

func writeSite(out *strings.Builder, src []byte, s *site, inner []*site) {
	sub := func(from, to int) string {
		var b strings.Builder
		render(&b, src, inner, from, to)
		return b.String()
	}
	if !s.statement {
		// The mutated forms hold the operands' original text: when one of
		// this site's mutants runs, no mutant inside it does. Only the
		// unmutated form holds the rewritten operands, so nested sites do
		// not multiply the text.
		x := "(" + sub(s.start, s.tokenStart) + ")"
		y := "(" + sub(s.tokenStart+len(s.tokenText), s.end) + ")"
		xo := "(" + string(src[s.start:s.tokenStart]) + ")"
		yo := "(" + string(src[s.tokenStart+len(s.tokenText):s.end]) + ")"
		out.WriteString("func() bool { switch mutselActive {")
		for _, sm := range s.mutants {
			tok := replacements[sm.m.Type][tokenOf(s.tokenText)]
			fmt.Fprintf(out, " case %d: return %s %s %s;", sm.id, xo, tok, yo)
		}
		fmt.Fprintf(out, " }; return %s %s %s }()", x, s.tokenText, y)
		return
	}
	// A statement: the original text with its token replaced, chosen by if.
	orig := sub(s.start, s.end)
	rel := s.tokenStart - s.start
	// An if, not a switch: a break inside the schema's own switch would
	// leave that switch.
	out.WriteString("{ ")
	for _, sm := range s.mutants {
		tok := replacements[sm.m.Type][tokenOf(s.tokenText)]
		fmt.Fprintf(out, "if mutselActive == %d { %s%s%s } else ", sm.id, orig[:rel], tok, orig[rel+len(s.tokenText):])
	}
	fmt.Fprintf(out, "{ %s } }", orig)
}

func tokenOf(text string) token.Token {
	for t := token.ILLEGAL; t <= token.TILDE; t++ {
		if t.String() == text {
			return t
		}
	}
	return token.ILLEGAL
}

func mutantID(m mutant) string {
	return fmt.Sprintf("%s:%d:%d:%s", m.File, m.Line, m.Column, m.Type)
}

var compileError = regexp.MustCompile(`(?m)^(\S+\.go):(\d+):(\d+): `)

// buildSchema writes the schema of every file, builds its test binary, and
// on compile errors leaves out the mutants whose rewritten text holds an
// error (or, for an error outside any, every statement mutant of that
// file, then the file) until it builds. It returns the mutants it holds,
// by mutant, with their ids.
func (r *runner) buildSchema(ms []mutant) (map[string]int, error) {
	byFile := map[string][]mutant{}
	for _, m := range ms {
		if m.Status == "RUNNABLE" {
			byFile[m.File] = append(byFile[m.File], m)
		}
	}
	dir := filepath.Join(r.work, "schema")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	skipFile := map[string]bool{}
	for attempt := 0; attempt < 40; attempt++ {
		replace := map[string]string{}
		ids := map[string]int{}
		sitesByOut := map[string][]*site{}
		nextID := 0
		var pkgName string
		for file, fms := range byFile {
			if skipFile[file] {
				continue
			}
			src, err := os.ReadFile(filepath.Join(r.dir, file))
			if err != nil {
				return nil, err
			}
			text, sites, err := schemaFile(file, src, fms, &nextID, skip)
			if err != nil {
				return nil, err
			}
			if len(sites) == 0 {
				continue
			}
			if pkgName == "" {
				f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.PackageClauseOnly)
				if err != nil {
					return nil, err
				}
				pkgName = f.Name.Name
			}
			out := filepath.Join(dir, file)
			if err := os.WriteFile(out, text, 0o644); err != nil {
				return nil, err
			}
			replace[filepath.Join(r.dir, file)] = out
			sitesByOut[out] = sites
			for _, s := range sites {
				for _, sm := range s.mutants {
					ids[mutantID(sm.m)] = sm.id
				}
			}
		}
		if len(ids) == 0 {
			return ids, nil
		}
		chooser := filepath.Join(dir, "zz_mutsel_schema.go")
		code := fmt.Sprintf("package %s\n\nimport (\n\t\"os\"\n\t\"strconv\"\n)\n\n// mutselActive is the schema mutant chosen by %s (0: none).\nvar mutselActive, _ = strconv.Atoi(os.Getenv(%q))\n", pkgName, schemaEnv, schemaEnv)
		if err := os.WriteFile(chooser, []byte(code), 0o644); err != nil {
			return nil, err
		}
		replace[filepath.Join(r.dir, "zz_mutsel_schema.go")] = chooser
		overlay := filepath.Join(dir, "overlay.json")
		if err := writeOverlay(overlay, replace); err != nil {
			return nil, err
		}
		bin := filepath.Join(r.work, "schema.test")
		build := exec.Command("go", "test", "-c", "-vet=off", "-ldflags=-s -w", "-gcflags="+r.importPath+"=-e", "-overlay", overlay, "-o", bin, r.dir)
		out, err := build.CombinedOutput()
		if err == nil {
			fmt.Printf("schema: %d mutants in one binary (%d attempts)\n", len(ids), attempt+1)
			return ids, nil
		}
		errs := compileError.FindAllSubmatch(out, -1)
		fmt.Printf("schema: %d mutants do not build together (%d errors); leaving out the ones at fault\n", len(ids), len(errs))
		if len(errs) == 0 {
			return nil, fmt.Errorf("building the schema: %s", lastLines(out, 20))
		}
		for _, e := range errs {
			file := string(e[1])
			line, _ := strconv.Atoi(string(e[2]))
			col, _ := strconv.Atoi(string(e[3]))
			sites, ok := sitesByOut[file]
			if !ok {
				// An error in an unmutated file: relative name.
				for out, s := range sitesByOut {
					if strings.HasSuffix(out, "/"+filepath.Base(file)) {
						file, sites, ok = out, s, true
					}
				}
			}
			if !ok {
				return nil, fmt.Errorf("building the schema: %s", lastLines(out, 20))
			}
			text, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			off := offsetOf(text, line, col)
			hit := false
			for _, s := range sites {
				if off >= s.outStart && off < s.outEnd {
					for _, sm := range s.mutants {
						skip[mutantID(sm.m)] = true
					}
					hit = true
				}
			}
			if !hit {
				name := filepath.Base(file)
				stmt := false
				for _, s := range sites {
					if s.statement && !skip[mutantID(s.mutants[0].m)] {
						for _, sm := range s.mutants {
							skip[mutantID(sm.m)] = true
						}
						stmt = true
					}
				}
				if !stmt {
					skipFile[name] = true
				}
			}
		}
	}
	return nil, fmt.Errorf("the schema does not build after 40 attempts")
}

func writeOverlay(path string, replace map[string]string) error {
	var b strings.Builder
	b.WriteString(`{"Replace":{`)
	first := true
	for k, v := range replace {
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, "%q:%q", k, v)
	}
	b.WriteString("}}")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// offsetOf converts a 1-based line and byte column to an offset.
func offsetOf(text []byte, line, col int) int {
	off := 0
	for l := 1; l < line && off < len(text); l++ {
		i := strings.IndexByte(string(text[off:]), '\n')
		if i < 0 {
			return len(text)
		}
		off += i + 1
	}
	return off + col - 1
}
