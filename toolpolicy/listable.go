package toolpolicy

import (
	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
	"github.com/google/cel-go/parser"
)

// outcomes is a set of the results an expression can have: true, false,
// or an error (which denies).
type outcomes uint8

const (
	outTrue outcomes = 1 << iota
	outFalse
	outError
	outAny = outTrue | outFalse | outError
)

// shape is a rule's expression split at its logical operators (&&, ||, !,
// ?:), whose leaves are evaluated with args unknown. CEL's partial
// evaluation alone answers "unknown" for `'ops' in claims.groups &&
// args.x == 1` when the caller has no groups claim (an error and an
// unknown give an unknown), though no arguments can make that true; the
// operators' CEL semantics applied to the sets of results their operands
// can have tell it apart.
type shape struct {
	op   string // "" for a leaf
	kids []*shape
	prg  cel.Program
}

// newShape splits the checked expression of ast; nil when a leaf cannot be
// compiled on its own (the rule is then decided by partial evaluation as a
// whole).
func newShape(env *cel.Env, ast *cel.Ast) *shape {
	native := ast.NativeRep()
	return splitExpr(env, native.Expr(), native.SourceInfo(), 0)
}

func splitExpr(env *cel.Env, e celast.Expr, info *celast.SourceInfo, depth int) *shape {
	if e.Kind() == celast.CallKind && depth < 32 {
		c := e.AsCall()
		switch fn := c.FunctionName(); fn {
		case operators.LogicalAnd, operators.LogicalOr, operators.LogicalNot, operators.Conditional:
			s := &shape{op: fn}
			for _, a := range c.Args() {
				k := splitExpr(env, a, info, depth+1)
				if k == nil {
					return nil
				}
				s.kids = append(s.kids, k)
			}
			return s
		}
	}
	text, err := parser.Unparse(e, info)
	if err != nil {
		return nil
	}
	leaf, iss := env.Compile(text)
	if iss != nil && iss.Err() != nil {
		return nil
	}
	prg, err := env.Program(leaf, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptPartialEval))
	if err != nil {
		return nil
	}
	return &shape{prg: prg}
}

// possible is the set of results s can have for some value of the unknown
// args.
func (s *shape) possible(act interpreter.PartialActivation) outcomes {
	switch s.op {
	case "":
		out, _, err := s.prg.Eval(act)
		switch {
		case types.IsUnknown(out):
			return outAny
		case err != nil:
			return outError
		case out == types.True:
			return outTrue
		case out == types.False:
			return outFalse
		}
		return outError
	case operators.LogicalNot:
		a := s.kids[0].possible(act)
		var r outcomes
		if a&outTrue != 0 {
			r |= outFalse
		}
		if a&outFalse != 0 {
			r |= outTrue
		}
		return r | a&outError
	case operators.Conditional:
		c := s.kids[0].possible(act)
		var r outcomes
		if c&outTrue != 0 {
			r |= s.kids[1].possible(act)
		}
		if c&outFalse != 0 {
			r |= s.kids[2].possible(act)
		}
		return r | c&outError
	}
	a, b := s.kids[0].possible(act), s.kids[1].possible(act)
	and := s.op == operators.LogicalAnd
	var r outcomes
	for _, x := range []outcomes{outTrue, outFalse, outError} {
		for _, y := range []outcomes{outTrue, outFalse, outError} {
			if a&x != 0 && b&y != 0 {
				r |= combine(and, x, y)
			}
		}
	}
	return r
}

// combine is CEL's && (and) or || of two results: false absorbs errors in
// &&, true in ||.
func combine(and bool, x, y outcomes) outcomes {
	if and {
		switch {
		case x == outFalse || y == outFalse:
			return outFalse
		case x == outTrue && y == outTrue:
			return outTrue
		}
		return outError
	}
	switch {
	case x == outTrue || y == outTrue:
		return outTrue
	case x == outFalse && y == outFalse:
		return outFalse
	}
	return outError
}
