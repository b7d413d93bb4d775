package rsmiddleware

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// resourceURICases are URIs with the serialisation a WHATWG URL parser
// (Node's new URL(u).toString()) gives them, or "" for those
// resourceURIForms refuses.
var resourceURICases = []struct{ uri, whatwg string }{
	{"config://secrets", "config://secrets"},
	{"CONFIG://secrets", "config://secrets"},
	{"Config://SECRETS", "config://SECRETS"},
	{"db://users/rows", "db://users/rows"},
	{"DB://users/rows", "db://users/rows"},
	{"HTTP://EXAMPLE.com", "http://example.com/"},
	{"https://example.com?q=1", "https://example.com/?q=1"},
	{"http://example.com:80/a", "http://example.com/a"},
	{"https://example.com:8443/a", "https://example.com:8443/a"},
	{"http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x"},
	{"config://x:80/a", "config://x:80/a"},
	{"file:///etc/hosts", "file:///etc/hosts"},
	{"urn:X:y", "urn:X:y"},
	{"urn:a/../b", "urn:a/../b"},
	{"config://x/a%2Fb", "config://x/a%2Fb"},
	{"config://sec\nrets", ""},
	{"config://secrets\t", ""},
	{" config://secrets", ""},
	{"config://secrets/a/../b", ""},
	{"config://secrets/./b", ""},
	{"config://secrets/%2e%2E/b", ""},
	{"config://secrets/.%2e", ""},
	{"config:/a/../b", ""},
	{"http://a/b\\c", ""},
	{"config://x/{a}", ""},
	{"config://x/a\"b", ""},
	{"http:example.com/x", ""},
	{"http:///x", ""},
	{"http://0x7f.1/", ""},
	{"http://127.1/", ""},
	{"http://user@example.com/", ""},
	{"http://[::1]/", ""},
	{"http://example.com:/x", ""},
	{"http://example.com:080/x", ""},
	{"config://x:080/a", ""},
	{"file://localhost/etc/hosts", ""},
	{"http://a/?x='y'", ""},
	{"file:///caf\u00e9?\u00e9#\u00e9", "file:///caf%C3%A9?%C3%A9#%C3%A9"},
	{"config://caf\u00e9/x", "config://caf%C3%A9/x"},
	{"http://caf\u00e9.example/", ""},
	{"config://sec\u007frets", ""},
}

// A string that is no URI has itself as its only form: a WHATWG parser
// refuses it, so a server can only look it up as sent.
func TestResourceURIFormsOfNoURI(t *testing.T) {
	for _, s := range []string{"x", "://x", "1a://x", "readme.txt"} {
		if forms, ok := resourceURIForms(s); !ok || !slices.Equal(forms, []string{s}) {
			t.Errorf("%q: forms %q ok %v", s, forms, ok)
		}
	}
}

// A URI accepted has its WHATWG serialisation among its forms; checked
// against Node's URL parser when node is installed, and against the table
// (taken from it) otherwise.
func TestResourceURIFormsCoverWHATWGSerialisation(t *testing.T) {
	whatwg := map[string]string{}
	if node, err := exec.LookPath("node"); err == nil {
		var in []string
		for _, c := range resourceURICases {
			if c.whatwg != "" {
				in = append(in, c.uri)
			}
		}
		b, _ := json.Marshal(in)
		out, err := exec.Command(node, "-e", `const a=JSON.parse(process.argv[1]);console.log(JSON.stringify(Object.fromEntries(a.map(u=>[u,new URL(u).toString()]))))`, string(b)).Output()
		if err != nil {
			t.Fatalf("node: %v", err)
		}
		if err := json.Unmarshal(out, &whatwg); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("node is not installed: checking against the table only")
	}
	for _, c := range resourceURICases {
		forms, ok := resourceURIForms(c.uri)
		if c.whatwg == "" {
			if ok {
				t.Errorf("%q: forms %q, want it refused", c.uri, forms)
			}
			continue
		}
		if !ok || forms[0] != c.uri || !slices.Contains(forms, c.whatwg) {
			t.Errorf("%q: forms %q ok %v, want it and %q", c.uri, forms, ok, c.whatwg)
		}
		if w, found := whatwg[c.uri]; found && !slices.Contains(forms, w) {
			t.Errorf("%q: node serialises it %q, not among forms %q", c.uri, w, forms)
		}
	}
}

