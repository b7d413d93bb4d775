package launch

import (
	"strings"
	"testing"
)

// FuzzParseEnv: any input either parses into keys without spaces whose
// values appear in the input, or is refused with an error naming the line.
func FuzzParseEnv(f *testing.F) {
	f.Add("A=1\n# c\n\nB = two words\n")
	f.Add("DSN=postgres://u@h/db?x=y&z==\n")
	f.Add("=\n")
	f.Add("no equals\n")
	f.Fuzz(func(t *testing.T, in string) {
		env, err := ParseEnv(strings.NewReader(in), "f.env")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.env") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for k, v := range env {
			if k == "" || strings.ContainsAny(k, " \t\n=") {
				t.Fatalf("bad key %q", k)
			}
			if !strings.Contains(in, v) {
				t.Fatalf("value %q not from the input", v)
			}
		}
	})
}
