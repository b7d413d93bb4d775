// Package launch starts the example stack (the authorization server, the
// example MCP server and the downstream API) as local processes, from the same
// configuration files in deploy/ that docker-compose.yml uses. It backs the
// examples/stack command and the end-to-end tests in e2e/, which is how the
// launcher is kept from rotting.
package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpauth/mcpauth/internal/freeport"
)

// The addresses deploy/authserver.yaml and deploy/stack.env are written for.
// Start replaces them, in the configuration text, by the addresses it is given.
const (
	DefaultASAddr         = "127.0.0.1:9000"
	DefaultMCPAddr        = "127.0.0.1:8080"
	DefaultDownstreamAddr = "127.0.0.1:8081"
)

// Programs are the binaries Build produces, by package directory relative to
// the module root.
var Programs = map[string]string{
	"authserver": "./cmd/authserver",
	"mcpserver":  "./examples/mcpserver",
	"downstream": "./examples/downstream",
}

// Build compiles the stack's programs from the module at root into binDir.
func Build(ctx context.Context, root, binDir string, extraEnv ...string) error {
	args := []string{"build", "-o", binDir + string(os.PathSeparator)}
	for _, name := range []string{"authserver", "mcpserver", "downstream"} {
		args = append(args, Programs[name])
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), extraEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// Options say where the stack runs. Zero values: the default addresses, the
// storage named in the config file, output discarded.
type Options struct {
	// Root is the module root; deploy/ is read from it.
	Root string
	// BinDir holds the binaries built by Build.
	BinDir string
	// WorkDir receives the generated configuration file. Required.
	WorkDir string
	// Addresses (host:port) of the three servers.
	ASAddr, MCPAddr, DownstreamAddr string
	// Storage overrides the config's storage (AUTHSERVER_STORAGE), e.g.
	// postgres://... . Empty: the file's value.
	Storage string
	// EditConfig, when set, rewrites the AS configuration text after the
	// addresses were substituted (tests add a CIMD allowlist this way).
	EditConfig func(string) string
	// Env is added to every process's environment, after deploy/stack.env and
	// the caller's environment.
	Env []string
	// Log receives every process's output, each line prefixed by its name.
	Log io.Writer
	// MCPServerArgs are added to the example MCP server's command line
	// (for example --dpop).
	MCPServerArgs []string
	// HealthTimeout bounds the wait for each server; zero means 60s.
	HealthTimeout time.Duration
}

// Stack is a running stack.
type Stack struct {
	Issuer        string // the AS issuer, e.g. http://127.0.0.1:9000
	MCPURL        string // the MCP endpoint and resource URI, .../mcp
	DownstreamURL string // the downstream API's resource URI, .../api
	ConfigPath    string // the generated AS configuration
	Env           map[string]string

	procs []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start launches the AS, then the downstream API, then the MCP server, waiting
// for each to answer its health URL. On error it stops what it started.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.WorkDir == "" || o.BinDir == "" || o.Root == "" {
		return nil, errors.New("launch: Root, BinDir and WorkDir are required")
	}
	if o.ASAddr == "" {
		o.ASAddr = DefaultASAddr
	}
	if o.MCPAddr == "" {
		o.MCPAddr = DefaultMCPAddr
	}
	if o.DownstreamAddr == "" {
		o.DownstreamAddr = DefaultDownstreamAddr
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.HealthTimeout == 0 {
		o.HealthTimeout = 60 * time.Second
	}
	rewrite := strings.NewReplacer(
		DefaultASAddr, o.ASAddr,
		DefaultMCPAddr, o.MCPAddr,
		DefaultDownstreamAddr, o.DownstreamAddr,
	)

	env, err := ReadEnvFile(filepath.Join(o.Root, "deploy", "stack.env"))
	if err != nil {
		return nil, err
	}
	for k, v := range env {
		env[k] = rewrite.Replace(v)
	}
	// The caller's environment overrides the development defaults of stack.env
	// (e.g. a real AUTHSERVER_SECRET), but never the addresses.
	for _, k := range []string{"AUTHSERVER_SECRET", "MCPSERVER_CLIENT_SECRET"} {
		if v, ok := os.LookupEnv(k); ok && v != "" {
			env[k] = v
		}
	}
	env["AUTHSERVER_LISTEN"] = o.ASAddr
	env["AUTHSERVER_ISSUER"] = "http://" + o.ASAddr
	if o.Storage != "" {
		env["AUTHSERVER_STORAGE"] = o.Storage
	}
	for _, kv := range o.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}

	raw, err := os.ReadFile(filepath.Join(o.Root, "deploy", "authserver.yaml"))
	if err != nil {
		return nil, err
	}
	cfgText := rewrite.Replace(string(raw))
	if o.EditConfig != nil {
		cfgText = o.EditConfig(cfgText)
	}
	cfgPath := filepath.Join(o.WorkDir, "authserver.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		return nil, err
	}

	s := &Stack{
		Issuer:        env["AUTHSERVER_ISSUER"],
		MCPURL:        env["MCPSERVER_RESOURCE"],
		DownstreamURL: env["DOWNSTREAM_RESOURCE"],
		ConfigPath:    cfgPath,
		Env:           env,
	}
	environ := os.Environ()
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	start := func(name string, health string, args ...string) error {
		p, err := startProc(o, name, environ, args...)
		if err != nil {
			return err
		}
		s.procs = append(s.procs, p)
		return waitHealthy(ctx, p, health, o.HealthTimeout)
	}

	if err := start("authserver", s.Issuer+"/healthz",
		"serve", "--config", cfgPath); err != nil {
		s.Stop()
		return nil, err
	}
	if err := start("downstream", "http://"+o.DownstreamAddr+"/healthz",
		"--listen="+o.DownstreamAddr,
		"--resource="+s.DownstreamURL,
		"--issuer="+s.Issuer,
	); err != nil {
		s.Stop()
		return nil, err
	}
	if err := start("mcpserver", "http://"+o.MCPAddr+"/healthz", append([]string{
		"--listen=" + o.MCPAddr,
		"--resource=" + s.MCPURL,
		"--issuer=" + s.Issuer,
		"--downstream=" + s.DownstreamURL,
		"--client-id=" + env["MCPSERVER_CLIENT_ID"],
	}, o.MCPServerArgs...)...); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func startProc(o Options, name string, environ []string, args ...string) (*proc, error) {
	cmd := exec.Command(filepath.Join(o.BinDir, name), args...)
	cmd.Env = environ
	cmd.Dir = o.WorkDir
	dieWithParent(cmd)
	pw := &prefixWriter{prefix: "[" + name + "] ", w: o.Log}
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		pw.flush()
		close(p.done)
	}()
	return p, nil
}

