package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/storage/memory"
)

func TestRunExitStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	srv, err := as.New(ctx, as.Config{
		Issuer:    issuer,
		Resources: []as.Resource{{URI: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools"}, Default: true}},
		Clients:   []as.Client{{ID: "bot", Secret: "bot-secret-0123456789", GrantTypes: []string{"client_credentials"}}},
		Store:     memory.New(),
		Secret:    bytes.Repeat([]byte{7}, 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	defer ts.Close()

	cases := []struct {
		name     string
		args     []string
		want     int
		wantOut  string
		wantErr  string
		jsonReqs int
	}{
		{"prints a JSON result and exits 0 when every request succeeded",
			[]string{"-issuer", issuer, "-client-id", "bot", "-client-secret", "bot-secret-0123456789", "-c", "4", "-n", "40", "-json"}, 0, `"per_second"`, "", 40},
		{"prints a line and exits 1 when requests failed",
			[]string{"-issuer", issuer, "-client-id", "bot", "-client-secret", "wrong-secret-0123456789", "-c", "2", "-n", "4"}, 1, "errors 4 (status 401:4)", "", 0},
		{"exits 1 for a target off this machine", []string{"-issuer", "http://203.0.113.9:9000", "-client-id", "a", "-client-secret", "b"}, 1, "", "only loopback", 0},
		{"exits 1 for a grant it does not know", []string{"-issuer", issuer, "-grant", "password"}, 1, "", "unknown grant", 0},
		{"exits 2 for an unknown flag", []string{"-bogus"}, 2, "", "flag provided but not defined", 0},
		{"exits 2 for a stray argument", []string{"-issuer", issuer, "extra"}, 2, "", "unexpected arguments", 0},
		{"exits 0 for -h", []string{"-h"}, 0, "", "-grant", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if got := run(ctx, tc.args, &out, &errb); got != tc.want {
				t.Fatalf("exit %d, want %d\n%s%s", got, tc.want, &out, &errb)
			}
			if !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(errb.String(), tc.wantErr) {
				t.Fatalf("stdout %q stderr %q", &out, &errb)
			}
			if tc.jsonReqs > 0 {
				var res jsonOut
				if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Requests != tc.jsonReqs || res.Errors != 0 || res.Status["200"] != tc.jsonReqs {
					t.Fatalf("%v %s", err, &out)
				}
			}
		})
	}
}
