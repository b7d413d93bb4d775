package toolpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

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
	ErrArgsNumber      = errors.New("toolpolicy: arguments hold a number beyond float64")
)

// DecodeArgs decodes params.arguments for the rules: absent or null is an
// empty map. A member named twice in one object, at any depth, is
// ErrDuplicateMember (parsers differ on which one counts, RFC 8259 §4, so
// the rule and the server could read different values); nesting deeper
// than MaxArgsDepth is ErrArgsDepth; a number beyond float64 is
// ErrArgsNumber. Integers that fit int64 are int, other numbers double;
// strings are decoded as encoding/json decodes them.
func DecodeArgs(raw []byte) (map[string]any, error) {
	raw = bytes.Trim(raw, " \t\r\n") // JSON's whitespace (RFC 8259 §2)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	if raw[0] != '{' || !json.Valid(raw) {
		return nil, ErrArgsNotObject
	}
	v, _, err := decodeStrict(raw, 0, 0)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// decodeStrict decodes the valid JSON value of v at i in one pass and
// returns it and its end: ErrDuplicateMember for an object naming a
// member twice (names compared decoded), ErrArgsDepth past MaxArgsDepth.
func decodeStrict(v []byte, i, depth int) (any, int, error) {
	i = skipSpace(v, i)
	switch c := v[i]; {
	case c == '{' || c == '[':
		if depth >= MaxArgsDepth {
			return nil, 0, ErrArgsDepth
		}
		var obj map[string]any
		var list []any
		if c == '{' {
			obj = map[string]any{}
		} else {
			list = []any{}
		}
		i = skipSpace(v, i+1)
		for v[i] != '}' && v[i] != ']' {
			var name string
			if obj != nil {
				end := stringEnd(v, i)
				name = jsonText(v[i:end])
				if _, dup := obj[name]; dup {
					return nil, 0, ErrDuplicateMember
				}
				i = skipSpace(v, end) + 1 // the colon
			}
			val, end, err := decodeStrict(v, i, depth+1)
			if err != nil {
				return nil, 0, err
			}
			if obj != nil {
				obj[name] = val
			} else {
				list = append(list, val)
			}
			if i = skipSpace(v, end); v[i] == ',' {
				i = skipSpace(v, i+1)
			}
		}
		if obj != nil {
			return obj, i + 1, nil
		}
		return list, i + 1, nil
	case c == '"':
		end := stringEnd(v, i)
		return jsonText(v[i:end]), end, nil
	}
	start := i
	for i < len(v) {
		switch v[i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			goto done
		}
		i++
	}
done:
	switch lit := string(v[start:i]); lit {
	case "true":
		return true, i, nil
	case "false":
		return false, i, nil
	case "null":
		return nil, i, nil
	default:
		if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return n, i, nil
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			// Beyond float64 (1e400): servers read it differently (an
			// error, Infinity), so no rule decides on it.
			return nil, 0, ErrArgsNumber
		}
		return f, i, nil
	}
}

// jsonText decodes the JSON string q (with its quotes) as encoding/json
// does: without a copy of the decoder's when it has no escape and is
// valid UTF-8.
func jsonText(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 && utf8.Valid(q) {
		return string(q[1 : len(q)-1])
	}
	var s string
	_ = json.Unmarshal(q, &s)
	return s
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
