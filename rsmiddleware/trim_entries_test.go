package rsmiddleware

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

var entryScopes = Scopes{
	Base:    []string{"mcp:tools"},
	Methods: map[string][]string{"resources/read": {"mcp:read"}},
	Prompts: map[string][]string{"incident_report": {"mcp:ops"}},
	Resources: map[string][]string{
		"file:///etc/secrets":       {"mcp:admin"},
		"db://{table}/rows{?limit}": {"mcp:db"},
	},
}

// entriesUpstream answers the list methods with two entries each, one of
// them guarded, and every other request with an empty result.
func entriesUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.NewDecoder(r.Body).Decode(&msg) != nil || msg.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := `{}`
		switch msg.Method {
		case "prompts/list":
			result = `{"prompts":[{"name":"greeting"},{"name":"incident_report","description":"ops only"}]}`
		case "resources/list":
			result = `{"resources":[{"uri":"file:///readme","name":"readme"},{"uri":"file:///etc/secrets","name":"secrets"},{"uri":"db://users/rows","name":"users"}]}`
		case "resources/templates/list":
			result = `{"resourceTemplates":[{"uriTemplate":"file:///{path}","name":"files"},{"uriTemplate":"db://{table}/rows{?limit}","name":"rows"}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":` + result + `}`))
	})
}

// entryNames lists the member key of the entries of result.member.
func entryNames(t *testing.T, resp *http.Response, member, key string) []string {
	t.Helper()
	answers := rpcAnswers(t, resp)
	if len(answers) != 1 {
		t.Fatalf("%d answers", len(answers))
	}
	var result map[string][]map[string]any
	if err := json.Unmarshal(answers[0]["result"], &result); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range result[member] {
		out = append(out, e[key].(string))
	}
	return out
}

func TestMCPFilterTrimsPromptAndResourceListsEntryByEntry(t *testing.T) {
	fx := newFilterFixture(t, entriesUpstream(), func(c *MCPFilterConfig) { c.Scopes = entryScopes })
	for _, c := range []struct {
		scope, method, member, key string
		want                       []string
	}{
		{"mcp:tools", "prompts/list", "prompts", "name", []string{"greeting"}},
		{"mcp:tools mcp:ops", "prompts/list", "prompts", "name", []string{"greeting", "incident_report"}},
		{"mcp:tools", "resources/list", "resources", "uri", nil},
		{"mcp:tools mcp:read", "resources/list", "resources", "uri", []string{"file:///readme"}},
		{"mcp:tools mcp:read mcp:db", "resources/list", "resources", "uri", []string{"file:///readme", "db://users/rows"}},
		{"mcp:tools mcp:read mcp:admin mcp:db", "resources/list", "resources", "uri", []string{"file:///readme", "file:///etc/secrets", "db://users/rows"}},
		{"mcp:tools mcp:read", "resources/templates/list", "resourceTemplates", "uriTemplate", []string{"file:///{path}"}},
		{"mcp:tools mcp:read mcp:db", "resources/templates/list", "resourceTemplates", "uriTemplate", []string{"file:///{path}", "db://{table}/rows{?limit}"}},
	} {
		t.Run(c.scope+" "+c.method, func(t *testing.T) {
			resp := fx.post(t, fx.token(c.scope), `{"jsonrpc":"2.0","id":1,"method":"`+c.method+`"}`)
			if got := entryNames(t, resp, c.member, c.key); !slices.Equal(got, c.want) {
				t.Errorf("%s = %v, want %v", c.member, got, c.want)
			}
		})
	}
}

// A prompts/get or resources/read of a hidden entry gets the step-up
// challenge a hidden tool gets, naming every scope it needs.
func TestMiddlewareStepsUpReadsOfHiddenPromptsAndResources(t *testing.T) {
	fx := newFilterFixture(t, entriesUpstream(), func(c *MCPFilterConfig) { c.Scopes = entryScopes })
	for _, c := range []struct {
		name, scope, body, want string
	}{
		{"a hidden prompt", "mcp:tools", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"incident_report"}}`, "mcp:tools mcp:ops"},
		{"a hidden resource", "mcp:tools mcp:read", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///etc/secrets"}}`, "mcp:tools mcp:read mcp:admin"},
		{"a resource of a hidden template", "mcp:tools mcp:read", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"db://orders/rows?limit=5"}}`, "mcp:tools mcp:read mcp:db"},
		{"a subscription to a hidden resource", "mcp:tools mcp:read", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///etc/secrets"}}`, "mcp:tools mcp:admin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := fx.post(t, fx.token(c.scope), c.body)
			h := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(h, `error="insufficient_scope"`) || !strings.Contains(h, `scope="`+c.want+`"`) {
				t.Errorf("%d %q, want 403 asking for %q", resp.StatusCode, h, c.want)
			}
		})
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greeting"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///readme"}}`,
	} {
		if resp := fx.post(t, fx.token("mcp:tools mcp:read"), body); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", body, resp.StatusCode)
		}
	}
}

func TestTemplateMatchesReadsEveryExpressionAsAnyText(t *testing.T) {
	for _, c := range []struct {
		template, uri string
		want          bool
	}{
		{"db://{table}/rows{?limit}", "db://users/rows", true},
		{"db://{table}/rows{?limit}", "db://users/rows?limit=3", true},
		{"db://{table}/rows{?limit}", "db://a/b/rows", true},
		{"db://{table}/rows{?limit}", "db://users/cols", false},
		{"db://{table}/rows{?limit}", "file://users/rows", false},
		{"file:///{path}", "file:///", true},
		{"{+any}", "anything", true},
		{"a{x}b{y}c", "abc", true},
		{"a{x}b{y}c", "ac", false},
		{"a{x}bb{y}b", "abbb", true},
		{"a{x}bb{y}b", "abb", false},
		{"plain://uri", "plain://uri", true},
		{"unclosed{x", "unclosed{x", true},
		{"unclosed{x", "unclosedy", false},
	} {
		if got := templateMatches(c.template, c.uri); got != c.want {
			t.Errorf("templateMatches(%q, %q) = %v, want %v", c.template, c.uri, got, c.want)
		}
	}
}
