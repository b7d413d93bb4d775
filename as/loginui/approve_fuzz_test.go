package loginui

import (
	"bytes"
	"encoding/json"
	"html"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// FuzzApprovalPageShowsEverything renders the approval page for arbitrary
// arguments (canonicalised as the approvals endpoint stores them): every
// member name and string value is on the page in its visible form, the
// page holds no character that would not show, and no markup from the
// arguments.
func FuzzApprovalPageShowsEverything(f *testing.F) {
	f.Add([]byte(`{"to":"bob@example.com","n":[1,2.5,true,null,{}]}`))
	f.Add([]byte(`{"<script>":"</div><img src=x onerror=alert(1)>","\u202e":"\u200b\u0000\u0085"}`))
	f.Add([]byte(`{"long":"` + strings.Repeat("a\n", 200) + `tail"}`))
	f.Add([]byte(`{"a":{"b":{"c":[[["deep"]]]}},"e":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		canon, err := rsmiddleware.CanonicalJSON(data)
		if err != nil || len(canon) == 0 || canon[0] != '{' {
			return
		}
		tree, err := argTree(canon)
		if err != nil {
			if strings.Contains(err.Error(), "nest too deeply") {
				return
			}
			t.Fatalf("argTree(%q): %v", canon, err)
		}
		var buf bytes.Buffer
		if err := pages.ExecuteTemplate(&buf, "approve.html", &view{Approval: &approvalView{Args: tree}}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		for _, r := range out {
			if r != '\n' && invisible(r) {
				t.Fatalf("the page holds %U", r)
			}
		}
		for _, tag := range []string{"<script", "<img", "<iframe", "<svg"} {
			if strings.Contains(out, tag) {
				t.Fatalf("the page holds %s", tag)
			}
		}
		text := html.UnescapeString(out)
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, c := range x {
					if !strings.Contains(text, visibleString(k)) {
						t.Fatalf("member name %q is not on the page", k)
					}
					walk(c)
				}
			case []any:
				for _, c := range x {
					walk(c)
				}
			case string:
				if !strings.Contains(text, visibleString(x)) {
					t.Fatalf("value %q is not on the page", x)
				}
			}
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(canon))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		walk(v)
		if !utf8.ValidString(out) {
			t.Fatal("the page is not UTF-8")
		}
	})
}
