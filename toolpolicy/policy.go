package toolpolicy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// Match selects requests by globs (see the package doc, "Matching").
type Match struct {
	Tools     []string `yaml:"tools"`
	Methods   []string `yaml:"methods"`
	Prompts   []string `yaml:"prompts"`
	Resources []string `yaml:"resources"`
}

// Rule is one entry of policy.rules.
type Rule struct {
	Match `yaml:",inline"`
	// Allow is a CEL expression of type bool over the variables of the
	// package doc.
	Allow string `yaml:"allow"`
	// Message is the text of the JSON-RPC error a denied request gets.
	// Empty: DefaultMessage.
	Message string `yaml:"message"`
}

// Config is the policy section of a configuration file.
type Config struct {
	Rules []Rule `yaml:"rules"`
	// Inject maps a tool name to the arguments set on each tools/call of
	// it: argument name -> CEL expression over the caller (claims,
	// client_id, scopes; not args). The forwarded call carries the
	// expression's value whatever the client sent.
	Inject map[string]map[string]string `yaml:"inject"`
}

// DefaultMessage is the error text of a denial by a rule without message.
const DefaultMessage = "This request is not allowed by the server's policy."

// CostLimit bounds the runtime cost of one evaluation of one expression
// (cel-go's cost units, roughly one per operation and per element or byte
// class a function walks). A rule that reaches it denies: huge or deeply
// nested arguments cannot make a decision slow.
const CostLimit = 10000

// SmallInput is the size in bytes of arguments and claims under which a
// rule whose static cost (cel-go's estimate with every string, list and
// map at most this large) is within CostLimit runs without runtime cost
// tracking: it cannot exceed the limit, and tracking costs about as much
// as the evaluation. Larger input, or a rule that may exceed the limit
// (a comprehension over arguments in a comprehension), is tracked.
const SmallInput = 4096

// boundedSizes is a cost estimator for inputs of at most max bytes: no
// string, list or map of them is larger.
type boundedSizes struct{ max uint64 }

func (b boundedSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: b.max}
}

func (boundedSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// maxExpressionBytes bounds the text of one expression.
const maxExpressionBytes = 4096

// Variables of the rule environment.
const (
	varClaims   = "claims"
	varArgs     = "args"
	varMethod   = "method"
	varName     = "name"
	varClientID = "client_id"
	varScopes   = "scopes"
)

// Engine holds compiled rules and injections. It is safe for concurrent use.
type Engine struct {
	rules  []rule
	inject map[string][]injection
}

type rule struct {
	Match
	message string
	prg     cel.Program // cost-limited
	// fast is the rule without runtime cost tracking, used when the
	// arguments and the claims are at most SmallInput bytes and the
	// rule's static cost for inputs of that size is within CostLimit
	// (cheap); nil otherwise.
	fast    cel.Program
	partial cel.Program // with args unknown, for lists
	shape   *shape      // the same, operator by operator; nil: partial
	useArgs bool
}

type injection struct {
	arg string
	prg cel.Program
}

// New compiles cfg. A rule that does not compile, names an unknown
// variable or is not of type bool is an error naming policy.rules[i].allow;
// an injection, policy.inject.TOOL.ARG.
func New(cfg Config) (*Engine, error) {
	withArgs, err := newEnv(true)
	if err != nil {
		return nil, err
	}
	noArgs, err := newEnv(false)
	if err != nil {
		return nil, err
	}
	e := &Engine{inject: map[string][]injection{}}
	for i, r := range cfg.Rules {
		path := fmt.Sprintf("policy.rules[%d]", i)
		if err := r.Match.check(path); err != nil {
			return nil, err
		}
		if r.Match.empty() {
			return nil, fmt.Errorf("%s: set tools, methods, prompts or resources (methods: [\"*\"] matches every request)", path)
		}
		if strings.TrimSpace(r.Allow) == "" {
			return nil, fmt.Errorf("%s.allow: required", path)
		}
		ast, err := compile(withArgs, r.Allow, cel.BoolType)
		if err != nil {
			return nil, fmt.Errorf("%s.allow: %w", path, err)
		}
		c := rule{Match: r.Match, message: r.Message}
		if c.message == "" {
			c.message = DefaultMessage
		}
		// An expression that compiles without args does not read them: its
		// calls need no decoding of the arguments.
		_, noArgsErr := compile(noArgs, r.Allow, cel.BoolType)
		c.useArgs = noArgsErr != nil
		// OptOptimize folds constants and compiles constant regular
		// expressions once, here, rather than at every evaluation.
		if c.prg, err = withArgs.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize)); err != nil {
			return nil, fmt.Errorf("%s.allow: %w", path, err)
		}
		if est, err := withArgs.EstimateCost(ast, boundedSizes{SmallInput}); err == nil && est.Max <= CostLimit {
			if c.fast, err = withArgs.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
				return nil, fmt.Errorf("%s.allow: %w", path, err)
			}
		}
		if c.partial, err = withArgs.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptPartialEval)); err != nil {
			return nil, fmt.Errorf("%s.allow: %w", path, err)
		}
		c.shape = newShape(withArgs, ast)
		e.rules = append(e.rules, c)
	}
	tools := make([]string, 0, len(cfg.Inject))
	for t := range cfg.Inject {
		tools = append(tools, t)
	}
	sort.Strings(tools)
	for _, tool := range tools {
		if tool == "" {
			return nil, errors.New("policy.inject: empty tool name")
		}
		args := make([]string, 0, len(cfg.Inject[tool]))
		for a := range cfg.Inject[tool] {
			args = append(args, a)
		}
		sort.Strings(args)
		for _, a := range args {
			path := "policy.inject." + tool + "." + a
			if a == "" {
				return nil, fmt.Errorf("policy.inject.%s: empty argument name", tool)
			}
			ast, err := compile(noArgs, cfg.Inject[tool][a], nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w (an injected value is computed from the caller: claims, client_id, scopes)", path, err)
			}
			prg, err := noArgs.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			e.inject[tool] = append(e.inject[tool], injection{arg: a, prg: prg})
		}
	}
	return e, nil
}

