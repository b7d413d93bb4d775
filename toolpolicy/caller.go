package toolpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Caller is who makes a request, from the verified access token. Its
// claims are decoded at the first rule that reads them; a Caller is for
// one request and one goroutine.
type Caller struct {
	Subject  string
	ClientID string
	Scopes   []string
	// ClaimsJSON is the JSON object of the token's claims: the verified
	// JWT's payload or the RFC 7662 §2.2 introspection answer.
	ClaimsJSON []byte
	// LoadClaims, when set, gives the decoded claims instead of
	// ClaimsJSON (DecodeClaims of them, kept by the caller's owner for
	// the token's later requests) and the size in bytes of their JSON.
	// The map is read, never written.
	LoadClaims func() (claims map[string]any, size int)

	claims  map[string]any
	size    int
	decoded bool
}

// claimsSize is the size of the claims' JSON.
func (c *Caller) claimsSize() int {
	if c == nil {
		return 0
	}
	c.Claims()
	return c.size
}

// Claims returns the decoded claims (empty when there are none).
func (c *Caller) Claims() map[string]any {
	if c == nil {
		return map[string]any{}
	}
	if !c.decoded {
		c.decoded = true
		if c.LoadClaims != nil {
			c.claims, c.size = c.LoadClaims()
		} else {
			c.claims, c.size = DecodeClaims(c.ClaimsJSON), len(c.ClaimsJSON)
		}
		if c.claims == nil {
			c.claims = map[string]any{}
		}
	}
	return c.claims
}

// DecodeClaims decodes a JSON object of claims for the rules: integers
// that fit int64 are int, other numbers double. Not an object: an empty
// map.
func DecodeClaims(raw []byte) map[string]any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil || m == nil {
		return map[string]any{}
	}
	out, _ := numbers(m, 0).(map[string]any)
	return out
}

// Claim returns the claim name as a string: a string as it is, a number
// or a boolean as its JSON text; "" when absent or of another type.
func (c *Caller) Claim(name string) string {
	switch v := c.Claims()[name].(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// numbers replaces json.Number by int64 (an integer that fits) or float64.
func numbers(v any, depth int) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e, depth+1)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e, depth+1)
		}
	}
	return v
}

// MaxArgsDepth bounds the nesting of arguments a rule reads.
const MaxArgsDepth = 64

// Errors of DecodeArgs.
var (
	ErrDuplicateMember = errors.New("toolpolicy: arguments name a member twice")
	ErrArgsDepth       = errors.New("toolpolicy: arguments nested too deeply")
	ErrArgsNotObject   = errors.New("toolpolicy: arguments are not a JSON object")
)

// DecodeArgs decodes params.arguments for the rules: absent or null is an
// empty map. A member named twice in one object, at any depth, is
// ErrDuplicateMember (parsers differ on which one counts, RFC 8259 §4, so
// the rule and the server could read different values); nesting deeper
// than MaxArgsDepth is ErrArgsDepth. Integers that fit int64 are int,
// other numbers double.
func DecodeArgs(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	if raw[0] != '{' || !json.Valid(raw) {
		return nil, ErrArgsNotObject
	}
	if _, err := checkMembers(raw, 0, 0); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, ErrArgsNotObject
	}
	return numbers(m, 0).(map[string]any), nil
}

// checkMembers walks the valid JSON value of v at i and returns its end:
// ErrDuplicateMember for an object naming a member twice (names compared
// decoded), ErrArgsDepth past MaxArgsDepth.
func checkMembers(v []byte, i, depth int) (int, error) {
	i = skipSpace(v, i)
	switch v[i] {
	case '{', '[':
		if depth >= MaxArgsDepth {
			return 0, ErrArgsDepth
		}
		obj := v[i] == '{'
		var buf [16]string
		names := buf[:0]
		var set map[string]bool
		i = skipSpace(v, i+1)
		for v[i] != '}' && v[i] != ']' {
			if obj {
				end := stringEnd(v, i)
				name := string(v[i+1 : end-1])
				if bytes.IndexByte(v[i:end], '\\') >= 0 {
					_ = json.Unmarshal(v[i:end], &name)
				}
				switch {
				case set != nil:
					if set[name] {
						return 0, ErrDuplicateMember
					}
					set[name] = true
				case len(names) < 16:
					for _, n := range names {
						if n == name {
							return 0, ErrDuplicateMember
						}
					}
					names = append(names, name)
				default:
					set = make(map[string]bool, 32)
					for _, n := range names {
						set[n] = true
					}
					if set[name] {
						return 0, ErrDuplicateMember
					}
					set[name] = true
				}
				i = skipSpace(v, end) + 1 // the colon
			}
			var err error
			if i, err = checkMembers(v, i, depth+1); err != nil {
				return 0, err
			}
			if i = skipSpace(v, i); v[i] == ',' {
				i = skipSpace(v, i+1)
			}
		}
		return i + 1, nil
	case '"':
		return stringEnd(v, i), nil
	}
	for i < len(v) {
		switch v[i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return i, nil
		}
		i++
	}
	return i, nil
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\r' || v[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index past the JSON string starting at v[i].
func stringEnd(v []byte, i int) int {
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(v)
}

// activation resolves the variables of one request. Each is converted to
// a CEL value once, at its first reference, not at every rule's.
type activation struct {
	c            *Caller
	method, name string
	rawArgs      []byte
	args         map[string]any
	argsErr      error
	vals         [6]ref.Val // by variable: claims, args, method, name, client_id, scopes
}

var _ interpreter.Activation = (*activation)(nil)

var varIndex = map[string]int{varClaims: 0, varArgs: 1, varMethod: 2, varName: 3, varClientID: 4, varScopes: 5}

func (a *activation) ResolveName(name string) (any, bool) {
	i, ok := varIndex[name]
	if !ok {
		return nil, false
	}
	if v := a.vals[i]; v != nil {
		return v, true
	}
	var v ref.Val
	switch i {
	case 0:
		v = types.NewStringInterfaceMap(types.DefaultTypeAdapter, a.c.Claims())
	case 1:
		if a.args == nil && a.argsErr == nil {
			a.args, a.argsErr = DecodeArgs(a.rawArgs)
		}
		if a.argsErr != nil {
			return types.NewErr("%v", a.argsErr), true
		}
		v = types.NewStringInterfaceMap(types.DefaultTypeAdapter, a.args)
	case 2:
		v = types.String(a.method)
	case 3:
		v = types.String(a.name)
	case 4:
		if a.c != nil {
			v = types.String(a.c.ClientID)
		} else {
			v = types.String("")
		}
	case 5:
		var scopes []string
		if a.c != nil {
			scopes = a.c.Scopes
		}
		v = types.NewStringList(types.DefaultTypeAdapter, scopes)
	}
	a.vals[i] = v
	return v, true
}

func (a *activation) Parent() interpreter.Activation { return nil }

// isFinite reports whether f is a number JSON can carry.
func isFinite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
