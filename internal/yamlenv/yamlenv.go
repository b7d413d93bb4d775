// Package yamlenv reads the YAML configuration files of the authorization
// server and the gateway, whose scalar values may refer to environment
// variables as `${NAME}` (read by envvar: NAME, or else the file named by
// NAME_FILE). Both commands parse with Parse and expand each value with
// Expand, so a reference means the same in both files.
//
// A variable's value is never read as YAML. Parse replaces every
// `${NAME}` by a placeholder that is a plain scalar anywhere (so that
// `{client_secret: ${SECRET}}` and `[a, ${X}]` are valid flow YAML, where a
// bare "{" would open a mapping), parses the file, and puts the references
// back in the scalars of the tree; Expand then replaces them by the values.
package yamlenv

import (
	"bytes"
	"errors"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcpauth/mcpauth/internal/envvar"
)

// Placeholders of `${NAME}` references while the YAML is parsed. The name
// is followed by ".", which no name holds, so a placeholder reads back as
// exactly one name.
const (
	placeholderPrefix = "__yamlenv_ref."
	placeholderSuffix = ".__"
)

var (
	ref         = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	placeholder = regexp.MustCompile(regexp.QuoteMeta(placeholderPrefix) + `([A-Za-z_][A-Za-z0-9_]*)` + regexp.QuoteMeta(placeholderSuffix))
)

// MaxFileSize bounds a configuration file; a larger one is a mistake.
const MaxFileSize = 1 << 20

// Parse parses data, at most MaxFileSize bytes, as one YAML document and
// returns its root node (the content of the document node), or nil for an
// empty document. Every scalar, key or value, holds the `${NAME}`
// references of the file as they were written; Expand replaces them in a
// value. YAML errors are worded as the parser words them (without its
// "yaml: " prefix), line numbers those of data.
func Parse(data []byte) (*yaml.Node, error) {
	if len(data) > MaxFileSize {
		return nil, errors.New("file larger than 1 MiB")
	}
	if bytes.Contains(data, []byte(placeholderPrefix)) {
		return nil, errors.New("the file contains the reserved text " + placeholderPrefix)
	}
	data = ref.ReplaceAll(data, []byte(placeholderPrefix+"${1}"+placeholderSuffix))
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	if root.Kind == 0 {
		return nil, nil
	}
	restore(root)
	return root, nil
}

// restore puts the references back in every scalar below n. An alias
// node's target is an anchored node met elsewhere in the walk, so each
// node is visited once.
func restore(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, placeholderPrefix) {
		n.Value = placeholder.ReplaceAllString(n.Value, "$${${1}}")
	}
	for _, c := range n.Content {
		restore(c)
	}
}

// Expand replaces every `${NAME}` of the scalar n's value by the variable
// NAME as envvar.Expand reads it (an unset variable, or a malformed
// reference, is an error naming it). A plain scalar that held a reference
// loses its resolved tag, so that YAML resolves the expanded value (a
// `${PORT}` can fill an integer); a quoted, block or tagged one keeps it.
func Expand(n *yaml.Node, env envvar.Lookup) error {
	if n.Kind != yaml.ScalarNode || !strings.Contains(n.Value, "${") {
		return nil
	}
	v, err := envvar.Expand(n.Value, env)
	if err != nil {
		return err
	}
	n.Value = v
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle|yaml.TaggedStyle) == 0 {
		n.Tag = ""
	}
	return nil
}
