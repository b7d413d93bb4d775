package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// gatewayDoc is the gateway's documentation: its configuration keys and the
// example configuration.
const gatewayDoc = "../../docs/GATEWAY.md"

// yamlKeys returns the dotted YAML keys of the struct type t: a struct field
// is a key and, when it is a struct or a pointer to one, the parent of its
// fields' keys.
func yamlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		keys = append(keys, key)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			keys = append(keys, yamlKeys(ft, key+".")...)
		}
	}
	return keys
}

// TestEveryKeyIsDocumented reads the key table of docs/GATEWAY.md: every key
// of Config has a row of its own or lies below a key that has one
// (upstream_auth.exchange documents its client_id, client_secret, resource
// and scopes), and every row names a key.
func TestEveryKeyIsDocumented(t *testing.T) {
	b, err := os.ReadFile(gatewayDoc)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		rows = append(rows, m[1])
	}
	if len(rows) == 0 {
		t.Fatal("docs/GATEWAY.md has no key table")
	}
	keys := yamlKeys(reflect.TypeOf(Config{}), "")
	documented := func(key string) bool {
		for k := key; ; {
			if slices.Contains(rows, k) {
				return true
			}
			i := strings.LastIndexByte(k, '.')
			if i < 0 {
				return false
			}
			k = k[:i]
		}
	}
	for _, k := range keys {
		// A parent whose every child has a row needs none of its own
		// (scopes, limits, audit).
		if !documented(k) && !slices.ContainsFunc(rows, func(r string) bool { return strings.HasPrefix(r, k+".") }) {
			t.Errorf("key %s has no row in docs/GATEWAY.md", k)
		}
	}
	for _, r := range rows {
		if !slices.Contains(keys, r) {
			t.Errorf("docs/GATEWAY.md documents %s, which is no key of Config", r)
		}
	}
}

// TestTheDocumentedConfigurationIsTheTestedOne finds the example
// configuration of docs/GATEWAY.md: it holds every line of readmeConfig,
// which TestParseConfigReadsEveryKey reads key for key, and parses as a
// whole.
func TestTheDocumentedConfigurationIsTheTestedOne(t *testing.T) {
	b, err := os.ReadFile(gatewayDoc)
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.HasPrefix(block, "listen: 127.0.0.1:8090\n") {
			example = block
			break
		}
	}
	if example == "" {
		t.Fatal("docs/GATEWAY.md has no example configuration beginning with listen: 127.0.0.1:8090")
	}
	lines := strings.Split(example, "\n")
	for _, l := range strings.Split(strings.TrimSpace(readmeConfig), "\n") {
		if !slices.Contains(lines, l) {
			t.Errorf("the documented configuration lacks the tested line %q", l)
		}
	}
	if _, err := ParseConfig([]byte(example), env(map[string]string{"GW_SECRET": "s3cret"})); err != nil {
		t.Errorf("the documented configuration: %v", err)
	}
}
