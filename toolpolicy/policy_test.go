package toolpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func opsRule() Rule {
	return Rule{Match: Match{Tools: []string{"delete_*"}},
		Allow:   "'ops' in claims.groups && args.environment != 'production'",
		Message: "Only ops may delete, and never in production."}
}

func caller(groups ...string) *Caller {
	claims, _ := json.Marshal(map[string]any{"sub": "alice", "groups": groups, "tenant": "acme", "email": "alice@example.com"})
	return &Caller{Subject: "alice", ClientID: "app", Scopes: []string{"mcp:tools"}, ClaimsJSON: claims}
}

func mustNew(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNewRefusesBadRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"refuses a syntax error naming the rule", Config{Rules: []Rule{opsRule(), {Match: Match{Tools: []string{"x"}}, Allow: "claims.sub =="}}}, "policy.rules[1].allow"},
		{"refuses an unknown variable", Config{Rules: []Rule{{Match: Match{Tools: []string{"x"}}, Allow: "user.sub == 'a'"}}}, "policy.rules[0].allow"},
		{"refuses a non-boolean rule", Config{Rules: []Rule{{Match: Match{Tools: []string{"x"}}, Allow: "claims.sub + 'x'"}}}, "policy.rules[0].allow"},
		{"refuses a rule without a selector", Config{Rules: []Rule{{Allow: "true"}}}, "policy.rules[0]"},
		{"refuses an empty glob", Config{Rules: []Rule{{Match: Match{Tools: []string{""}}, Allow: "true"}}}, "policy.rules[0]"},
		{"refuses an empty expression", Config{Rules: []Rule{{Match: Match{Tools: []string{"a"}}}}}, "policy.rules[0].allow"},
		{"refuses an injection reading args", Config{Inject: map[string]map[string]string{"t": {"reporter": "args.reporter"}}}, "policy.inject.t.reporter"},
		{"refuses an injection that does not compile", Config{Inject: map[string]map[string]string{"t": {"r": "claims."}}}, "policy.inject.t.r"},
		{"refuses an over-long expression", Config{Rules: []Rule{{Match: Match{Tools: []string{"a"}}, Allow: "true" + strings.Repeat(" && true", 1000)}}}, "policy.rules[0].allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{
		{Match: Match{Methods: []string{"*"}}, Allow: "'mcp:tools' in scopes"},
		opsRule(),
		{Match: Match{Prompts: []string{"secret"}, Resources: []string{"file:///etc/*"}}, Allow: "client_id == 'admin'"},
	}})
	for _, tc := range []struct {
		name         string
		c            *Caller
		method, tool string
		args         string
		allowed      bool
		rule         int
	}{
		{"allows ops in staging", caller("ops"), "tools/call", "delete_thing", `{"environment":"staging"}`, true, -1},
		{"denies ops in production", caller("ops"), "tools/call", "delete_thing", `{"environment":"production"}`, false, 1},
		{"denies a caller outside ops", caller("dev"), "tools/call", "delete_thing", `{"environment":"staging"}`, false, 1},
		{"denies a caller without groups (an evaluation error)", &Caller{Scopes: []string{"mcp:tools"}, ClaimsJSON: []byte(`{"sub":"x"}`)}, "tools/call", "delete_thing", `{}`, false, 1},
		{"allows a tool no rule names", caller("dev"), "tools/call", "echo", `{}`, true, -1},
		{"denies by the methods rule first", &Caller{}, "tools/list", "", ``, false, 0},
		{"denies duplicate argument members", caller("ops"), "tools/call", "delete_thing", `{"environment":"staging","environment":"production"}`, false, 1},
		{"denies duplicate members deep inside", caller("ops"), "tools/call", "delete_thing", `{"environment":"staging","x":[{"a":1,"a":2}]}`, false, 1},
		{"denies arguments that are no object", caller("ops"), "tools/call", "delete_thing", `[1]`, false, 1},
		{"matches prompts", caller("ops"), "prompts/get", "secret", ``, false, 2},
		{"matches resource URIs across slashes", caller("ops"), "resources/read", "file:///etc/a/b", ``, false, 2},
		{"matches resources/subscribe", caller("ops"), "resources/subscribe", "file:///etc/passwd", ``, false, 2},
		{"does not match another resource", caller("ops"), "resources/read", "file:///home/a", ``, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := e.Check(tc.c, tc.method, tc.tool, []byte(tc.args))
			if d.Allowed != tc.allowed || d.Rule != tc.rule {
				t.Fatalf("Check = %+v, want allowed %v rule %d", d, tc.allowed, tc.rule)
			}
			if d.Rule == 1 && d.Message != opsRule().Message {
				t.Errorf("message = %q", d.Message)
			}
		})
	}
	if d := e.Check(caller("ops"), "tools/call", "delete_thing", []byte(`{"environment":"production"}`)); d.Message != "Only ops may delete, and never in production." {
		t.Errorf("message %q", d.Message)
	}
	var nilEngine *Engine
	if d := nilEngine.Check(nil, "tools/call", "x", nil); !d.Allowed {
		t.Error("a nil Engine denied")
	}
}

