package scaletest

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	loadgenOnce sync.Once
	loadgenPath string
	loadgenErr  error
)

// loadgenBin builds cmd/loadgen next to the authserver binary.
func loadgenBin(t *testing.T) string {
	t.Helper()
	authserverBin(t) // makes binDir
	loadgenOnce.Do(func() {
		dir := binDir
		if dir == "" {
			dir = t.TempDir()
		}
		loadgenPath = filepath.Join(dir, "loadgen")
		out, err := exec.Command("go", "build", "-o", loadgenPath, "github.com/mcpauth/mcpauth/cmd/loadgen").CombinedOutput()
		if err != nil {
			loadgenErr = err
			t.Logf("%s", out)
		}
	})
	if loadgenErr != nil {
		t.Fatal(loadgenErr)
	}
	return loadgenPath
}

func TestLoadgenDrivesEveryGrantOfARealServer(t *testing.T) {
	t.Parallel()
	in := newInstance(t, conf{storage: "sqlite:" + filepath.Join(t.TempDir(), "auth.db")})
	if !in.start(t) {
		t.FailNow()
	}
	bin := loadgenBin(t)
	common := []string{"-issuer", in.issuer, "-c", "4", "-n", "60", "-json"}
	machine := []string{"-client-id", botID, "-client-secret", botSecret}
	person := []string{"-public-client", appID, "-redirect-uri", redirectURI, "-user", username, "-password", userPass,
		"-scope", "mcp:tools", "-resource", resource}
	cases := []struct {
		name string
		args []string
	}{
		{"issues client credentials tokens", append([]string{"-grant", "client_credentials"}, machine...)},
		{"redeems codes minted through the login and consent pages", append([]string{"-grant", "authorization_code"}, person...)},
		{"rotates refresh-token chains", append([]string{"-grant", "refresh_token"}, person...)},
		{"introspects a token", append([]string{"-grant", "introspection"}, machine...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(bin, append(common, tc.args...)...).Output()
			if err != nil {
				var stderr string
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("loadgen: %v\n%s%s", err, out, stderr)
			}
			var res struct {
				Requests  int            `json:"requests"`
				Errors    int            `json:"errors"`
				Status    map[string]int `json:"status"`
				PerSecond float64        `json:"per_second"`
				P99MS     float64        `json:"p99_ms"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if res.Requests != 60 || res.Errors != 0 || res.Status["200"] != 60 || res.PerSecond <= 0 || res.P99MS <= 0 {
				t.Fatalf("result %s", out)
			}
		})
	}
	t.Run("refuses a target off this machine with status 1", func(t *testing.T) {
		out, err := exec.Command(bin, "-issuer", "http://192.0.2.1:9000", "-client-id", "a", "-client-secret", "b").CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "only loopback") {
			t.Fatalf("%v %s", err, out)
		}
	})
	t.Run("rejects an unknown flag with status 2", func(t *testing.T) {
		err := exec.Command(bin, "-bogus").Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Fatalf("%v", err)
		}
	})
}
