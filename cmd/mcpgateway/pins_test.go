package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

func TestGatewayPinsEnforceUntilApprovedByTheCLI(t *testing.T) {
	dir := t.TempDir()
	pins := filepath.Join(dir, "tool-pins.json")
	conf := baseConfig + "pins: {file: " + pins + ", mode: enforce}\n"
	s := newStack(t, false, conf)
	ctx := context.Background()
	admin := s.connect(t, s.token(t, "admin-bot"))

	// A call before any list: the gateway lists the tools itself, finds
	// echo unapproved and refuses the call without forwarding it.
	_, err := admin.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err == nil || !strings.Contains(err.Error(), "awaits approval") {
		t.Fatalf("call of an unapproved tool: %v", err)
	}
	if got := toolNames(t, admin); len(got) != 0 {
		t.Fatalf("tools listed before approval: %v", got)
	}
	audit := s.audit.String()
	if !strings.Contains(audit, `"event":"tool.unpinned","method":"tools/list","tool":"echo"`) || !strings.Contains(audit, `"result":"awaiting_approval"`) {
		t.Errorf("audit %s: want tool.unpinned and the call awaiting_approval", audit)
	}

	// The operator reviews and approves echo with the CLI; the running
	// gateway reads the file within a second or two.
	cfgFile := filepath.Join(dir, "mcpgateway.yaml")
	if err := os.WriteFile(cfgFile, []byte("pins: {file: ${PINS_FILE}}\nresource: whatever\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		if k == "PINS_FILE" {
			return pins, true
		}
		return "", false
	}
	var out strings.Builder
	if err := runPins([]string{"list", "--config", cfgFile}, env, &out); err != nil || !strings.Contains(out.String(), "echo\tpending (new)\t") {
		t.Fatalf("pins list: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runPins([]string{"diff", "echo", "--config", cfgFile}, env, &out); err != nil ||
		!strings.Contains(out.String(), "--- approved echo: none") || !strings.Contains(out.String(), `+   "description": "Echoes text.",`) {
		t.Fatalf("pins diff: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runPins([]string{"approve", "echo", "--config=" + cfgFile}, env, &out); err != nil || !strings.HasPrefix(out.String(), "approved echo sha256:") {
		t.Fatalf("pins approve: %v\n%s", err, out.String())
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(toolNames(t, admin), "echo") {
		if time.Now().After(deadline) {
			t.Fatal("echo not listed 5 s after its approval")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := toolNames(t, admin); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("tools %v, want echo only (admin_stats is not approved)", got)
	}
	res, err := admin.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("call of the approved tool: %v %v", err, res)
	}
	data, _ := os.ReadFile(pins)
	pf, err := rsmiddleware.ParsePinsFile(data)
	if err != nil || pf.Tools["echo"].Definition == nil || len(pf.Pending) != 1 {
		t.Errorf("pins file %s: %v; want echo approved, admin_stats pending", data, err)
	}
}

func TestGatewayPinsLearnWritesTheFile(t *testing.T) {
	pins := filepath.Join(t.TempDir(), "tool-pins.json")
	s := newStack(t, true, baseConfig+"pins: {file: "+pins+", mode: learn}\n")
	admin := s.connect(t, s.token(t, "admin-bot"))
	if got := toolNames(t, admin); len(got) != 2 {
		t.Fatalf("learn: tools %v, want both", got)
	}
	pf, err := rsmiddleware.ReadPinsFile(pins)
	if err != nil || len(pf.Tools) != 2 || len(pf.Pending) != 0 {
		t.Fatalf("learnt file: %+v %v", pf, err)
	}
}

func TestGatewayScreeningHidesWithAConfiguredPattern(t *testing.T) {
	s := newStack(t, false, baseConfig+"screening: {action: hide, patterns: [\"echoes\\\\s+text\"]}\n")
	ctx := context.Background()
	admin := s.connect(t, s.token(t, "admin-bot"))
	if got := toolNames(t, admin); !slices.Equal(got, []string{"admin_stats"}) {
		t.Fatalf("tools %v, want admin_stats only", got)
	}
	_, err := admin.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err == nil || !strings.Contains(err.Error(), "withheld") {
		t.Fatalf("call of a screened tool: %v", err)
	}
	if a := s.audit.String(); !strings.Contains(a, `"pattern":"screening.patterns[0]"`) || !strings.Contains(a, `"result":"withheld"`) {
		t.Errorf("audit %s", a)
	}
}

func TestParseConfigPinsAndScreeningErrors(t *testing.T) {
	base := "resource: https://gw.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:1/mcp\n"
	broken := filepath.Join(t.TempDir(), "broken.json")
	if err := os.WriteFile(broken, []byte(`{"tools":{"x":{"sha256":"nothex"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ extra, want string }{
		{"screening: {patterns: [\"ok\", \"(unclosed\"]}\n", "screening.patterns[1]"},
		{"screening: {action: block}\n", "screening.action"},
		{"pins: {mode: enforce}\n", "pins.file"},
		{"pins: {file: /tmp/x.json, mode: trust}\n", "pins.mode"},
		{"pins: {file: " + broken + "}\n", "pins.file"},
		{"pins: {file: /tmp/x.json, mod: learn}\n", "mod"},
	} {
		if _, err := ParseConfig([]byte(base+tc.extra), env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", tc.extra, err, tc.want)
		}
	}
}

func TestPinsCLIUsage(t *testing.T) {
	var out strings.Builder
	for _, args := range [][]string{
		{"list"},                     // no --config
		{"approve", "--config", "x"}, // no name, no --all
		{"approve", "--all", "a", "--config", "x"},
		{"frobnicate", "--config", "x"},
		{"list", "--force", "--config", "x"},
	} {
		if err := runPins(args, env(nil), &out); err == nil {
			t.Errorf("pins %v: no error", args)
		}
	}
}

// SIGHUP makes the running gateway read the pins file again, also when the
// file's change is not seen by the poll (here: the poll is slowed to an
// hour), and a file broken meanwhile leaves the pins in force.
func TestSIGHUPRereadsThePinsFile(t *testing.T) {
	old := pinsPollInterval
	pinsPollInterval = time.Hour
	t.Cleanup(func() { pinsPollInterval = old })
	dir := t.TempDir()
	pins := filepath.Join(dir, "tool-pins.json")
	cfgPath := filepath.Join(dir, "mcpgateway.yaml")
	conf := "listen: 127.0.0.1:0\nresource: https://gw.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:1/mcp\naudit: {format: off}\npins: {file: " + pins + "}\n"
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--config", cfgPath}, io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(logs.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in\n%s", what, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("mcpgateway: listening")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("mcpgateway: pins file reloaded")
	if err := os.WriteFile(pins, []byte(`{"tools":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("pins file not reloaded; the previous pins stay")
}
