package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// stage is one FROM ... block of the Dockerfile.
type stage struct {
	from  string
	lines []string
}

// Instructions of the Dockerfile reference (https://docs.docker.com/reference/dockerfile/).
var dockerInstructions = map[string]bool{
	"ADD": true, "ARG": true, "CMD": true, "COPY": true, "ENTRYPOINT": true, "ENV": true, "EXPOSE": true,
	"FROM": true, "HEALTHCHECK": true, "LABEL": true, "ONBUILD": true, "RUN": true, "SHELL": true,
	"STOPSIGNAL": true, "USER": true, "VOLUME": true, "WORKDIR": true,
}

func dockerfileStages(t *testing.T) []stage {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	// Join continuation lines, drop comments.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if !dockerInstructions[strings.ToUpper(f[0])] {
			t.Errorf("Dockerfile: unknown instruction %q", line)
		}
		if strings.EqualFold(f[0], "FROM") {
			stages = append(stages, stage{from: f[1]})
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
		}
	}
	return stages
}

// instruction returns the arguments of the last instruction named name in
// st, or "".
func (st stage) instruction(name string) string {
	arg := ""
	for _, l := range st.lines {
		if f := strings.Fields(l); strings.EqualFold(f[0], name) {
			arg = strings.TrimSpace(l[len(f[0]):])
		}
	}
	return arg
}

// execForm parses a JSON exec-form argument list, as Docker does.
func execForm(t *testing.T, what, s string) []string {
	t.Helper()
	var args []string
	if err := json.Unmarshal([]byte(s), &args); err != nil || len(args) == 0 {
		t.Fatalf("%s %q is not a JSON exec-form array: %v", what, s, err)
	}
	return args
}

// imageEnv returns the final stage's ENV values (KEY=VALUE form).
func imageEnv(t *testing.T, final stage) map[string]string {
	env := map[string]string{}
	for _, l := range final.lines {
		f := strings.Fields(l)
		if !strings.EqualFold(f[0], "ENV") {
			continue
		}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("ENV %q: use the KEY=VALUE form", l)
			}
			env[k] = v
		}
	}
	return env
}

// buildPackages returns the packages the build stage's `go build` lists.
func buildPackages(build string) []string {
	var pkgs []string
	_, cmd, _ := strings.Cut(build, "go build ")
	cmd, _, _ = strings.Cut(cmd, "\n")
	for _, f := range strings.Fields(cmd) {
		if strings.HasPrefix(f, "./") && len(f) > 2 {
			pkgs = append(pkgs, f)
		}
	}
	return pkgs
}

var (
	buildOnce sync.Once
	binDir    string
	binErr    error
)

// TestMain removes the binaries staticBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// staticBinary returns the program the Dockerfile's build stage builds from
// pkg (such as "./cmd/authserver"), built once per test run the same way:
// every package of its `go build` line, with CGO_ENABLED=0 for linux.
func staticBinary(t *testing.T, pkg string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("go tool not found")
		}
		t.Skip("go tool not found")
	}
	stages := dockerfileStages(t)
	pkgs := buildPackages(strings.Join(stages[0].lines, "\n"))
	if !slices.Contains(pkgs, pkg) {
		t.Fatalf("the Dockerfile does not build %s (it builds %v)", pkg, pkgs)
	}
	buildOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "mcpauth-image-bin")
		if binErr != nil {
			return
		}
		args := append([]string{"build", "-trimpath", "-o", binDir + string(os.PathSeparator)}, pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("CGO_ENABLED=0 go build %v: %v\n%s", pkgs, err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, filepath.Base(pkg))
}

