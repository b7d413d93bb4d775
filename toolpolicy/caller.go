package toolpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"

	"github.com/google/cel-go/common/types"
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
	// LoadClaims, when set and ClaimsJSON is nil, gives ClaimsJSON at the
	// first rule that reads the claims.
	LoadClaims func() []byte

	claims  map[string]any
	decoded bool
}

// Claims returns the decoded claims (empty when ClaimsJSON is no object).
func (c *Caller) Claims() map[string]any {
	if c == nil {
		return map[string]any{}
	}
	if !c.decoded {
		c.decoded = true
		if c.ClaimsJSON == nil && c.LoadClaims != nil {
			c.ClaimsJSON = c.LoadClaims()
		}
		d := json.NewDecoder(bytes.NewReader(c.ClaimsJSON))
		d.UseNumber()
		var m map[string]any
		if d.Decode(&m) == nil {
			c.claims, _ = numbers(m, 0).(map[string]any)
		}
		if c.claims == nil {
			c.claims = map[string]any{}
		}
	}
	return c.claims
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
	if raw[0] != '{' {
		return nil, ErrArgsNotObject
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, ErrArgsNotObject
	}
	return v.(map[string]any), nil
}

func decodeValue(d *json.Decoder, depth int) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		if depth >= MaxArgsDepth {
			return nil, ErrArgsDepth
		}
		if x == '[' {
			list := []any{}
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := d.Token()
			return list, err
		}
		m := map[string]any{}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			if _, dup := m[k]; dup {
				return nil, ErrDuplicateMember
			}
			v, err := decodeValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		_, err := d.Token()
		return m, err
	case json.Number:
		return numbers(x, 0), nil
	default:
		return t, nil // string, bool, nil
	}
}

// activation resolves the variables of one request.
type activation struct {
	c            *Caller
	method, name string
	rawArgs      []byte
	args         map[string]any
	argsErr      error
}

var _ interpreter.Activation = (*activation)(nil)

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varClaims:
		return a.c.Claims(), true
	case varArgs:
		if a.args == nil && a.argsErr == nil {
			a.args, a.argsErr = DecodeArgs(a.rawArgs)
		}
		if a.argsErr != nil {
			return types.NewErr("%v", a.argsErr), true
		}
		return a.args, true
	case varMethod:
		return a.method, true
	case varName:
		return a.name, true
	case varClientID:
		if a.c == nil {
			return "", true
		}
		return a.c.ClientID, true
	case varScopes:
		if a.c == nil || a.c.Scopes == nil {
			return []string{}, true
		}
		return a.c.Scopes, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// isFinite reports whether f is a number JSON can carry.
func isFinite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
