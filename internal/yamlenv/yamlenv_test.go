package yamlenv

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// decodeExpanded parses src, expands every scalar and decodes it into v.
func decodeExpanded(t *testing.T, src string, vars map[string]string, v any) error {
	t.Helper()
	root, err := Parse([]byte(src))
	if err != nil {
		return err
	}
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		if err := Expand(n, env(vars)); err != nil {
			return err
		}
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 0 {
				continue // keys are not expanded
			}
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return err
	}
	return root.Decode(v)
}

func TestReferencesAreValuesWhereverTheyStand(t *testing.T) {
	vars := map[string]string{"S": "a: b # c, [d] {e}", "N": "42", "X": "x"}
	var got struct {
		Flow    map[string]string `yaml:"flow"`
		List    []string          `yaml:"list"`
		Int     int               `yaml:"int"`
		Quoted  any               `yaml:"quoted"`
		Mixed   string            `yaml:"mixed"`
		Dollars string            `yaml:"dollars"`
	}
	src := "flow: {secret: ${S}}\nlist: [${X}, b, ${S}]\nint: ${N}\nquoted: \"${N}\"\nmixed: pre-${X}-${X}_end__\ndollars: costs $5\n"
	if err := decodeExpanded(t, src, vars, &got); err != nil {
		t.Fatal(err)
	}
	if got.Flow["secret"] != vars["S"] || strings.Join(got.List, "|") != "x|b|"+vars["S"] || got.Int != 42 ||
		got.Quoted != "42" || got.Mixed != "pre-x-x_end__" || got.Dollars != "costs $5" {
		t.Errorf("%+v", got)
	}
}

func TestKeysKeepTheirReferencesAsWritten(t *testing.T) {
	root, err := Parse([]byte("${K}: v\n"))
	if err != nil {
		t.Fatal(err)
	}
	if root.Content[0].Value != "${K}" {
		t.Errorf("key %q", root.Content[0].Value)
	}
}

func TestParseErrors(t *testing.T) {
	for src, want := range map[string]string{
		"a: __yamlenv_ref.X.__\n": "reserved text",
		"a: [unclosed\n":          "line",
	} {
		if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
	for src, want := range map[string]string{
		"a: ${UNSET}\n": "UNSET is not set",
		"a: ${OOPS\n":   "unterminated",
		"a: ${1X}\n":    "invalid variable name",
	} {
		var v map[string]string
		if err := decodeExpanded(t, src, nil, &v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
	if root, err := Parse(nil); root != nil || err != nil {
		t.Errorf("empty file: %v %v", root, err)
	}
}