func newEnv(args bool) (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.Variable(varClaims, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(varClientID, cel.StringType),
		cel.Variable(varScopes, cel.ListType(cel.StringType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxExpressionBytes),
	}
	if args {
		opts = append(opts,
			cel.Variable(varArgs, cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable(varMethod, cel.StringType),
			cel.Variable(varName, cel.StringType))
	}
	return cel.NewEnv(opts...)
}

// compile parses and checks expr; want, when set, is its required type.
func compile(env *cel.Env, expr string, want *cel.Type) (*cel.Ast, error) {
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, errors.New(strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if want != nil && !ast.OutputType().IsExactType(want) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the expression is of type %s, not %s", ast.OutputType(), want)
	}
	return ast, nil
}

// check validates the globs of m.
func (m Match) check(path string) error {
	for _, g := range [][]string{m.Tools, m.Methods, m.Prompts, m.Resources} {
		if slices.Contains(g, "") {
			return fmt.Errorf("%s: an empty glob", path)
		}
	}
	return nil
}

func (m Match) empty() bool {
	return len(m.Tools) == 0 && len(m.Methods) == 0 && len(m.Prompts) == 0 && len(m.Resources) == 0
}

// Matches reports whether m selects a request of method whose tool, prompt
// or resource is name.
func (m Match) Matches(method, name string) bool {
	if anyGlob(m.Methods, method) {
		return true
	}
	switch method {
	case "tools/call":
		return anyGlob(m.Tools, name)
	case "prompts/get":
		return anyGlob(m.Prompts, name)
	case "resources/read", "resources/subscribe":
		return anyGlob(m.Resources, name)
	}
	return false
}

func anyGlob(globs []string, s string) bool {
	for _, g := range globs {
		if Glob(g, s) {
			return true
		}
	}
	return false
}

// Glob reports whether s matches pattern, in which * stands for any run of
// characters and every other character for itself.
func Glob(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[star:], pattern[star+1:]
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			return strings.HasSuffix(s, pattern)
		}
		part := pattern[:star]
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s, pattern = s[i+len(part):], pattern[star+1:]
	}
}

// Decision is the outcome of Check.
type Decision struct {
	Allowed bool
	// Rule is the index in policy.rules of the rule that denied; -1 when
	// allowed.
	Rule int
	// Message is the denying rule's message.
	Message string
	// Err is why the rule did not evaluate to true when it did not
	// evaluate at all (a missing claim, the cost limit, arguments
	// refused); for logs, never for the client.
	Err error
}

// HasRules reports whether e has rules.
func (e *Engine) HasRules() bool { return e != nil && len(e.rules) > 0 }

// Check decides a request of method on name with arguments args (the JSON
// of params.arguments; nil or null for none) for caller c.
func (e *Engine) Check(c *Caller, method, name string, args []byte) Decision {
	if e == nil {
		return Decision{Allowed: true, Rule: -1}
	}
	act := &activation{c: c, method: method, name: name, rawArgs: args}
	for i := range e.rules {
		r := &e.rules[i]
		if !r.Matches(method, name) {
			continue
		}
		if r.useArgs && act.args == nil {
			if act.args, act.argsErr = DecodeArgs(args); act.argsErr != nil {
				return Decision{Rule: i, Message: r.message, Err: act.argsErr}
			}
		}
		if d := e.checkRule(r, i, act, args); !d.Allowed {
			return d
		}
	}
	return Decision{Allowed: true, Rule: -1}
}

