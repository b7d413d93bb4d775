// Command stack starts the whole example stack as local processes: the
// authorization server, the example MCP server and the downstream API, from
// the same configuration files (deploy/authserver.yaml, deploy/stack.env) and
// on the same ports as docker-compose.yml. It builds the binaries, waits until
// each answers its health URL, prints how to log in, and stops everything on
// Ctrl-C.
//
//	go run ./examples/stack                               # memory storage
//	go run ./examples/stack --storage postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

func main() {
	var o launch.Options
	flag.StringVar(&o.Storage, "storage", "", "AS storage (memory, sqlite:PATH, postgres://...); default: deploy/authserver.yaml's")
	flag.StringVar(&o.ASAddr, "as", launch.DefaultASAddr, "listen address of the authorization server")
	flag.StringVar(&o.MCPAddr, "mcp", launch.DefaultMCPAddr, "listen address of the example MCP server")
	flag.StringVar(&o.DownstreamAddr, "downstream", launch.DefaultDownstreamAddr, "listen address of the downstream API")
	quiet := flag.Bool("quiet", false, "do not show the servers' logs")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, *quiet, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o launch.Options, quiet bool, out io.Writer) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "mcpauth-stack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	o.Root, o.BinDir, o.WorkDir = root, filepath.Join(work, "bin"), work
	// Quiet: keep the servers' output, and show it only if start-up fails.
	held := &heldOutput{}
	if quiet {
		o.Log = held
	} else {
		o.Log = os.Stderr
	}

	fmt.Fprintln(out, "building authserver, mcpserver, downstream ...")
	if err := launch.Build(ctx, root, o.BinDir); err != nil {
		return err
	}
	s, err := launch.Start(ctx, o)
	if err != nil {
		held.release(os.Stderr)
		return err
	}
	held.release(io.Discard)
	defer s.Stop()

	fmt.Fprintf(out, `
The example stack is running:
  authorization server  %s
  MCP server            %s
  downstream API        %s

Try it with the example client (it prints a URL to open in a browser):
  go run ./examples/client --server %s --tool whoami

Log in as alice / alice-demo-password (or bob / bob-demo-password).
Other tools: --tool admin_stats (asks for mcp:admin), --tool fetch_report
(the MCP server calls the downstream API with an exchanged token).
Press Ctrl-C to stop.
`, s.Issuer, s.MCPURL, s.DownstreamURL, s.MCPURL)

	<-ctx.Done()
	fmt.Fprintln(out, "stopping ...")
	return nil
}

// moduleRoot finds the directory of go.mod for the current directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run this inside the mcpauth module (no go.mod found)")
	}
	return filepath.Dir(gomod), nil
}

// heldOutput keeps the servers' output until release, then passes it to w.
type heldOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
	w   io.Writer
}

func (h *heldOutput) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		return h.w.Write(p)
	}
	return h.buf.Write(p)
}

func (h *heldOutput) release(w io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.Write(h.buf.Bytes())
	h.buf.Reset()
	h.w = w
}
