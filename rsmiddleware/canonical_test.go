package rsmiddleware

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strings"
	"testing"
)

func TestCanonicalJSONNumbers(t *testing.T) {
	// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	}
	for _, tt := range tests {
		if got := esNumber(math.Float64frombits(tt.bits)); got != tt.want {
			t.Errorf("esNumber(%#016x) = %s, want %s", tt.bits, got, tt.want)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"sorts members by UTF-16 code units (RFC 8785 §3.2.3)",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"drops whitespace and respells numbers", " { \"b\" : [ 1.0 , 2e0 , -0 , 1E-7 ] , \"a\" : true } ", `{"a":true,"b":[1,2,0,1e-7]}`},
		{"escapes only what it must", `"\u0041\u2028\u001f\/\"\\\t"`, "\"A\u2028\\u001f/\\\"\\\\\\t\""},
		{"nests", `{"z":{"y":null,"x":[{}]}}`, `{"z":{"x":[{}],"y":null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil || string(got) != tt.want {
				t.Fatalf("CanonicalJSON(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"a":1} {"b":2}`, `1e400`, `[1,]`} {
		if _, err := CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q) accepted", bad)
		}
	}
}

func TestArgumentsDigest(t *testing.T) {
	sum := sha256.Sum256([]byte(`{"a":1,"b":"x"}`))
	want := hex.EncodeToString(sum[:])
	for _, in := range []string{`{"b":"x","a":1}`, `{ "a" : 1.0, "b" : "\u0078" }`} {
		if got, err := ArgumentsDigest([]byte(in)); err != nil || got != want {
			t.Errorf("ArgumentsDigest(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	empty := sha256.Sum256([]byte(`{}`))
	for _, in := range []string{``, `null`, ` {} `} {
		if got, _ := ArgumentsDigest([]byte(in)); got != hex.EncodeToString(empty[:]) {
			t.Errorf("ArgumentsDigest(%q) = %s, want the digest of {}", in, got)
		}
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":[1,2.5e10,-0.0],"a":"\u00e9"}`, `[]`, `"x"`, `1e-7`, `{"a":{"a":{}}}`, `[true,false,null]`,
		`{"text":"hello"}`, `{"a":1,"b":[-5,"é",{}],"c":null}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `-0`, `0`, `123456789012345`,
		`1234567890123456`, `"\xff"`, `{"a":01}`, `[1,]`, `{"a":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := CanonicalJSON(in)
		// What ArgumentsDigest hashes as it is must be what it would
		// otherwise canonicalise it to.
		if isCanonical(in) && (err != nil || string(c) != string(in)) {
			t.Fatalf("isCanonical(%q), but CanonicalJSON gives %q (%v)", in, c, err)
		}
		if err != nil {
			return
		}
		if !isCanonical(c) && isCanonicalSubset(c) {
			t.Fatalf("the canonical form %q of the recognised subset is not recognised", c)
		}
		// The canonical form is valid JSON and a fixed point.
		c2, err := CanonicalJSON(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("not a fixed point: %s -> %s (%v)", c, c2, err)
		}
	})
}

// isCanonicalSubset reports whether c (a canonical form) stays within what
// isCanonical claims to recognise: no escapes, no non-ASCII member names,
// no number with a fraction, an exponent or more than 15 digits.
func isCanonicalSubset(c []byte) bool {
	inString, key, digits := false, false, 0
	for i, b := range c {
		switch {
		case inString && b == '"':
			inString = false
		case inString && (b == '\\' || key && b >= 0x80):
			return false
		case inString:
		case b == '"':
			inString, key = true, i > 0 && (c[i-1] == '{' || c[i-1] == ',') && !inArray(c[:i])
		case b >= '0' && b <= '9':
			if digits++; digits > 15 {
				return false
			}
		case b == '.' || b == 'e' || b == 'E':
			return false
		default:
			digits = 0
		}
	}
	return true
}

// inArray reports whether the innermost open container of the canonical
// prefix p is an array.
func inArray(p []byte) bool {
	var stack []byte
	inString := false
	for _, b := range p {
		switch {
		case inString && b == '\\':
			return false // not reached for the subset: escapes end it earlier
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			stack = append(stack, b)
		case b == '}' || b == ']':
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) > 0 && stack[len(stack)-1] == '['
}

func TestIDKeyMatchesSpellingsOfOneID(t *testing.T) {
	// Each id's key is its RFC 8785 form, written out here rather than
	// computed, so that a key shared by every id would fail.
	for want, spellings := range map[string][]string{
		`1`:                    {`1`, `1.0`, `1e0`, `10e-1`},
		`0`:                    {`0`, `-0`, `0.0`},
		`-12`:                  {`-12`, `-1.2e1`},
		`"a"`:                  {`"a"`, `"\u0061"`},
		`"1"`:                  {`"1"`, `"\u0031"`},
		`12345678901234567000`: {`12345678901234567890`, `12345678901234567000`},
	} {
		for _, id := range spellings {
			if got, err := idKey([]byte(id)); err != nil || got != want {
				t.Errorf("idKey(%s) = %q, %v; want %q", id, got, err, want)
			}
		}
	}
}

// TestIsCanonical: the recogniser of texts already canonical accepts the
// subset it documents and nothing else: truncated, invalid or
// non-canonical texts are refused (they then take CanonicalJSON).
func TestIsCanonical(t *testing.T) {
	for _, in := range []string{
		`{}`, `[]`, `{"a":1,"b":[true,false,null,"x"]}`, `[false]`, `{"a":false}`, `{"a":{"b":[]}}`,
		`-12`, `123456789012345`, `{"a":1,"a ":2}`, `"é"`,
	} {
		if !isCanonical([]byte(in)) {
			t.Errorf("isCanonical(%s) = false", in)
		}
		if c, err := CanonicalJSON([]byte(in)); err != nil || string(c) != in {
			t.Errorf("CanonicalJSON(%s) = %s, %v: not canonical after all", in, c, err)
		}
	}
	for _, in := range []string{
		// truncated
		`{`, `[`, `"abc`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `[1`, `[1,`,
		// not JSON
		`{"a",1}`, `{a":1}`, `{"a":"}`, `-`, `-a`,
		// JSON, not canonical
		`{"a ":1,"a":2}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `1.5`, `[1.0]`, `[1e5]`, `1E5`,
		`1234567890123456`, `12345678901234567`, `-0`, `01`, `[-0]`, `{"a": 1}`, `"\u0041"`,
	} {
		if isCanonical([]byte(in)) {
			t.Errorf("isCanonical(%s) = true", in)
		}
	}
}

// TestCanonicalJSONDepth: 1001 levels of nesting are accepted, 1002 are
// refused, by CanonicalJSON and ArgumentsDigest alike, for arrays and
// objects.
func TestCanonicalJSONDepth(t *testing.T) {
	nest := func(open, close string, n int) []byte {
		return []byte(strings.Repeat(open, n-1) + "[]" + strings.Repeat(close, n-1))
	}
	for _, kind := range []struct{ open, close string }{{"[", "]"}, {`{"a":`, "}"}} {
		ok, deep := nest(kind.open, kind.close, 1001), nest(kind.open, kind.close, 1002)
		if _, err := CanonicalJSON(ok); err != nil {
			t.Errorf("CanonicalJSON of 1001 levels of %s: %v", kind.open, err)
		}
		if _, err := ArgumentsDigest(ok); err != nil {
			t.Errorf("ArgumentsDigest of 1001 levels of %s: %v", kind.open, err)
		}
		if _, err := CanonicalJSON(deep); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
			t.Errorf("CanonicalJSON of 1002 levels of %s: %v; want nested too deeply", kind.open, err)
		}
		if _, err := ArgumentsDigest(deep); err == nil {
			t.Errorf("ArgumentsDigest of 1002 levels of %s accepted", kind.open)
		}
	}
}
