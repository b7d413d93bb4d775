package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcpauth/mcpauth/internal/yamlenv"
)

// decode parses data (yamlenv.Parse) into a Config. Before decoding it
// walks the YAML tree next to the Go type, so that `${VAR}` expansion,
// unknown keys and type mismatches are reported with the field path rather
// than a line number.
func decode(data []byte, env Lookup) (*Config, error) {
	doc, err := yamlenv.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := &Config{}
	if doc == nil { // empty file
		return c, nil
	}
	w := walker{env: env, seen: map[*yaml.Node]bool{}, set: map[string]bool{}}
	if err := w.walk("", doc, reflect.TypeOf(Config{})); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// Decode the checked (and expanded) tree; KnownFields stays on as a
	// second line of defence.
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	c.set = w.set
	return c, nil
}

type walker struct {
	env    Lookup
	seen   map[*yaml.Node]bool
	set    map[string]bool // paths of the non-null scalars met
	visits int
}

// maxVisits bounds the walk, so aliases of aliases cannot blow it up.
const maxVisits = 100000

var durationType = reflect.TypeOf(Duration(0))

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration"
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "a mapping"
	case t.Kind() == reflect.Slice:
		return "a list"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Int:
		return "an integer"
	default:
		return "a string"
	}
}

func (w *walker) walk(path string, n *yaml.Node, t reflect.Type) error {
	if w.visits++; w.visits > maxVisits {
		return errors.New("document too large once aliases are expanded")
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType || t.Kind() == reflect.String || t.Kind() == reflect.Bool || t.Kind() == reflect.Int:
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: expected %s", path, kindName(t))
		}
		if err := w.expand(path, n); err != nil {
			return err
		}
		if isNull(n) {
			return nil
		}
		w.set[path] = true
		return checkScalar(path, n, t)
	case t.Kind() == reflect.Slice:
		if isNull(n) {
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s: expected a list", path)
		}
		for i, e := range n.Content {
			if err := w.walk(fmt.Sprintf("%s[%d]", path, i), e, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		if isNull(n) {
			return nil
		}
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: expected a mapping", path)
		}
		if t.Elem().Kind() == reflect.Interface {
			// A document kept as it is (a JWK Set), checked where used.
			w.set[path] = true
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				return fmt.Errorf("%s: merge keys and complex keys are not supported", path)
			}
			if err := w.walk(join(path, k.Value), v, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Struct:
		if isNull(n) {
			return nil
		}
		if n.Kind != yaml.MappingNode {
			if path == "" {
				return errors.New("the file must be a YAML mapping of keys")
			}
			return fmt.Errorf("%s: expected a mapping", path)
		}
		fields := yamlFields(t)
		seenKeys := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				return fmt.Errorf("%s: merge keys and complex keys are not supported", orRoot(path))
			}
			p := join(path, k.Value)
			if seenKeys[k.Value] {
				return fmt.Errorf("%s: key given twice", p)
			}
			seenKeys[k.Value] = true
			ft, ok := fields[k.Value]
			if !ok {
				return fmt.Errorf("%s: unknown key", p)
			}
			if err := w.walk(p, v, ft); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: unsupported type %s", path, t)
}

func orRoot(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		m[name] = f.Type
	}
	return m
}

func checkScalar(path string, n *yaml.Node, t reflect.Type) error {
	switch {
	case t == durationType:
		if _, err := parseDuration(n.Value); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	case t.Kind() == reflect.Bool:
		var b bool
		if n.Decode(&b) != nil {
			return fmt.Errorf("%s: expected true or false, got %q", path, n.Value)
		}
	case t.Kind() == reflect.Int:
		var i int
		if n.Decode(&i) != nil {
			return fmt.Errorf("%s: expected an integer, got %q", path, n.Value)
		}
		if i < 0 {
			return fmt.Errorf("%s: must not be negative", path)
		}
	}
	return nil
}

// expand replaces `${NAME}` in a scalar with the value of the environment
// variable NAME (yamlenv.Expand), once for a node reached by several
// aliases. An unset variable is an error naming it; `$` not followed by
// `{` is kept as is.
func (w *walker) expand(path string, n *yaml.Node) error {
	if w.seen[n] {
		return nil
	}
	w.seen[n] = true
	if err := yamlenv.Expand(n, w.env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
