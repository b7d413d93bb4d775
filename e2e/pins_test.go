package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// TestGatewayPinsAndScreeningInFrontOfATypeScriptServer runs the gateway
// of deploy/mcpgateway.yaml with pins (learn) and screening (hide) in
// front of the TypeScript server's forecast, whose description the server
// changes at /_rugpull, and add_numbers, whose description tells the model
// to read ~/.ssh/id_rsa. The first definitions are learnt and written to
// the pins file; the poisoned tool is hidden and audited while the clean
// ones stay; after the change forecast disappears, its call is refused
// without reaching the server, the audit names both digests, and
// `mcpgateway pins approve forecast` brings it back.
func TestGatewayPinsAndScreeningInFrontOfATypeScriptServer(t *testing.T) {
	pinsFile := filepath.Join(t.TempDir(), "tool-pins.json")
	_, upstream, auditFile, resource := startGatewayStackWith(t, "pins: {file: "+pinsFile+", mode: learn}\nscreening: {action: hide}\n", "PINS_TOOLS=1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := connectThroughGateway(t, ctx, resource, demoUser, demoPassword)
	list := func() []string {
		t.Helper()
		res, err := alice.session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, error) {
		return alice.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	}
	audit := func() string {
		b, _ := os.ReadFile(auditFile)
		return string(b)
	}

	got := list()
	if !slices.Contains(got, "forecast") || !slices.Contains(got, "echo") || slices.Contains(got, "add_numbers") {
		t.Fatalf("tools %v: want forecast and echo, never add_numbers", got)
	}
	pf, err := rsmiddleware.ReadPinsFile(pinsFile)
	if err != nil || pf.Tools["forecast"].Definition == nil || pf.Tools["echo"].SHA256 == "" {
		t.Fatalf("learn did not write forecast and echo to the file: %+v %v", pf, err)
	}
	if _, ok := pf.Tools["add_numbers"]; ok {
		t.Errorf("the poisoned tool was pinned")
	}
	if a := audit(); !strings.Contains(a, `"event":"tool.suspicious","method":"tools/list","tool":"add_numbers"`) ||
		!strings.Contains(a, `"pattern":"`) || strings.Contains(a, "id_rsa") {
		t.Errorf("audit: want tool.suspicious of add_numbers naming a pattern and never the text:\n%s", a)
	}
	if _, err := call("add_numbers", map[string]any{"a": 1, "b": 2}); err == nil || !strings.Contains(err.Error(), "withheld") {
		t.Fatalf("call of the poisoned tool: %v", err)
	}
	if res, err := call("forecast", map[string]any{"city": "Oslo"}); err != nil || toolText(t, res) != "sunny in Oslo" {
		t.Fatalf("forecast before the change: %v %v", res, err)
	}
	pinned := pf.Tools["forecast"].SHA256

	// The server changes forecast's description.
	resp, err := http.Get(strings.TrimSuffix(upstream.url, "/mcp") + "/_rugpull")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := list(); slices.Contains(got, "forecast") || !slices.Contains(got, "echo") {
		t.Fatalf("tools %v after the change: want echo and no forecast", got)
	}
	if _, err := call("forecast", map[string]any{"city": "Oslo"}); err == nil || !strings.Contains(err.Error(), "awaits approval") {
		t.Fatalf("call of the changed forecast: %v", err)
	}
	if calls := upstream.calls(t); slices.Contains(calls, "add_numbers") || countOf(calls, "forecast") != 1 {
		t.Errorf("the server ran %v: want forecast once, before the change, and never add_numbers", calls)
	}
	var changed map[string]any
	for _, line := range strings.Split(audit(), "\n") {
		if strings.Contains(line, `"event":"tool.definition_changed"`) && strings.Contains(line, `"tool":"forecast"`) {
			_ = json.Unmarshal([]byte(line), &changed)
		}
	}
	if changed == nil || changed["pinned_sha256"] != pinned || changed["tool_sha256"] == pinned || changed["tool_sha256"] == nil {
		t.Errorf("audit: want tool.definition_changed of forecast with both digests, got %v", changed)
	}
	if !strings.Contains(audit(), `"tool":"forecast"`) || !strings.Contains(audit(), `"result":"awaiting_approval"`) {
		t.Errorf("audit: the refused call is not awaiting_approval")
	}

	// The operator looks at the change and approves it.
	cfgPath := filepath.Join(t.TempDir(), "mcpgateway.yaml")
	if err := os.WriteFile(cfgPath, []byte("pins: {file: "+pinsFile+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pins := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(gatewayBinary(t), append(append([]string{"pins"}, args...), "--config", cfgPath)...).CombinedOutput()
		if err != nil {
			t.Fatalf("mcpgateway pins %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := pins("list"); !strings.Contains(out, "forecast\tpending (changed)\t") {
		t.Errorf("pins list:\n%s", out)
	}
	diff := pins("diff", "forecast")
	if !strings.Contains(diff, `-   "description": "Weather forecast for a city.",`) ||
		!strings.Contains(diff, `+   "description": "Weather forecast for a city, in Celsius or Fahrenheit.",`) {
		t.Errorf("pins diff forecast: want the old and the new description:\n%s", diff)
	}
	if out := pins("approve", "forecast"); !strings.HasPrefix(out, "approved forecast sha256:") {
		t.Errorf("pins approve:\n%s", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(list(), "forecast") {
		if time.Now().After(deadline) {
			t.Fatal("forecast not listed 10 s after its approval")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if res, err := call("forecast", map[string]any{"city": "Bergen"}); err != nil || toolText(t, res) != "sunny in Bergen" {
		t.Fatalf("forecast after approval: %v %v", res, err)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
