package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// approvalCommands drives `approvals list|revoke` against the configured
// storage, in both output formats.
func approvalCommands(t *testing.T, cfg string) {
	const secret = "operator-secret-operator-secret-0123456"
	ctx := context.Background()
	st, err := openStore(ctx, loadTestConfig(t, cfg, secret), true, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// The second id starts with '-', as one in 64 random ids does.
	ids := []string{"AAAAAAAAAAAAAAAAAAAAAA", "-BBBBBBBBBBBBBBBBBBBBB", "CCCCCCCCCCCCCCCCCCCCCC"}
	for i, sub := range []string{"alice", "bob", "alice"} {
		exp := now.Add(time.Hour)
		if i == 2 {
			exp = now.Add(-time.Minute)
		}
		if _, err := st.CreateApproval(ctx, &storage.Approval{ID: ids[i],
			ApprovalBinding: storage.ApprovalBinding{Subject: sub, ClientID: "demo-app", Resource: "http://127.0.0.1:8080/mcp",
				Tool: fmt.Sprint("send_email_", i), ArgsDigest: "abc"},
			Arguments: []byte(`{"password":"hunter2-secret"}`), CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	list := func(args ...string) []ops.Approval {
		t.Helper()
		out := mustCLI(t, secret, append([]string{"approvals", "list", "--config", cfg, "--format", "json"}, args...)...)
		var as []ops.Approval
		if err := json.Unmarshal([]byte(out), &as); err != nil {
			t.Fatalf("approvals list --format json: %v\n%s", err, out)
		}
		if strings.Contains(out, "hunter2") {
			t.Fatal("the listing shows arguments")
		}
		return as
	}
	all := list()
	if len(all) != 3 || all[0].ID != ids[1] || all[1].ID != ids[0] || all[2].Status != "pending" || !all[2].Expired || all[0].Expired {
		t.Fatalf("approvals list: %+v", all)
	}
	if got := list("--user", "alice"); len(got) != 2 || got[0].Subject != "alice" || got[1].Subject != "alice" {
		t.Fatalf("approvals list --user alice: %+v", got)
	}
	table := mustCLI(t, secret, "approvals", "list", "--config", cfg)
	for _, want := range []string{"APPROVAL_ID", ids[0], "send_email_0", "pending (expired)", "alice"} {
		if !strings.Contains(table, want) {
			t.Fatalf("table lacks %q:\n%s", want, table)
		}
	}

	if out := mustCLI(t, secret, "approvals", "revoke", "--config", cfg, "--", ids[1]); !strings.Contains(out, "revoked approval "+ids[1]) {
		t.Fatalf("revoke: %s", out)
	}
	if got := list(); len(got) != 2 {
		t.Fatalf("after revoking: %+v", got)
	}
	code, _, errOut := cli(t, secret, "approvals", "revoke", "--config", cfg, "--", ids[1])
	if code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("revoking twice: exit %d %s", code, errOut)
	}
	out := mustCLI(t, secret, "approvals", "revoke", "--config", cfg, "--format", "json", ids[0])
	var m map[string]string
	if err := json.Unmarshal([]byte(out), &m); err != nil || m["revoked"] != ids[0] {
		t.Fatalf("revoke --format json: %s", out)
	}
}

func TestApprovalCommandsOnSQLite(t *testing.T) {
	approvalCommands(t, operatorConfig(t, "sqlite:"+filepath.Join(t.TempDir(), "approvals.db")))
}

func TestApprovalCommandsOnPostgreSQL(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	approvalCommands(t, operatorConfig(t, dsn))
}

func TestApprovalCommandsHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"approvals", "--help"}, []string{"approvals <subcommand>", "list", "revoke ID"}},
		{[]string{"approvals", "list", "-h"}, []string{"approvals list", "-user", "-format"}},
		{[]string{"approvals", "revoke", "--help"}, []string{"approvals revoke [flags] ID", "write -- before it"}},
	} {
		code, out, errOut := runCLI(t, "", nil, tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: usage lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
}
