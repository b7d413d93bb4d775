package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const off = OfflineAccess

// TestCap: the person's mapped scopes bound a grant's ceiling and
// defaults; a named scope beyond them is refused, naming it.
func TestCap(t *testing.T) {
	ceiling := []string{"mcp:tools", "mcp:admin", off}
	defaults := []string{"mcp:tools", "mcp:admin"}
	for _, tc := range []struct {
		name                   string
		requested, allowed     []string
		wantCeiling, wantDeflt []string
		refused                []string // the error's scopes; nil for no error
		named                  bool
	}{
		{"names a scope within the mapping", []string{"mcp:tools"}, []string{"mcp:tools"}, []string{"mcp:tools", off}, []string{"mcp:tools"}, nil, false},
		{"refuses a named scope beyond the mapping", []string{"mcp:tools", "mcp:admin"}, []string{"mcp:tools"}, nil, nil, []string{"mcp:admin"}, true},
		{"names each scope beyond the mapping once", []string{"mcp:admin", "mcp:admin"}, nil, nil, nil, []string{"mcp:admin"}, true},
		{"leaves unrequested defaults beyond the mapping out", nil, []string{"mcp:tools"}, []string{"mcp:tools", off}, []string{"mcp:tools"}, nil, false},
		{"refuses a request naming no scope when no default is mapped", nil, nil, nil, nil, []string{"mcp:tools", "mcp:admin"}, false},
		{"an empty cap refuses every named scope", []string{"mcp:tools"}, []string{}, nil, nil, []string{"mcp:tools"}, true},
		{"never caps offline_access", []string{off}, []string{"mcp:admin"}, []string{"mcp:admin", off}, []string{"mcp:admin"}, nil, false},
		{"offline_access alone with an empty cap is a request naming no scope", []string{off}, nil, nil, nil, []string{"mcp:tools", "mcp:admin"}, false},
		{"drops a named scope outside the ceiling as before", []string{"openid", "mcp:tools"}, []string{"mcp:tools"}, []string{"mcp:tools", off}, []string{"mcp:tools"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, d, err := Cap(tc.requested, ceiling, defaults, tc.allowed)
			if tc.refused != nil {
				var np *NotPermittedError
				if !errors.As(err, &np) || !slices.Equal(np.Scopes, tc.refused) || np.Named != tc.named {
					t.Fatalf("error %#v; want NotPermittedError %q named %v", err, tc.refused, tc.named)
				}
				return
			}
			if err != nil || !slices.Equal(c, tc.wantCeiling) || !slices.Equal(d, tc.wantDeflt) {
				t.Fatalf("ceiling %v defaults %v err %v; want %v %v", c, d, err, tc.wantCeiling, tc.wantDeflt)
			}
		})
	}
}

// TestConsent: at the consent page, named scopes beyond the cap are
// refused, default ones narrowed and refused only when none is left;
// offline_access is never capped.
func TestConsent(t *testing.T) {
	for _, tc := range []struct {
		name               string
		scopes, allowed    []string
		named              bool
		kept, notPermitted []string
	}{
		{"named within the cap", []string{"a", "b"}, []string{"a", "b"}, true, []string{"a", "b"}, nil},
		{"named beyond the cap", []string{"a", "b"}, []string{"a"}, true, nil, []string{"b"}},
		{"defaults beyond the cap are narrowed", []string{"a", "b"}, []string{"a"}, false, []string{"a"}, nil},
		{"defaults all beyond the cap", []string{"b"}, []string{"a"}, false, nil, []string{"b"}},
		{"defaults beyond an empty cap with offline_access", []string{"b", off}, nil, false, nil, []string{"b"}},
		{"offline_access is kept", []string{"a", off}, []string{"a"}, true, []string{"a", off}, nil},
		{"nothing asked", nil, nil, true, nil, nil},
		{"only offline_access asked", []string{off}, nil, true, []string{off}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, err := Consent(tc.scopes, tc.named, tc.allowed)
			var np *NotPermittedError
			switch {
			case tc.notPermitted != nil:
				if !errors.As(err, &np) || !slices.Equal(np.Scopes, tc.notPermitted) || kept != nil {
					t.Fatalf("Consent = %v, %v; want not permitted %v", kept, err, tc.notPermitted)
				}
			case err != nil || !slices.Equal(kept, tc.kept):
				t.Fatalf("Consent = %v, %v; want %v", kept, err, tc.kept)
			}
		})
	}
}

