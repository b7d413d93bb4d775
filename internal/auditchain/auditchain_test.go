package auditchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func testKey(t testing.TB, b byte) []byte {
	t.Helper()
	k, err := DeriveKey(bytes.Repeat([]byte{b}, 32), "mcpauth audit chain")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// logTo writes n audit records and, between them, plain log records,
// through slog handlers of format over c, as a server does.
func logTo(c *Writer, format Format, n int) {
	mk := func(w interface{ Write([]byte) (int, error) }) slog.Handler {
		if format == Text {
			return slog.NewTextHandler(w, nil)
		}
		return slog.NewJSONHandler(w, nil)
	}
	audit, plain := slog.New(mk(c.Chained())), slog.New(mk(c.Plain()))
	for i := range n {
		audit.Info("audit", "event", "token.issued", "client_id", fmt.Sprintf("c%d", i))
		plain.Info("access", "path", "/token", "status", 200)
	}
}

func lines(b []byte) []string { return strings.SplitAfter(string(b), "\n") }

func verifyText(t *testing.T, key []byte, text string) (*Result, *Failure) {
	t.Helper()
	res, err := Verify(key, "audit.log", strings.NewReader(text))
	var f *Failure
	if errors.As(err, &f) {
		return nil, f
	}
	if err != nil {
		t.Fatal(err)
	}
	return res, nil
}

func TestVerifyAcceptsAnUntouchedLog(t *testing.T) {
	for _, format := range []Format{JSON, Text} {
		var buf bytes.Buffer
		c := NewWriter(&buf, testKey(t, 1), format)
		logTo(c, format, 5)
		res, f := verifyText(t, testKey(t, 1), buf.String())
		if f != nil {
			t.Fatalf("format %d: %v\n%s", format, f, buf.String())
		}
		if res.Lines != 6 || res.Last[c.Instance()].Seq != 5 { // the start line and 5 records
			t.Errorf("format %d: %d lines, last %+v", format, res.Lines, res.Last)
		}
		if strings.Count(buf.String(), "access") != 5 {
			t.Errorf("the plain lines were not written as they are: %s", buf.String())
		}
	}
}

func TestVerifyFindsTampering(t *testing.T) {
	key := testKey(t, 1)
	var buf bytes.Buffer
	c := NewWriter(&buf, key, JSON)
	logTo(c, JSON, 6)
	orig := lines(buf.Bytes()) // start, then audit and access lines alternating: audit lines at 2, 4, 6, ...
	join := func(ls []string) string { return strings.Join(ls, "") }
	edit := func(f func(ls []string) []string) string {
		return join(f(append([]string(nil), orig...)))
	}
	for _, tc := range []struct {
		name string
		text string
		line int
		kind string
	}{
		{"a line edited", edit(func(ls []string) []string {
			ls[3] = strings.Replace(ls[3], `"client_id":"c1"`, `"client_id":"cX"`, 1)
			return ls
		}), 4, "changed"},
		{"a line deleted", edit(func(ls []string) []string { return append(ls[:3], ls[4:]...) }), 5, "removed"},
		{"a forged line inserted", edit(func(ls []string) []string {
			forged := strings.Replace(ls[3], `"client_id":"c1"`, `"client_id":"evil"`, 1)
			return append(ls[:3], append([]string{forged}, ls[3:]...)...)
		}), 4, "inserted"},
		{"a line repeated", edit(func(ls []string) []string {
			return append(ls[:5], append([]string{ls[1]}, ls[5:]...)...)
		}), 6, "reordered"},
		{"two lines swapped", edit(func(ls []string) []string {
			ls[3], ls[5] = ls[5], ls[3]
			return ls
		}), 4, "reordered"},
		{"the start line removed", edit(func(ls []string) []string { return ls[1:] }), 1, "removed"},
		{"the chain member of a line cut", edit(func(ls []string) []string {
			ls[3] = ls[3][:strings.Index(ls[3], `,"instance"`)] + "}\n"
			return ls
		}), 6, "removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, f := verifyText(t, key, tc.text)
			if f == nil || f.Line != tc.line || f.Kind != tc.kind || f.File != "audit.log" {
				t.Fatalf("got %v, want line %d %s", f, tc.line, tc.kind)
			}
		})
	}
	if _, f := verifyText(t, testKey(t, 2), join(orig)); f == nil || f.Line != 1 {
		t.Fatalf("a chain of another key: %v", f)
	}
}

