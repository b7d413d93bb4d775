package rsmiddleware

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxCanonicalDepth bounds the nesting CanonicalJSON accepts.
const maxCanonicalDepth = 1000

// CanonicalJSON returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text v: no insignificant whitespace, object members sorted by
// their names' UTF-16 code units (§3.2.3), numbers in the ECMAScript
// Number-to-String form (§3.2.2.3), strings with the minimal escapes of
// §3.2.2.2. Two JSON texts that differ only in formatting, member order or
// number spelling have the same canonical form.
func CanonicalJSON(v []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var val any
	if err := dec.Decode(&val); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("rsmiddleware: trailing data after JSON value")
	}
	var b bytes.Buffer
	if err := writeCanonical(&b, val, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ArgumentsDigest returns the lowercase hex SHA-256 of the canonical JSON
// (RFC 8785) of args, the digest the audit records instead of a call's
// arguments. Absent arguments (empty or null) digest as the empty object,
// as MCP treats them.
func ArgumentsDigest(args json.RawMessage) (string, error) {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || string(t) == "null" {
		t = []byte("{}")
	}
	c := t
	if !isCanonical(t) {
		var err error
		if c, err = CanonicalJSON(t); err != nil {
			return "", err
		}
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// isCanonical reports whether v is a JSON text already in the form
// CanonicalJSON gives it, within a subset it recognises without decoding:
// no whitespace; object members with ASCII names without escapes, in
// strictly increasing order; strings without escapes, of valid UTF-8;
// integers of at most 15 digits, no -0. Anything else gets false, also
// when it is canonical: the caller then canonicalises.
func isCanonical(v []byte) bool {
	end, ok := canonicalValue(v, 0, 0)
	return ok && end == len(v)
}

// canonicalValue recognises one value of the subset at v[i:], returning
// the index past it.
func canonicalValue(v []byte, i, depth int) (int, bool) {
	if i >= len(v) || depth > maxCanonicalDepth {
		return i, false
	}
	switch c := v[i]; {
	case c == '"':
		return canonicalString(v, i, false)
	case c == '{':
		i++
		if i < len(v) && v[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for {
			kEnd, ok := canonicalString(v, i, true)
			if !ok || kEnd >= len(v) || v[kEnd] != ':' {
				return i, false
			}
			key := v[i+1 : kEnd-1]
			if prev != nil && bytes.Compare(prev, key) >= 0 {
				return i, false // out of order, or repeated
			}
			prev = key
			if i, ok = canonicalValue(v, kEnd+1, depth+1); !ok || i >= len(v) {
				return i, false
			}
			switch v[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		i++
		if i < len(v) && v[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(v, i, depth+1); !ok || i >= len(v) {
				return i, false
			}
			switch v[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't' && bytes.HasPrefix(v[i:], []byte("true")):
		return i + 4, true
	case c == 'f' && bytes.HasPrefix(v[i:], []byte("false")):
		return i + 5, true
	case c == 'n' && bytes.HasPrefix(v[i:], []byte("null")):
		return i + 4, true
	case c == '-' || c >= '0' && c <= '9':
		start := i
		if c == '-' {
			i++
		}
		digits := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		n := i - digits
		if n == 0 || n > 15 || v[digits] == '0' && (n > 1 || digits > start) {
			return i, false // none, too long for a double, leading zero, -0
		}
		if i < len(v) && (v[i] == '.' || v[i] == 'e' || v[i] == 'E') {
			return i, false
		}
		return i, true
	}
	return i, false
}

// canonicalString recognises a string without escapes or control
// characters, of valid UTF-8 (ASCII only for a member name), at v[i:].
func canonicalString(v []byte, i int, name bool) (int, bool) {
	if i >= len(v) || v[i] != '"' {
		return i, false
	}
	for j := i + 1; j < len(v); j++ {
		switch c := v[j]; {
		case c == '"':
			return j + 1, name || utf8.Valid(v[i+1:j])
		case c == '\\' || c < 0x20 || name && c >= 0x80:
			return j, false
		}
	}
	return len(v), false
}

func writeCanonical(b *bytes.Buffer, v any, depth int) error {
	if depth > maxCanonicalDepth {
		return errors.New("rsmiddleware: JSON nested too deeply")
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return errors.New("rsmiddleware: number out of the IEEE 754 double range")
		}
		b.WriteString(esNumber(f))
	case string:
		writeCanonicalString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonicalString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, x[k], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return errors.New("rsmiddleware: unexpected JSON value")
	}
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 §3.2.3).
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// esNumber formats f as ECMAScript's Number.prototype.toString does
// (ECMA-262 Number::toString, RFC 8785 §3.2.2.3): the shortest digits that
// round-trip, in fixed notation for 1e-6 <= |f| < 1e21, otherwise as
// d[.ddd]e±n.
func esNumber(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. 1.5e-07, 1e+21
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + string(sign) + exp
}

// writeCanonicalString writes s as RFC 8785 §3.2.2.2 requires: '"' and '\'
// escaped, the control characters with a short form (\b \t \n \f \r) in it,
// the other controls as \u00xx (lowercase hex), everything else literal.
func writeCanonicalString(b *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}
