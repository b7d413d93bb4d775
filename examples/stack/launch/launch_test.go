package launch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadEnvFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    map[string]string
		wantErr bool
	}{
		{"comments and blank lines are skipped", "# c\n\nA=1\n  B=two words \n", map[string]string{"A": "1", "B": "two words"}, false},
		{"a value may contain equals signs", "DSN=postgres://u@h/db?sslmode=disable&x=y\n", map[string]string{"DSN": "postgres://u@h/db?sslmode=disable&x=y"}, false},
		{"a line without equals is an error", "A=1\nnonsense\n", nil, true},
		{"an empty key is an error", "=1\n", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.env")
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadEnvFile(p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !strings.Contains(err.Error(), "x.env:") {
					t.Errorf("error %q does not name the file and line", err)
				}
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestTheSharedEnvFileNamesTheDefaultAddresses(t *testing.T) {
	env, err := ReadEnvFile(filepath.Join("..", "..", "..", "deploy", "stack.env"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"AUTHSERVER_ISSUER":   "http://" + DefaultASAddr,
		"MCPSERVER_LISTEN":    DefaultMCPAddr,
		"MCPSERVER_RESOURCE":  "http://" + DefaultMCPAddr + "/mcp",
		"DOWNSTREAM_LISTEN":   DefaultDownstreamAddr,
		"DOWNSTREAM_RESOURCE": "http://" + DefaultDownstreamAddr + "/api",
	} {
		if env[k] != want {
			t.Errorf("stack.env %s = %q, want %q (Start rewrites these addresses)", k, env[k], want)
		}
	}
}

func TestPrefixWriterPrefixesWholeLines(t *testing.T) {
	var b strings.Builder
	pw := &prefixWriter{prefix: "[as] ", w: &b}
	pw.Write([]byte("one\ntw"))
	pw.Write([]byte("o\nthree"))
	pw.flush()
	if got, want := b.String(), "[as] one\n[as] two\n[as] three\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStartNeedsItsDirectories(t *testing.T) {
	if _, err := Start(context.Background(), Options{Root: "."}); err == nil {
		t.Fatal("Start without BinDir and WorkDir succeeded")
	}
}

func TestStartReportsAProgramThatExits(t *testing.T) {
	// A fake "authserver" that exits at once: Start must say so, not wait
	// for the health timeout. (The real programs run in e2e/.)
	bin := t.TempDir()
	script := "#!/bin/sh\necho 'config: issuer: bad' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, "authserver"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	_, err := Start(context.Background(), Options{
		Root: filepath.Join("..", "..", ".."), BinDir: bin, WorkDir: t.TempDir(),
		ASAddr: "127.0.0.1:1", MCPAddr: "127.0.0.1:2", DownstreamAddr: "127.0.0.1:3",
		Log: &syncBuilder{b: &logs},
	})
	if err == nil || !strings.Contains(err.Error(), "authserver exited") {
		t.Fatalf("Start = %v, want an exit report", err)
	}
	if !strings.Contains(logs.String(), "[authserver] config: issuer: bad") {
		t.Errorf("the program's output was not passed on: %q", logs.String())
	}
}

type syncBuilder struct{ b *strings.Builder }

func (s *syncBuilder) Write(p []byte) (int, error) { return s.b.Write(p) }
func (s *syncBuilder) String() string              { return s.b.String() }
