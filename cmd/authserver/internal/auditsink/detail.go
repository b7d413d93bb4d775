package auditsink

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// detailWriter writes a JSON object of slog attributes.
type detailWriter struct {
	b     []byte
	empty bool // nothing written yet in the object open last
}

func (w *detailWriter) open() {
	w.b = append(w.b, '{')
	w.empty = true
}

func (w *detailWriter) close() {
	w.b = append(w.b, '}')
	w.empty = false
}

func (w *detailWriter) key(k string) {
	if !w.empty {
		w.b = append(w.b, ',')
	}
	w.empty = false
	w.b = appendString(w.b, k)
	w.b = append(w.b, ':')
}

// attr writes a as a member; an empty attribute is skipped and a group
// without a key inlined, as slog does.
func (w *detailWriter) attr(a slog.Attr) {
	v := a.Value.Resolve()
	switch {
	case a.Key == "" && v.Kind() == slog.KindGroup:
		for _, g := range v.Group() {
			w.attr(g)
		}
		return
	case a.Key == "" && v.Any() == nil:
		return
	}
	w.key(a.Key)
	w.value(v)
}

func (w *detailWriter) value(v slog.Value) {
	switch v.Kind() {
	case slog.KindString:
		w.b = appendString(w.b, v.String())
	case slog.KindInt64:
		w.b = strconv.AppendInt(w.b, v.Int64(), 10)
	case slog.KindUint64:
		w.b = strconv.AppendUint(w.b, v.Uint64(), 10)
	case slog.KindBool:
		w.b = strconv.AppendBool(w.b, v.Bool())
	case slog.KindFloat64:
		if f := v.Float64(); !math.IsInf(f, 0) && !math.IsNaN(f) {
			w.b = strconv.AppendFloat(w.b, f, 'g', -1, 64)
		} else {
			w.b = appendString(w.b, strconv.FormatFloat(f, 'g', -1, 64))
		}
	case slog.KindDuration:
		w.b = appendString(w.b, v.Duration().String())
	case slog.KindTime:
		w.b = appendString(w.b, v.Time().UTC().Format(time.RFC3339Nano))
	case slog.KindGroup:
		w.open()
		for _, a := range v.Group() {
			w.attr(a)
		}
		w.close()
	default:
		switch x := v.Any().(type) {
		case error:
			w.b = appendString(w.b, x.Error())
			return
		case json.Marshaler:
		case fmt.Stringer:
			w.b = appendString(w.b, x.String())
			return
		}
		if j, err := json.Marshal(v.Any()); err == nil {
			w.b = append(w.b, j...)
		} else {
			w.b = appendString(w.b, fmt.Sprint(v.Any()))
		}
	}
}

// appendString appends s as a JSON string (RFC 8259 §7): quotation mark,
// reverse solidus and control characters escaped, invalid UTF-8 as
// U+FFFD, and U+2028 and U+2029 escaped as encoding/json does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
