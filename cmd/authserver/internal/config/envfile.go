package config

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxVarFileSize bounds a NAME_FILE file: it holds one secret, not a
// document.
const maxVarFileSize = 64 << 10

// LookupVar reads the variable name the way the configuration does: the
// environment variable name when it is set, otherwise the content of the file
// named by the environment variable name_FILE (the form Docker and
// Kubernetes secrets are mounted in), with one trailing newline ("\n" or
// "\r\n") removed. Setting both is an error, as is a name_FILE that cannot be
// read. ok is false when neither is set.
func LookupVar(env Lookup, name string) (value string, ok bool, err error) {
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
	b, err := io.ReadAll(io.LimitReader(f, maxVarFileSize+1))
	if err != nil {
		return "", false, fmt.Errorf("%s_FILE: %w", name, err)
	}
	if len(b) > maxVarFileSize {
		return "", false, fmt.Errorf("%s_FILE: %s is larger than 64 KiB", name, path)
	}
	s := string(b)
	if t, cut := strings.CutSuffix(s, "\n"); cut {
		s = strings.TrimSuffix(t, "\r")
	}
	return s, true, nil
}
