package jsonstr_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/internal/jsonstr"
)

// Append writes valid JSON that reads back as s, each invalid UTF-8 byte
// as U+FFFD, with no raw control character, U+2028 or U+2029 (which
// JavaScript and line-based readers would split at).
func FuzzAppendReadsBack(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\n\r\t\x00\x1f\x7f\f\b", "\xff\xfe", "\u2028\u2029", "<b>&</b>", "é中\U0001F600", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := jsonstr.Append([]byte("x"), s)[1:]
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("Append(%q) = %s: %v", s, got, err)
		}
		if want := string([]rune(s)); back != want {
			t.Fatalf("Append(%q) = %s reads back as %q, want %q", s, got, back, want)
		}
		if !utf8.Valid(got) || bytes.ContainsAny(got, "\u2028\u2029") || bytes.IndexFunc(got, func(r rune) bool { return r < 0x20 }) >= 0 {
			t.Fatalf("Append(%q) = %q holds a raw control or line separator", s, got)
		}
	})
}

// The escapes are log/slog's: a form feed is \u000c, as slog's JSON
// handler writes it, not encoding/json's \f.
func TestAppendEscapesAsSlog(t *testing.T) {
	var buf bytes.Buffer
	s := "a\"b\\c\n\r\t\f\b\x00\x1f\xff\u2028<&>é"
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key != "v" {
			return slog.Attr{}
		}
		return a
	}})).Info("", "v", s)
	want := strings.TrimSuffix(buf.String(), "\n")
	if got := `{"v":` + string(jsonstr.Append(nil, s)) + `}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func ExampleAppend() {
	b := []byte(`{"event":`)
	b = jsonstr.Append(b, "line one\nline \"two\"\u2028")
	fmt.Println(string(append(b, '}')))
	// Output: {"event":"line one\nline \"two\"\u2028"}
}