// TestCapRefresh: a refresh of a capped person's grant.
func TestCapRefresh(t *testing.T) {
	granted := []string{"mcp:tools", "mcp:admin", off}
	for _, tc := range []struct {
		name               string
		requested, allowed []string
		narrowable         bool
		want               []string
		err                error
	}{
		{"keeps what the cap allows", nil, []string{"mcp:tools", "mcp:admin"}, true, granted, nil},
		{"leaves scopes beyond the cap out", nil, []string{"mcp:tools"}, true, []string{"mcp:tools", off}, nil},
		{"refuses a named scope beyond the cap", []string{"mcp:admin"}, []string{"mcp:tools"}, true, nil, &NotPermittedError{}},
		{"refuses a grant left with none of its scopes", nil, nil, true, nil, ErrNoneLeft},
		{"refuses narrowing it cannot write", nil, []string{"mcp:tools"}, false, nil, ErrNotAllLeft},
		{"lets an unchanged grant through where it cannot narrow", nil, []string{"mcp:tools", "mcp:admin"}, false, granted, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CapRefresh(tc.requested, granted, tc.allowed, tc.narrowable)
			var np *NotPermittedError
			switch {
			case tc.err == nil && (err != nil || !slices.Equal(got, tc.want)):
				t.Fatalf("CapRefresh = %v, %v; want %v", got, err, tc.want)
			case tc.err != nil && errors.As(tc.err, &np):
				if !errors.As(err, &np) {
					t.Fatalf("CapRefresh error %v; want not permitted", err)
				}
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("CapRefresh error %v; want %v", err, tc.err)
			}
		})
	}
}

