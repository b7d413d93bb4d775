// Package envvar reads the environment variables that configuration files
// refer to as `${NAME}`: the variable NAME itself or, when it is not set, the
// content of the file named by NAME_FILE (the form Docker and Kubernetes
// secrets are mounted in). The authorization server and the gateway read
// their files through it, so a reference means the same in both.
package envvar

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Lookup reads an environment variable; os.LookupEnv is one.
type Lookup func(name string) (string, bool)

// maxFileSize bounds a NAME_FILE file: it holds one secret, not a document.
const maxFileSize = 64 << 10

// Get reads the variable name: the environment variable name when it is set,
// otherwise the content of the file named by the environment variable
// name_FILE, with one trailing newline ("\n" or "\r\n") removed. Setting both
// is an error, as is a name_FILE that is empty or cannot be read. ok is false
// when neither is set.
func Get(env Lookup, name string) (value string, ok bool, err error) {
	v, set := env(name)
	path, fileSet := env(name + "_FILE")
	switch {
	case set && fileSet:
		return "", false, fmt.Errorf("both %s and %s_FILE are set; set one of them", name, name)
	case set:
		return v, true, nil
	case !fileSet:
		return "", false, nil
	case path == "":
		return "", false, fmt.Errorf("%s_FILE is set but empty", name)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("%s_FILE: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return "", false, fmt.Errorf("%s_FILE: %w", name, err)
	}
	if len(b) > maxFileSize {
		return "", false, fmt.Errorf("%s_FILE: %s is larger than 64 KiB", name, path)
	}
	s := string(b)
	if t, cut := strings.CutSuffix(s, "\n"); cut {
		s = strings.TrimSuffix(t, "\r")
	}
	return s, true, nil
}

// Expand replaces every `${NAME}` in s with the variable NAME as Get reads
// it. NAME is a shell variable name ([A-Za-z_][A-Za-z0-9_]*); `$` not
// followed by `{` is kept as is. It returns an error naming a variable that
// is set in neither form, or describing a malformed reference.
func Expand(s string, env Lookup) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i+2:]
		j := strings.IndexByte(s, '}')
		if j < 0 {
			return "", errors.New("unterminated ${ in value")
		}
		name := s[:j]
		if !ValidName(name) {
			return "", fmt.Errorf("invalid variable name in ${%s}", name)
		}
		v, err := Require(env, name)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		s = s[j+1:]
	}
}

// Require is Get for a variable that must be set in one of its forms: an
// unset one is an error naming both.
func Require(env Lookup, name string) (string, error) {
	v, ok, err := Get(env, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("environment variable %s is not set (nor %s_FILE)", name, name)
	}
	return v, nil
}

// ValidName reports whether s is a shell variable name,
// [A-Za-z_][A-Za-z0-9_]*.
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