// checkRule evaluates rule r (index i) with act; args are the raw
// arguments (their size picks the program: untracked for small input when
// r is cheap).
func (e *Engine) checkRule(r *rule, i int, act *activation, args []byte) Decision {
	prg := r.prg
	if r.fast != nil && len(args) <= SmallInput && act.c.claimsSize() <= SmallInput {
		prg = r.fast
	}
	out, _, err := prg.Eval(act)
	if err != nil {
		return Decision{Rule: i, Message: r.message, Err: err}
	}
	if b, ok := out.(types.Bool); !ok || !bool(b) {
		return Decision{Rule: i, Message: r.message}
	}
	return Decision{Allowed: true, Rule: -1}
}

// Listable reports whether some arguments could make a request of method
// on name allowed for c: every matching rule, evaluated with args unknown
// (CEL partial evaluation, operator by operator: shape), can give true.
// A list answer leaves out an entry that is not listable, so lists show
// exactly what can be called.
func (e *Engine) Listable(c *Caller, method, name string) bool {
	if e == nil {
		return true
	}
	var act interpreter.PartialActivation
	for i := range e.rules {
		r := &e.rules[i]
		if !r.Matches(method, name) {
			continue
		}
		if !r.useArgs {
			// Decided without arguments: the call's own evaluation.
			if d := e.checkRule(r, i, &activation{c: c, method: method, name: name}, nil); !d.Allowed {
				return false
			}
			continue
		}
		if act == nil {
			var err error
			if act, err = cel.PartialVars(&activation{c: c, method: method, name: name}, cel.AttributePattern(varArgs)); err != nil {
				return false
			}
		}
		if r.shape != nil {
			if r.shape.possible(act)&outTrue == 0 {
				return false
			}
			continue
		}
		out, _, err := r.partial.Eval(act)
		if types.IsUnknown(out) {
			continue
		}
		if err != nil {
			return false
		}
		if b, ok := out.(types.Bool); !ok || !bool(b) {
			return false
		}
	}
	return true
}

// ListsFiltered reports whether a list of the entries of method (tools/call,
// prompts/get, resources/read) may lose entries to the rules: some rule
// could match such a request.
func (e *Engine) ListsFiltered(method string) bool {
	if e == nil {
		return false
	}
	for _, r := range e.rules {
		if anyGlob(r.Methods, method) {
			return true
		}
		switch method {
		case "tools/call":
			if len(r.Tools) > 0 {
				return true
			}
		case "prompts/get":
			if len(r.Prompts) > 0 {
				return true
			}
		case "resources/read":
			if len(r.Resources) > 0 {
				return true
			}
		}
	}
	return false
}

// Injects reports whether calls of tool have arguments set by the policy.
func (e *Engine) Injects(tool string) bool { return e != nil && len(e.inject[tool]) > 0 }

// Injected returns the arguments set on a tools/call of tool for c, as
// argument name -> JSON-encodable value. An expression that fails (a claim
// the caller lacks) is an error naming the argument: the call must not go
// on with the value the client sent.
func (e *Engine) Injected(c *Caller, tool string) (map[string]any, error) {
	list := e.inject[tool]
	if len(list) == 0 {
		return nil, nil
	}
	act := &activation{c: c}
	out := make(map[string]any, len(list))
	for _, in := range list {
		v, _, err := in.prg.Eval(act)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", in.arg, err)
		}
		j, err := jsonValue(v, 0)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", in.arg, err)
		}
		out[in.arg] = j
	}
	return out, nil
}

// jsonValue converts a CEL value to a value encoding/json writes.
func jsonValue(v ref.Val, depth int) (any, error) {
	if depth > 100 {
		return nil, errors.New("value nested too deeply")
	}
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.String:
		return string(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return uint64(x), nil
	case types.Double:
		if !isFinite(float64(x)) {
			return nil, errors.New("a number JSON cannot carry")
		}
		return float64(x), nil
	}
	if l, ok := v.(traits.Lister); ok {
		var out []any
		for it := l.Iterator(); it.HasNext() == types.True; {
			j, err := jsonValue(it.Next(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	}
	if m, ok := v.(traits.Mapper); ok {
		out := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("a map key of type %s", k.Type())
			}
			j, err := jsonValue(m.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = j
		}
		return out, nil
	}
	if types.IsUnknownOrError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	if n, err := v.ConvertToNative(reflect.TypeFor[any]()); err == nil {
		return n, nil
	}
	return nil, fmt.Errorf("a value of type %s has no JSON form", v.Type())
}