func TestCheckNumbers(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{{Match: Match{Tools: []string{"pay"}}, Allow: "args.amount <= 100 && args.amount >= 0.5"}}})
	for args, want := range map[string]bool{`{"amount":100}`: true, `{"amount":100.0}`: true, `{"amount":0.5}`: true, `{"amount":101}`: false, `{"amount":1e300}`: false, `{"amount":"5"}`: false, `{}`: false} {
		if d := e.Check(caller(), "tools/call", "pay", []byte(args)); d.Allowed != want {
			t.Errorf("%s: allowed %v, want %v (%v)", args, d.Allowed, want, d.Err)
		}
	}
}

func TestCostLimitDenies(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{{Match: Match{Tools: []string{"*"}}, Allow: "args.items.all(x, args.items.all(y, x != y || x == y))"}}})
	items := make([]int, 5000)
	for i := range items {
		items[i] = i
	}
	raw, _ := json.Marshal(map[string]any{"items": items})
	start := time.Now()
	d := e.Check(caller(), "tools/call", "t", raw)
	took := time.Since(start)
	if d.Allowed || d.Err == nil || !strings.Contains(d.Err.Error(), "cost") {
		t.Fatalf("Check = %+v, want a denial for the cost limit", d)
	}
	if took > time.Second {
		t.Errorf("a call over the cost limit took %v", took)
	}
	// Small arguments stay under it.
	if d := e.Check(caller(), "tools/call", "t", []byte(`{"items":[1,2,3]}`)); !d.Allowed {
		t.Fatalf("small arguments: %+v", d)
	}
}

func TestDeepArgumentsDenied(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{{Match: Match{Tools: []string{"*"}}, Allow: "has(args.a)"}}})
	deep := strings.Repeat(`{"a":`, MaxArgsDepth+1) + "1" + strings.Repeat("}", MaxArgsDepth+1)
	d := e.Check(caller(), "tools/call", "t", []byte(deep))
	if d.Allowed || !errors.Is(d.Err, ErrArgsDepth) {
		t.Fatalf("Check = %+v, want ErrArgsDepth", d)
	}
}

func TestRulesNotReadingArgsIgnoreThem(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{{Match: Match{Tools: []string{"*"}}, Allow: "claims.sub == 'alice'"}}})
	// Arguments a rule does not read are not decoded, so not refused here
	// (the filter refuses unreadable JSON before the policy).
	if d := e.Check(caller(), "tools/call", "t", []byte(`{"a":1,"a":2}`)); !d.Allowed {
		t.Fatalf("Check = %+v", d)
	}
}

func TestListable(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{
		opsRule(),
		{Match: Match{Tools: []string{"read_*"}}, Allow: "args.path.startsWith('/public') || 'admin' in claims.groups"},
		{Match: Match{Tools: []string{"never"}}, Allow: "false"},
		{Match: Match{Tools: []string{"prod_only"}}, Allow: "'ops' in claims.groups && args.environment == 'production'"},
	}})
	for _, tc := range []struct {
		name string
		c    *Caller
		tool string
		want bool
	}{
		{"lists delete_thing for ops (callable outside production)", caller("ops"), "delete_thing", true},
		{"hides delete_thing outside ops", caller("dev"), "delete_thing", false},
		{"hides delete_thing from a caller without groups", &Caller{ClaimsJSON: []byte(`{}`)}, "delete_thing", false},
		{"lists a tool callable for some arguments", caller("dev"), "read_file", true},
		{"lists a tool callable for every argument", caller("admin"), "read_file", true},
		{"hides a tool no one may call", caller("ops"), "never", false},
		{"lists a tool callable only with one value", caller("ops"), "prod_only", true},
		{"lists a tool no rule names", caller(), "echo", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.Listable(tc.c, "tools/call", tc.tool); got != tc.want {
				t.Fatalf("Listable = %v, want %v", got, tc.want)
			}
		})
	}
	if !e.ListsFiltered("tools/call") || e.ListsFiltered("prompts/get") {
		t.Error("ListsFiltered")
	}
}