// waitHealthy polls url until it answers 2xx, the process exits, or timeout.
func waitHealthy(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it became healthy: %v", p.name, p.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s within %s", p.name, url, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop interrupts every process, newest first, and kills what has not exited
// after five seconds.
func (s *Stack) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	s.procs = nil
}

// Exited reports the first process that has exited, if any, and how.
func (s *Stack) Exited() (name string, err error, exited bool) {
	for _, p := range s.procs {
		select {
		case <-p.done:
			return p.name, p.err, true
		default:
		}
	}
	return "", nil, false
}

// ReadEnvFile reads an env file (see ParseEnv).
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseEnv(f, path)
}

// ParseEnv reads KEY=VALUE lines, the subset of docker compose's env_file
// format that deploy/stack.env uses: blank lines and lines starting with #
// are skipped, surrounding spaces are trimmed, the value is everything after
// the first "=", and there is no quoting or ${VAR} expansion. name is used in
// error messages.
func ParseEnv(r io.Reader, name string) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("%s:%d: not KEY=VALUE", name, n)
		}
		env[k] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return env, nil
}

// FreeAddr returns a 127.0.0.1 address for a server to be started, reserved
// with freeport for the rest of this process's life: no other listener,
// outgoing connection or harness on this machine takes its port before the
// server binds it, nor between a stop and a restart on the same address.
func FreeAddr() (string, error) {
	addr, _, err := freeport.Reserve()
	return addr, err
}

// prefixWriter writes whole lines to w, each with prefix.
type prefixWriter struct {
	mu     sync.Mutex
	prefix string
	w      io.Writer
	buf    []byte
}

func (pw *prefixWriter) Write(b []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.buf = append(pw.buf, b...)
	for {
		i := strings.IndexByte(string(pw.buf), '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(pw.w, "%s%s\n", pw.prefix, pw.buf[:i])
		pw.buf = pw.buf[i+1:]
	}
	return len(b), nil
}

func (pw *prefixWriter) flush() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if len(pw.buf) > 0 {
		fmt.Fprintf(pw.w, "%s%s\n", pw.prefix, pw.buf)
		pw.buf = nil
	}
}