// A multi-stage Dockerfile producing a small image with static binaries that
// runs as a non-root user, holding every program the compose stack runs. (No
// Docker engine here: the file is checked, and the static build it runs is
// reproduced with the Go toolchain.)
func TestDockerfileBuildsAStaticNonRootImage(t *testing.T) {
	stages := dockerfileStages(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a final stage", len(stages))
	}
	build, final := strings.Join(stages[0].lines, "\n"), stages[len(stages)-1]
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Error("the build stage does not set CGO_ENABLED=0 (static binaries)")
	}
	pkgs := buildPackages(build)
	for _, pkg := range []string{"./cmd/authserver", "./examples/mcpserver", "./examples/downstream", "./deploy/healthcheck"} {
		if !strings.Contains(strings.Join(pkgs, " "), pkg) {
			t.Errorf("the build stage does not build %s, which docker-compose.yml runs", pkg)
		}
	}
	if !strings.Contains(final.from, "distroless/static") && final.from != "scratch" {
		t.Errorf("final stage FROM %s, want a minimal static base (distroless/static or scratch)", final.from)
	}
	user, _, _ := strings.Cut(final.instruction("USER"), ":")
	if user == "" && !strings.HasSuffix(final.from, ":nonroot") {
		t.Error("final stage sets no USER and its base is not a nonroot image")
	}
	if user == "root" || user == "0" {
		t.Errorf("final stage runs as %s", user)
	}
	for _, l := range final.lines {
		if f := strings.Fields(l); strings.EqualFold(f[0], "RUN") {
			t.Errorf("final stage runs %q: a static base has no shell", l)
		}
	}
	for _, name := range []string{"ENTRYPOINT", "CMD"} {
		execForm(t, name, final.instruction(name))
	}

	// The build the image runs: every program, linked without cgo.
	for _, pkg := range pkgs {
		out, err := exec.Command("go", "version", "-m", staticBinary(t, pkg)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "CGO_ENABLED=0") {
			t.Errorf("%s not built without cgo:\n%s", pkg, out)
		}
	}
}

// The image bakes in no configuration, listens on every interface, and
// probes itself for HEALTHCHECK.
func TestDockerImageHasNoDemoConfigListensOnAllInterfacesAndIsHealthChecked(t *testing.T) {
	stages := dockerfileStages(t)
	final := stages[len(stages)-1]
	for _, l := range final.lines {
		f := strings.Fields(l)
		if (strings.EqualFold(f[0], "COPY") || strings.EqualFold(f[0], "ADD")) && !strings.HasPrefix(f[1], "--from=") {
			t.Errorf("final stage copies %q from the build context: no configuration is baked in", l)
		}
	}
	if got := imageEnv(t, final)["AUTHSERVER_LISTEN"]; !strings.HasPrefix(got, "0.0.0.0:") {
		t.Errorf("AUTHSERVER_LISTEN = %q, want 0.0.0.0:PORT so a published port reaches the server", got)
	}
	hc := final.instruction("HEALTHCHECK")
	opts, cmd, ok := strings.Cut(hc, "CMD ")
	if !ok {
		t.Fatalf("no HEALTHCHECK ... CMD: %q", hc)
	}
	for _, o := range strings.Fields(opts) {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "--interval", "--timeout", "--start-period", "--start-interval":
			if _, err := time.ParseDuration(v); err != nil {
				t.Errorf("HEALTHCHECK %s: %v", o, err)
			}
		case "--retries":
		default:
			t.Errorf("HEALTHCHECK option %q is not one Docker knows", o)
		}
	}
	if args := execForm(t, "HEALTHCHECK CMD", cmd); strings.Join(args, " ") != "/usr/local/bin/authserver healthcheck" {
		t.Errorf("HEALTHCHECK runs %v, want the server's own probe", args)
	}
}

// `docker run IMAGE` with nothing else: the entrypoint and command in the
// image's environment refuse to start and say what to provide.
func TestDockerImageWithoutConfigRefusesAndSaysWhatToProvide(t *testing.T) {
	stages := dockerfileStages(t)
	final := stages[len(stages)-1]
	bin := staticBinary(t, "./cmd/authserver")
	argv := append(execForm(t, "ENTRYPOINT", final.instruction("ENTRYPOINT"))[1:], execForm(t, "CMD", final.instruction("CMD"))...)
	cmd := exec.Command(bin, argv...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}
	for k, v := range imageEnv(t, final) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the image's command started a server with no configuration:\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"no configuration file", "AUTHSERVER_CONFIG", "AUTHSERVER_DEV=1"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the refusal does not mention %s:\n%s", want, stderr.String())
		}
	}
	if entries, _ := os.ReadDir(cmd.Dir); len(entries) != 0 {
		t.Errorf("the refused start left files behind: %v", entries)
	}
}
