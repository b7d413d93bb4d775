package open

import (
	"errors"
	"strings"
	"testing"
)

func TestParseNamesTheBackend(t *testing.T) {
	tests := []struct {
		name, dsn string
		kind      kind
		rest      string
	}{
		{"memory is the in-process store", "memory", kindMemory, ""},
		{"sqlite with a relative path keeps the path", "sqlite:./authserver.db", kindSQLite, "./authserver.db"},
		{"sqlite with an absolute path keeps the path", "sqlite:/var/lib/authserver/db", kindSQLite, "/var/lib/authserver/db"},
		{"a postgres URL is passed whole", "postgres://u@h/db?sslmode=disable", kindPostgres, "postgres://u@h/db?sslmode=disable"},
		{"a postgresql URL is passed whole", "postgresql://u@h/db", kindPostgres, "postgresql://u@h/db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, rest, err := parse(tt.dsn)
			if err != nil || k != tt.kind || rest != tt.rest {
				t.Fatalf("parse(%q) = %v, %q, %v; want %v, %q", tt.dsn, k, rest, err, tt.kind, tt.rest)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"memory", "sqlite:", "sqlite:x.db", "postgres://", "postgresql://a@b/c", "", "mem\x00ory"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		k, rest, err := parse(dsn)
		if err != nil {
			if !errors.Is(err, ErrUnknownDSN) || k != 0 {
				t.Fatalf("parse(%q) failed with %v, kind %v", dsn, err, k)
			}
			return
		}
		switch k {
		case kindMemory:
			if dsn != "memory" {
				t.Fatalf("parse(%q) = memory", dsn)
			}
		case kindSQLite:
			if rest == "" || "sqlite:"+rest != dsn {
				t.Fatalf("parse(%q) = sqlite %q", dsn, rest)
			}
		case kindPostgres:
			if rest != dsn || !(strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")) {
				t.Fatalf("parse(%q) = postgres %q", dsn, rest)
			}
		default:
			t.Fatalf("parse(%q) = kind %v", dsn, k)
		}
	})
}
