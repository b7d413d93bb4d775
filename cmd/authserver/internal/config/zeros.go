package config

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// explicitZeros returns the field paths the file sets to a zero value (0,
// 0s, "" after `${VAR}` expansion), sorted.
func (c *Config) explicitZeros() []string {
	var out []string
	for p := range c.set {
		if v, ok := valueAt(reflect.ValueOf(c).Elem(), p); ok && v.IsZero() {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// checkZeros reports the first of paths (see explicitZeros) that defaults
// replaced: a zero the file gives there would silently become the default.
func (c *Config) checkZeros(paths []string) error {
	for _, p := range paths {
		v, ok := valueAt(reflect.ValueOf(c).Elem(), p)
		if !ok || v.IsZero() {
			continue
		}
		switch x := v.Interface().(type) {
		case Duration:
			return errf(p, "must be more than 0 (leave the key out for the default, %s)", x.D())
		case string:
			return errf(p, "must not be empty (leave the key out for the default, %q; an empty ${VAR} gives this too)", x)
		default:
			return errf(p, "must be more than 0 (leave the key out for the default, %v)", x)
		}
	}
	return nil
}

// valueAt finds the field at a path such as "registration.rate_limit.burst"
// or "clients[2].secret" (YAML keys, list indexes) in v, a Config. Pointers
// are followed; a nil pointer or an index out of range is not found.
func valueAt(v reflect.Value, path string) (reflect.Value, bool) {
	for _, seg := range strings.Split(path, ".") {
		name, idx, _ := strings.Cut(seg, "[")
		f, ok := fieldByYAML(v, name)
		if !ok {
			return reflect.Value{}, false
		}
		v = f
		for idx != "" {
			var n string
			n, idx, _ = strings.Cut(idx, "]")
			idx = strings.TrimPrefix(idx, "[")
			i, err := strconv.Atoi(n)
			if v = deref(v); !v.IsValid() || v.Kind() != reflect.Slice || err != nil || i < 0 || i >= v.Len() {
				return reflect.Value{}, false
			}
			v = v.Index(i)
		}
	}
	v = deref(v)
	return v, v.IsValid()
}

func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

func fieldByYAML(v reflect.Value, name string) (reflect.Value, bool) {
	v = deref(v)
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	t := v.Type()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == name && tag != "-" && t.Field(i).IsExported() {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}