// A resources/read needs the scopes of its URI in every spelling the
// server may read it in: "CONFIG://secrets" those of config://secrets,
// "DB://users/rows" those of the template db://{table}/rows; a URI whose
// spelling cannot be told is refused before the server sees it.
func TestMiddlewareResourceScopesFollowTheServersSpelling(t *testing.T) {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	var reached atomic.Int32
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm,
		Scopes: Scopes{Base: []string{"mcp:tools"}, Resources: map[string][]string{
			"config://secrets": {"mcp:admin"}, "db://{table}/rows": {"mcp:admin"}, "http://example.com/": {"mcp:admin"}}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusOK)
	})))
	t.Cleanup(srv.Close)
	c := ks.claims()
	c["scope"] = "mcp:tools"
	tok := ks.mint(c)
	for _, tc := range []struct {
		method, uri string
		status      int
	}{
		{"resources/read", "config://public", 200},
		{"resources/read", "config://secrets", 403},
		{"resources/read", "CONFIG://secrets", 403},
		{"resources/subscribe", "Config://secrets", 403},
		{"resources/read", "DB://users/rows", 403},
		{"resources/read", "HTTP://EXAMPLE.COM", 403},
		{"resources/read", "http://example.com:80", 403},
		{"resources/read", "config://secrets/x/..", 400},
		{"resources/read", "config://sec\nrets", 400},
		{"resources/read", "http://EXAMPLE.com\\", 400},
	} {
		t.Run(tc.method+" "+tc.uri, func(t *testing.T) {
			before := reached.Load()
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": tc.method, "params": map[string]any{"uri": tc.uri}})
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || (reached.Load() > before) != (tc.status == 200) {
				t.Errorf("%d (reached %v), want %d", resp.StatusCode, reached.Load() > before, tc.status)
			}
		})
	}
}

// FuzzResourceURIForms: any string is refused or has itself first among
// at most two forms, and a form is never refused in turn.
func FuzzResourceURIForms(f *testing.F) {
	for _, c := range resourceURICases {
		f.Add(c.uri)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		forms, ok := resourceURIForms(uri)
		if !ok {
			return
		}
		if len(forms) == 0 || len(forms) > 2 || forms[0] != uri {
			t.Fatalf("%q: forms %q", uri, forms)
		}
		if _, ok := resourceURIForms(forms[len(forms)-1]); !ok {
			t.Fatalf("%q: its form %q is refused", uri, forms[len(forms)-1])
		}
	})
}

// completion/complete of a prompt's or a resource template's arguments
// needs the scopes of the prompt or template its params.ref names, so that
// a hidden prompt or template is not completed either; a ref given twice
// or in another case is refused.
func TestMiddlewareCompletionNeedsTheScopesOfItsRef(t *testing.T) {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	var reached atomic.Int32
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm,
		Scopes: Scopes{Base: []string{"mcp:tools"}, Prompts: map[string][]string{"incident_report": {"mcp:admin"}},
			Resources: map[string][]string{"file:///var/log/{name}": {"mcp:admin"}}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusOK)
	})))
	t.Cleanup(srv.Close)
	c := ks.claims()
	c["scope"] = "mcp:tools"
	tok := ks.mint(c)
	complete := func(ref string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":` + ref + `,"argument":{"name":"name","value":""}}}`
	}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"completes an unguarded prompt", complete(`{"type":"ref/prompt","name":"greeting"}`), 200},
		{"refuses a guarded prompt", complete(`{"type":"ref/prompt","name":"incident_report"}`), 403},
		{"refuses a guarded prompt spelt with an escape", complete(`{"type":"ref\u002fprompt","name":"incident\u005freport"}`), 403},
		{"refuses a guarded template", complete(`{"type":"ref/resource","uri":"file:///var/log/{name}"}`), 403},
		{"refuses a resource of a guarded template", complete(`{"type":"ref/resource","uri":"file:///var/log/audit"}`), 403},
		{"completes an unguarded template", complete(`{"type":"ref/resource","uri":"file:///srv/{name}"}`), 200},
		{"refuses name twice", complete(`{"type":"ref/prompt","name":"greeting","name":"incident_report"}`), 400},
		{"refuses ref twice", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greeting"},"ref":{"type":"ref/prompt","name":"incident_report"}}}`, 400},
		{"refuses Name beside name", complete(`{"type":"ref/prompt","Name":"greeting","name":"incident_report"}`), 400},
		{"refuses type twice", complete(`{"type":"ref/resource","type":"ref/prompt","name":"incident_report"}`), 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reached.Load()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || (reached.Load() > before) != (tc.status == 200) {
				t.Errorf("%d (reached %v), want %d", resp.StatusCode, reached.Load() > before, tc.status)
			}
		})
	}
}