func TestVerifyReadsARotatedSeries(t *testing.T) {
	key := testKey(t, 1)
	dir := t.TempDir()
	var a, b bytes.Buffer
	c := NewWriter(&a, key, JSON)
	logTo(c, JSON, 3)
	if err := c.Rotate(&b); err != nil {
		t.Fatal(err)
	}
	logTo(c, JSON, 2)
	pa, pb := filepath.Join(dir, "audit.log.1"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(pa, a.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := VerifyFiles(key, []string{pa, pb})
	if err != nil || res.Lines != 4+3 {
		t.Fatalf("the pair: %v %+v", err, res)
	}
	if _, err := VerifyFiles(key, []string{pb}); err != nil {
		t.Fatalf("the newer file alone: %v", err)
	}
	// The last line of the older file removed: the newer file's start
	// names a chain value the series does not end with.
	al := lines(a.Bytes())
	cut := strings.Join(al[:len(al)-3], "") + al[len(al)-2] // the last audit line dropped, its access line kept
	if err := os.WriteFile(pa, []byte(cut), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = VerifyFiles(key, []string{pa, pb})
	var f *Failure
	if !errors.As(err, &f) || f.File != pb || f.Line != 1 || f.Kind != "removed" {
		t.Fatalf("the older file's last line removed: %v", err)
	}
	// The files in the wrong order.
	if err := os.WriteFile(pa, a.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyFiles(key, []string{pb, pa}); !errors.As(err, &f) || f.File != pa || f.Line != 1 {
		t.Fatalf("the files reordered: %v", err)
	}
}

// Writers of one process write one valid chain; writers of several
// instances interleave theirs in one log.
func TestConcurrentWritersMakeValidChains(t *testing.T) {
	key := testKey(t, 1)
	var buf bytes.Buffer
	one, two := NewWriter(&buf, key, JSON), NewWriter(&buf, key, JSON)
	var mu sync.Mutex // the two instances share buf, as processes share a file
	one.w, two.w = lockedBuf{&mu, &buf}, lockedBuf{&mu, &buf}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := one
			if g%2 == 1 {
				c = two
			}
			audit, plain := slog.New(slog.NewJSONHandler(c.Chained(), nil)), slog.New(slog.NewJSONHandler(c.Plain(), nil))
			for i := range 200 {
				audit.LogAttrs(context.Background(), slog.LevelInfo, "audit", slog.String("event", "x"), slog.Int("g", g), slog.Int("i", i))
				plain.Info("access")
			}
		}()
	}
	wg.Wait()
	res, f := verifyText(t, key, buf.String())
	if f != nil {
		t.Fatal(f)
	}
	if res.Lines != 8*200+2 || len(res.Last) != 2 {
		t.Fatalf("%d lines of %d instances", res.Lines, len(res.Last))
	}
}

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestDeriveKeyRefusesShortMaterial(t *testing.T) {
	if _, err := DeriveKey([]byte("short"), "p"); err == nil {
		t.Fatal("a 5-byte key accepted")
	}
	a, _ := DeriveKey(bytes.Repeat([]byte{1}, 32), "a")
	b, _ := DeriveKey(bytes.Repeat([]byte{1}, 32), "b")
	if bytes.Equal(a, b) {
		t.Fatal("two purposes give one key")
	}
}

// BenchmarkAuditRecord prices one token.issued audit record of the AS
// through slog's TextHandler, as it is (plain) and chained.
//
//	go test ./internal/auditchain -run '^$' -bench AuditRecord -count 3
func BenchmarkAuditRecord(b *testing.B) {
	for _, mode := range []string{"plain", "chained"} {
		b.Run(mode, func(b *testing.B) {
			var w interface{ Write([]byte) (int, error) } = io.Discard
			if mode == "chained" {
				w = NewWriter(io.Discard, testKey(b, 1), Text).Chained()
			}
			log := slog.New(slog.NewTextHandler(w, nil)).With("component", "as")
			b.ReportAllocs()
			for b.Loop() {
				log.LogAttrs(context.Background(), slog.LevelInfo, "audit", slog.String("event", "token.issued"),
					slog.String("client_id", "ci-bot"), slog.String("grant_type", "client_credentials"), slog.String("sub", ""),
					slog.String("aud", "http://127.0.0.1:8080/mcp"), slog.String("scope", "mcp:tools"))
			}
		})
	}
}