func TestInject(t *testing.T) {
	e := mustNew(t, Config{Inject: map[string]map[string]string{
		"create_ticket": {"reporter": "claims.sub", "tenant": "claims.tenant", "labels": "['from:' + client_id]", "n": "size(scopes)"},
		"needs_org":     {"org": "claims.org"},
	}})
	got, err := e.Injected(caller(), "create_ticket")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if string(b) != `{"labels":["from:app"],"n":1,"reporter":"alice","tenant":"acme"}` {
		t.Errorf("injected %s", b)
	}
	if !e.Injects("create_ticket") || e.Injects("echo") {
		t.Error("Injects")
	}
	if _, err := e.Injected(caller(), "needs_org"); err == nil || !strings.Contains(err.Error(), `"org"`) {
		t.Errorf("a missing claim: err = %v, want one naming the argument", err)
	}
	if got, err := e.Injected(caller(), "echo"); got != nil || err != nil {
		t.Errorf("a tool without injections: %v %v", got, err)
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "a/b", true}, {"delete_*", "delete_thing", true}, {"delete_*", "xdelete_thing", false},
		{"a*b*c", "abc", true}, {"a*b*c", "aXbYc", true}, {"a*b*c", "aXbYcd", false}, {"a*a", "a", false},
		{"exact", "exact", true}, {"exact", "exactly", false}, {"*_admin", "stats_admin", true}, {"**", "x", true},
	} {
		if got := Glob(tc.p, tc.s); got != tc.want {
			t.Errorf("Glob(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

func FuzzCheck(f *testing.F) {
	e, err := New(Config{Rules: []Rule{opsRule(), {Match: Match{Tools: []string{"*"}}, Allow: "!has(args.x) || size(string(args.x)) < 10"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"environment":"staging"}`), "delete_thing")
	f.Add([]byte(`{"environment":"staging","environment":"production"}`), "delete_thing")
	f.Add([]byte(`{"x":[[[[1]]]]}`), "t")
	f.Fuzz(func(t *testing.T, args []byte, tool string) {
		d := e.Check(caller("ops"), "tools/call", tool, args)
		m, err := DecodeArgs(args)
		if err != nil && d.Allowed && Glob("delete_*", tool) {
			t.Fatalf("arguments DecodeArgs refuses (%v) were allowed", err)
		}
		if d.Allowed && m != nil && Glob("delete_*", tool) && m["environment"] == "production" {
			t.Fatal("production allowed")
		}
		_ = e.Listable(caller("ops"), "tools/call", tool)
	})
}

// refMembers is a reference for DecodeArgs's checks, on encoding/json's
// tokens: ErrDuplicateMember or ErrArgsDepth, or nil.
func refMembers(d *json.Decoder, depth int) error {
	t, err := d.Token()
	if err != nil {
		return err
	}
	delim, ok := t.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= MaxArgsDepth {
		return ErrArgsDepth
	}
	seen := map[string]bool{}
	for d.More() {
		if delim == '{' {
			k, err := d.Token()
			if err != nil {
				return err
			}
			if seen[k.(string)] {
				return ErrDuplicateMember
			}
			seen[k.(string)] = true
		}
		if err := refMembers(d, depth+1); err != nil {
			return err
		}
	}
	_, err = d.Token()
	return err
}

func FuzzDecodeArgs(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1,2,{"c":null}]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"a\u0062":1,"ab":2}`))
	f.Add([]byte(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := DecodeArgs(raw)
		if json.Valid(raw) && len(bytes.TrimSpace(raw)) > 0 && bytes.TrimSpace(raw)[0] == '{' {
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber()
			want := refMembers(d, 0)
			if errors.Is(err, ErrArgsNumber) && want != nil && !errors.Is(want, ErrDuplicateMember) && !errors.Is(want, ErrArgsDepth) {
				want = ErrArgsNumber // the reference cannot read it either
			}
			if errors.Is(err, ErrArgsNumber) && want == nil {
				var std map[string]any
				if json.Unmarshal(raw, &std) == nil {
					t.Fatalf("DecodeArgs(%q) refused a number encoding/json reads", raw)
				}
				want = ErrArgsNumber
			}
			if !errors.Is(err, want) && !(err == nil && want == nil) {
				t.Fatalf("DecodeArgs(%q) = %v, reference %v", raw, err, want)
			}
		}
		if err != nil {
			return
		}
		var std map[string]any
		if json.Unmarshal(raw, &std) != nil && len(strings.TrimSpace(string(raw))) > 0 && strings.TrimSpace(string(raw)) != "null" {
			t.Fatalf("DecodeArgs accepted what encoding/json refuses: %q", raw)
		}
		if len(std) != len(m) {
			t.Fatalf("member count %d, encoding/json %d", len(m), len(std))
		}
	})
}

// TestLargeArgumentsAreCostTracked: a rule cheap for small input runs
// untracked on small arguments only; on large ones the cost limit holds.
func TestLargeArgumentsAreCostTracked(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{{Match: Match{Tools: []string{"*"}}, Allow: "!args.text.contains('forbidden')"}}})
	if e.rules[0].fast == nil {
		t.Fatal("a rule of one contains() is not cheap for small input")
	}
	small, _ := json.Marshal(map[string]string{"text": strings.Repeat("a", 1000)})
	if d := e.Check(caller(), "tools/call", "t", small); !d.Allowed {
		t.Fatalf("small: %+v", d)
	}
	large, _ := json.Marshal(map[string]string{"text": strings.Repeat("a", 1<<20)})
	if d := e.Check(caller(), "tools/call", "t", large); d.Allowed || d.Err == nil || !strings.Contains(d.Err.Error(), "cost") {
		t.Fatalf("1 MiB of text: %+v, want a denial for the cost limit", d)
	}
}
