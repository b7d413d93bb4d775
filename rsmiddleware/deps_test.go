package rsmiddleware

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependenciesStayLight proves the package contract: what an MCP server
// imports never pulls in the authorization server, registration, storage,
// fosite or pgx, metadata imports the standard library only, and dpop the
// standard library and go-jose.
func TestDependenciesStayLight(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("go tool not found")
		}
		t.Skip("go tool not found")
	}
	forbidden := []string{
		"github.com/mcpauth/mcpauth/as",
		"github.com/mcpauth/mcpauth/dcr",
		"github.com/mcpauth/mcpauth/storage",
		"github.com/ory/fosite",
		"github.com/jackc/pgx",
	}
	list := func(pkgs ...string) []string {
		out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", pkgs, err)
		}
		return strings.Fields(string(out))
	}
	for _, dep := range list("../rsmiddleware/...", "../metadata/...") {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("rsmiddleware or metadata depends on %s", dep)
			}
		}
	}
	for _, dep := range list("../metadata/...") {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && !strings.HasPrefix(dep, "github.com/mcpauth/mcpauth/metadata") {
			t.Errorf("metadata depends on non-standard package %s", dep)
		}
	}
	// toolpolicy, the policy engine MCPFilter shares with the gateway: the
	// standard library and cel-go with the modules cel-go needs.
	celModules := []string{"github.com/google/cel-go/", "cel.dev/expr", "github.com/antlr4-go/antlr/", "google.golang.org/protobuf/",
		"google.golang.org/genproto/", "golang.org/x/exp/", "go.yaml.in/yaml/"}
	fromCEL := func(dep string) bool {
		return slices.ContainsFunc(celModules, func(m string) bool { return strings.HasPrefix(dep, m) })
	}
	for _, dep := range list("../toolpolicy") {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && dep != "github.com/mcpauth/mcpauth/toolpolicy" && !fromCEL(dep) {
			t.Errorf("toolpolicy depends on %s (allowed: std, cel-go and its modules)", dep)
		}
	}
	// The OpenTelemetry API (trace, propagation, attribute and the modules
	// they import), never its SDK, exporters or gRPC: a server chooses
	// those by setting a TracerProvider.
	fromOTelAPI := func(dep string) bool {
		if strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters") {
			return false
		}
		return strings.HasPrefix(dep, "go.opentelemetry.io/otel") || strings.HasPrefix(dep, "go.opentelemetry.io/auto/sdk") ||
			strings.HasPrefix(dep, "github.com/go-logr/") || strings.HasPrefix(dep, "github.com/cespare/xxhash/v2") ||
			dep == "github.com/mcpauth/mcpauth/internal/tracing"
	}
	for _, dep := range list(".") {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && !strings.HasPrefix(dep, "github.com/go-jose/go-jose/v4") && dep != "github.com/mcpauth/mcpauth/toolpolicy" && !fromCEL(dep) &&
			!strings.HasPrefix(dep, "github.com/mcpauth/mcpauth/metadata") && !strings.HasPrefix(dep, "github.com/mcpauth/mcpauth/rsmiddleware") &&
			dep != "github.com/mcpauth/mcpauth/dpop" && dep != "github.com/mcpauth/mcpauth/internal/bearerretry" && dep != "github.com/mcpauth/mcpauth/internal/jsonstr" && !fromOTelAPI(dep) {
			t.Errorf("rsmiddleware core depends on %s (allowed: std, go-jose, metadata, dpop, internal/bearerretry, internal/jsonstr, toolpolicy, the OpenTelemetry API)", dep)
		}
	}
	// internal/bearerretry, shared with the gateway: the standard library only.
	for _, dep := range list("../internal/bearerretry") {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && dep != "github.com/mcpauth/mcpauth/internal/bearerretry" {
			t.Errorf("internal/bearerretry depends on %s (allowed: std)", dep)
		}
	}
	// dpop is shared by clients, the AS and resource servers: the standard
	// library and go-jose only.
	for _, dep := range list("../dpop") {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && !strings.HasPrefix(dep, "github.com/go-jose/go-jose/v4") && dep != "github.com/mcpauth/mcpauth/dpop" {
			t.Errorf("dpop depends on %s (allowed: std, go-jose)", dep)
		}
	}
}
