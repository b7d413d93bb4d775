package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// reference is the configuration reference of the authorization server.
const reference = "../../../../docs/CONFIGURATION.md"

// yamlKeys returns the dotted YAML keys of the struct type t as the
// reference spells them: a list of records is "name[]", a field of one
// "name[].field".
func yamlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key, ft := prefix+name, f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			key, ft = key+"[]", ft.Elem()
		}
		keys = append(keys, key)
		if ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeOf(Config{}).PkgPath() {
			keys = append(keys, yamlKeys(ft, key+".")...)
		}
	}
	return keys
}

// referenceRows returns the keys the reference table documents. A row may
// name several siblings: "`a.b.c`, `.d`" and "`a.b.c` / `d`" both document
// a.b.c and a.b.d.
func referenceRows(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(reference)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	cell := regexp.MustCompile("(?m)^\\| (`[^|]+`) \\|")
	code := regexp.MustCompile("`([^`]+)`")
	for _, m := range cell.FindAllStringSubmatch(string(b), -1) {
		var parent string
		for i, k := range code.FindAllStringSubmatch(m[1], -1) {
			key := k[1]
			switch {
			case i == 0:
				if j := strings.LastIndexByte(key, '.'); j >= 0 {
					parent = key[:j+1]
				}
			case parent != "":
				key = parent + strings.TrimPrefix(key, ".")
			}
			rows = append(rows, key)
		}
	}
	return rows
}

// TestEveryKeyIsInTheReference reads the reference table of
// docs/CONFIGURATION.md: every key of Config has a row, unless it only
// groups keys that have rows (tokens, registration.rate_limit), and every
// row names a key.
func TestEveryKeyIsInTheReference(t *testing.T) {
	rows := referenceRows(t)
	if len(rows) == 0 {
		t.Fatal("docs/CONFIGURATION.md has no reference table")
	}
	keys := yamlKeys(reflect.TypeOf(Config{}), "")
	for _, k := range keys {
		if !slices.Contains(rows, k) && !slices.ContainsFunc(rows, func(r string) bool { return strings.HasPrefix(r, k+".") }) {
			t.Errorf("key %s has no row in docs/CONFIGURATION.md", k)
		}
	}
	for _, r := range rows {
		if !slices.Contains(keys, r) {
			t.Errorf("docs/CONFIGURATION.md documents %s, which is no key of Config", r)
		}
	}
}
