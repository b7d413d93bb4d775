package launch_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

func ExampleParseEnv() {
	env, err := launch.ParseEnv(strings.NewReader(`
# the MCP server
MCPSERVER_RESOURCE=http://127.0.0.1:8080/mcp
MCPSERVER_CLIENT_ID = example-mcpserver
`), "stack.env")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(env["MCPSERVER_RESOURCE"])
	fmt.Println(env["MCPSERVER_CLIENT_ID"])
	// Output:
	// http://127.0.0.1:8080/mcp
	// example-mcpserver
}

// Start runs the stack from a checkout of the module; the end-to-end tests
// in e2e/ do exactly this on free ports.
func ExampleStart() {
	ctx := context.Background()
	work, _ := os.MkdirTemp("", "stack")
	defer os.RemoveAll(work)
	if err := launch.Build(ctx, ".", work+"/bin"); err != nil {
		log.Fatal(err)
	}
	s, err := launch.Start(ctx, launch.Options{
		Root: ".", BinDir: work + "/bin", WorkDir: work,
		Storage: "memory",
		Log:     os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Stop()
	fmt.Println("MCP server at", s.MCPURL, "issuer", s.Issuer)
}
