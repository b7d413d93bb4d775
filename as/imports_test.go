package as

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyPackageASImportsFosite proves the package layout rule: fosite
// stays behind as/'s API. No other package of the module, as/loginui
// included, imports it, in its code or in its tests.
func TestOnlyPackageASImportsFosite(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("go tool not found")
		}
		t.Skip("go tool not found")
	}
	out, err := exec.Command("go", "list", "-e", "-f",
		`{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
		"github.com/mcpauth/mcpauth/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const self = "github.com/mcpauth/mcpauth/as"
	seen := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if imp != "github.com/ory/fosite" && !strings.HasPrefix(imp, "github.com/ory/fosite/") {
				continue
			}
			if pkg == self {
				seen = true
				continue
			}
			t.Errorf("%s imports %s; only %s may", pkg, imp, self)
		}
	}
	if !seen {
		t.Errorf("%s does not import fosite: the listing is wrong", self)
	}
}
