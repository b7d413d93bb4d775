package auditsink

import (
	"encoding/json"
	"fmt"
	"github.com/mcpauth/mcpauth/internal/jsonstr"
	"log/slog"
	"math"
	"strconv"
	"time"
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
	w.b = jsonstr.Append(w.b, k)
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
		w.b = jsonstr.Append(w.b, v.String())
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
			w.b = jsonstr.Append(w.b, strconv.FormatFloat(f, 'g', -1, 64))
		}
	case slog.KindDuration:
		w.b = jsonstr.Append(w.b, v.Duration().String())
	case slog.KindTime:
		w.b = jsonstr.Append(w.b, v.Time().UTC().Format(time.RFC3339Nano))
	case slog.KindGroup:
		w.open()
		for _, a := range v.Group() {
			w.attr(a)
		}
		w.close()
	default:
		switch x := v.Any().(type) {
		case error:
			w.b = jsonstr.Append(w.b, x.Error())
			return
		case json.Marshaler:
		case fmt.Stringer:
			w.b = jsonstr.Append(w.b, x.String())
			return
		}
		if j, err := json.Marshal(v.Any()); err == nil {
			w.b = append(w.b, j...)
		} else {
			w.b = jsonstr.Append(w.b, fmt.Sprint(v.Any()))
		}
	}
}