// TestRefresh pins the refresh rule (RFC 6749 §6): the ceiling is the
// original grant's scopes that are still the resource's and the client's,
// plus offline_access, in the original order; a refresh naming no scope of
// the resource gets that ceiling as it is.
func TestRefresh(t *testing.T) {
	c := Client{Scopes: []string{"mcp:tools", "mcp:admin", "other:read", off}}
	narrow := Client{Scopes: []string{"mcp:tools", "other:read", off}}
	res := &Resource{Scopes: []string{"mcp:tools", "mcp:admin"}, DefaultScopes: []string{"mcp:tools"}}
	for _, tc := range []struct {
		name                string
		c                   Client
		res                 *Resource
		original, requested []string
		want                []string
		err                 error
	}{
		{"drops scopes not of the resource", c, res, []string{"mcp:tools", "other:read", off, "gone:scope"}, nil, []string{"mcp:tools", off}, nil},
		{"drops scopes the client may no longer have", narrow, res, []string{"mcp:admin", "mcp:tools"}, nil, []string{"mcp:tools"}, nil},
		{"keeps the original order with offline_access first", c, res, []string{off, "mcp:tools"}, nil, []string{off, "mcp:tools"}, nil},
		{"offline_access alone names no scope", c, res, []string{off, "mcp:admin"}, []string{off}, []string{off, "mcp:admin"}, nil},
		{"without a resource only offline_access is left", c, nil, []string{"mcp:tools", off}, nil, []string{off}, nil},
		{"narrows to the named scope", c, res, []string{"mcp:tools", "mcp:admin", off}, []string{"mcp:admin"}, []string{"mcp:admin"}, nil},
		{"a named unknown scope with offline_access gets the defaults", c, res, []string{"mcp:tools", off}, []string{"openid", off}, []string{"mcp:tools", off}, nil},
		{"never widens", c, res, []string{"mcp:tools"}, []string{"mcp:admin"}, nil, ErrNoScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Refresh(tc.c, tc.res, tc.original, tc.requested)
			if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
				t.Errorf("Refresh = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestDefaults pins the defaults: the scopes the client registered with
// when any may be granted on the resource, else the resource's
// DefaultScopes, always within the client's ceiling.
func TestDefaults(t *testing.T) {
	res := Resource{Scopes: []string{"mcp:tools", "mcp:admin"}, DefaultScopes: []string{"mcp:tools"}}
	all := []string{"mcp:tools", "mcp:admin", "other:read"}
	for _, tc := range []struct {
		name             string
		scopes, defaults []string
		want             []string
	}{
		{"none registered: the resource's", all, nil, []string{"mcp:tools"}},
		{"registered on the resource: those", all, []string{"mcp:admin"}, []string{"mcp:admin"}},
		{"registered only of another resource: the resource's", all, []string{"other:read"}, []string{"mcp:tools"}},
		{"registered beyond the ceiling: the resource's", []string{"mcp:tools"}, []string{"mcp:admin"}, []string{"mcp:tools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Defaults(Client{Scopes: tc.scopes, DefaultScopes: tc.defaults}, res); !slices.Equal(got, tc.want) {
				t.Errorf("Defaults = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGrant: authorization and client credentials.
func TestGrant(t *testing.T) {
	res := Resource{Scopes: []string{"mcp:tools", "mcp:admin"}, DefaultScopes: []string{"mcp:tools"}}
	c := Client{Scopes: []string{"mcp:tools", off}, Refresh: true}
	for _, tc := range []struct {
		name      string
		c         Client
		res       Resource
		requested []string
		want      []string
		err       error
	}{
		{"a request naming none gets the defaults", c, res, nil, []string{"mcp:tools"}, nil},
		{"unknown scopes are dropped", c, res, []string{"openid", "mcp:tools"}, []string{"mcp:tools"}, nil},
		{"a scope beyond the client is refused", c, res, []string{"mcp:admin"}, nil, ErrNoScope},
		{"offline_access with the defaults", c, res, []string{off}, []string{"mcp:tools", off}, nil},
		{"offline_access needs the refresh grant", Client{Scopes: c.Scopes}, res, []string{"mcp:tools", off}, []string{"mcp:tools"}, nil},
		{"no default the client may have", Client{Scopes: []string{"mcp:admin"}}, res, nil, nil, ErrNoDefaultScope},
		{"a resource without scopes grants none", c, Resource{}, []string{"mcp:tools"}, nil, nil},
		{"a resource without scopes grants offline_access", c, Resource{}, []string{"mcp:tools", off}, []string{off}, nil},
		{"registered scopes are the default", Client{Scopes: []string{"mcp:tools", "mcp:admin"}, DefaultScopes: []string{"mcp:admin"}}, res, nil, []string{"mcp:admin"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Grant(tc.c, tc.res, tc.requested)
			if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
				t.Errorf("Grant = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestExchange: the exchange rule bounds the ceiling and the defaults,
// then the person's cap applies.
func TestExchange(t *testing.T) {
	res := Resource{Scopes: []string{"up:read", "up:write"}, DefaultScopes: []string{"up:write"}}
	c := Client{Scopes: []string{"up:read", "up:write"}}
	rule := []string{"up:read", "up:write"}
	for _, tc := range []struct {
		name              string
		rule, requested   []string
		allowed           []string
		capped            bool
		want, notPermited []string
		err               error
	}{
		{"the defaults within the rule", rule, nil, nil, false, []string{"up:write"}, nil, nil},
		{"the ceiling when no default is within the rule", []string{"up:read"}, nil, nil, false, []string{"up:read"}, nil, nil},
		{"a named scope within the rule", rule, []string{"up:read"}, nil, false, []string{"up:read"}, nil, nil},
		{"a named scope beyond the rule", []string{"up:read"}, []string{"up:write"}, nil, false, nil, nil, ErrNoScope},
		{"capped: a named scope beyond the cap", rule, []string{"up:write"}, []string{"up:read"}, true, nil, []string{"up:write"}, nil},
		{"capped: defaults beyond the cap", rule, nil, []string{"up:read"}, true, nil, []string{"up:write"}, nil},
		{"capped: within the cap", rule, []string{"up:read"}, []string{"up:read"}, true, []string{"up:read"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Exchange(c, res, tc.rule, tc.requested, tc.allowed, tc.capped)
			var np *NotPermittedError
			switch {
			case tc.notPermited != nil:
				if !errors.As(err, &np) || !slices.Equal(np.Scopes, tc.notPermited) {
					t.Fatalf("Exchange error %v; want not permitted %v", err, tc.notPermited)
				}
			case !errors.Is(err, tc.err) || !slices.Equal(got, tc.want):
				t.Fatalf("Exchange = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestJWTBearer: ID-JAGs are bounded by their scope claim, workload tokens
// by their rule; neither grants offline_access.
func TestJWTBearer(t *testing.T) {
	res := Resource{Scopes: []string{"mcp:tools", "mcp:admin"}, DefaultScopes: []string{"mcp:tools"}}
	c := Client{Scopes: []string{"mcp:tools", "mcp:admin", off}, Refresh: true}
	if got, err := IDJAG(c, res, nil, false, []string{"mcp:admin", off}); err != nil || !slices.Equal(got, []string{"mcp:admin"}) {
		t.Errorf("IDJAG without a claim = %q, %v", got, err)
	}
	if got, err := IDJAG(c, res, []string{"mcp:admin"}, true, nil); err != nil || !slices.Equal(got, []string{"mcp:admin"}) {
		t.Errorf("IDJAG with a claim outside the defaults = %q, %v; want the claim's", got, err)
	}
	if _, err := IDJAG(c, res, []string{"mcp:admin"}, true, []string{"mcp:tools"}); !errors.Is(err, ErrNoScope) {
		t.Errorf("IDJAG naming a scope beyond its claim: %v", err)
	}
	if _, err := IDJAG(c, res, []string{}, true, nil); !errors.Is(err, ErrNoDefaultScope) {
		t.Errorf("IDJAG with an empty claim: %v", err)
	}
	if got, err := Workload(res, []string{"mcp:tools", "other"}, []string{off}); err != nil || !slices.Equal(got, []string{"mcp:tools"}) {
		t.Errorf("Workload = %q, %v", got, err)
	}
	if _, err := Workload(res, []string{"mcp:tools"}, []string{"mcp:admin"}); !errors.Is(err, ErrNoScope) {
		t.Errorf("Workload beyond its rule: %v", err)
	}
}

// TestRegistration: a registered scope never goes beyond the policy.
func TestRegistration(t *testing.T) {
	allowed := []string{"mcp:tools", "mcp:admin"}
	for _, tc := range []struct {
		requested []string
		want      []string
		defaulted bool
	}{
		{[]string{"mcp:admin", "openid", "mcp:admin"}, []string{"mcp:admin"}, false},
		{[]string{"*"}, allowed, true},
		{nil, allowed, true},
	} {
		got, defaulted := Registration(tc.requested, allowed)
		if !slices.Equal(got, tc.want) || defaulted != tc.defaulted {
			t.Errorf("Registration(%q) = %q, %v; want %q, %v", tc.requested, got, defaulted, tc.want, tc.defaulted)
		}
	}
}

// TestNamesScope: empty entries and offline_access name no scope.
func TestNamesScope(t *testing.T) {
	for _, tc := range []struct {
		requested []string
		want      bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{off}, false},
		{[]string{"", off}, false},
		{[]string{off, "mcp:tools"}, true},
		{[]string{"openid"}, true},
	} {
		if got := NamesScope(tc.requested); got != tc.want {
			t.Errorf("NamesScope(%q) = %v, want %v", tc.requested, got, tc.want)
		}
	}
}

// TestCeilingOfAResourceWithoutScopes: nothing, and no panic.
func TestCeilingOfAResourceWithoutScopes(t *testing.T) {
	if got := Ceiling(Client{Scopes: []string{"mcp:tools"}}, Resource{}); len(got) != 0 {
		t.Errorf("Ceiling = %q, want none", got)
	}
}

// FuzzSelect checks the scope rule's invariants on any request: what is
// granted is within the ceiling, never empty, and either scopes the
// request named or the defaults (plus offline_access when asked for).
func FuzzSelect(f *testing.F) {
	f.Add("mcp:tools mcp:admin", "mcp:tools mcp:admin offline_access", "mcp:tools")
	f.Add("openid profile", "mcp:tools offline_access", "mcp:tools")
	f.Add("offline_access", "mcp:tools", "mcp:tools")
	f.Add("", "mcp:tools", "")
	f.Fuzz(func(t *testing.T, requested, ceiling, defaults string) {
		req, ceil := strings.Split(requested, " "), strings.Fields(ceiling)
		var def []string
		for _, d := range strings.Fields(defaults) {
			if slices.Contains(ceil, d) && d != off {
				def = append(def, d)
			}
		}
		out, err := Select(req, ceil, def)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v with scopes %q", err, out)
			}
			return
		}
		if len(out) == 0 {
			t.Fatal("no error and no scope")
		}
		fromDefaults := true
		for _, sc := range out {
			if !slices.Contains(ceil, sc) {
				t.Fatalf("%q granted outside the ceiling %q", sc, ceil)
			}
			if sc != off && !slices.Contains(def, sc) {
				fromDefaults = false
			}
		}
		if !fromDefaults {
			for _, sc := range out {
				if !slices.Contains(req, sc) {
					t.Fatalf("%q granted though not requested (request %q)", sc, req)
				}
			}
		}
		if slices.Contains(out, off) && !slices.Contains(req, off) {
			t.Fatalf("offline_access granted though not requested")
		}
	})
}
