package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// usersConfig is operatorConfig with a local user alice and a local user
// dora disabled in the file.
func usersConfig(t *testing.T, storage string) string {
	t.Helper()
	hash, err := password.Hash(alicePW)
	if err != nil {
		t.Fatal(err)
	}
	p := operatorConfig(t, storage)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b) + fmt.Sprintf("users:\n  - username: alice\n    password_hash: %q\n  - username: dora\n    password_hash: %q\n    disabled: true\n", hash, hash)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func listUsers(t *testing.T, secret, cfg string) map[string]ops.User {
	t.Helper()
	var us []ops.User
	out := mustCLI(t, secret, "users", "list", "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &us); err != nil {
		t.Fatalf("users list --format json: %v\n%s", err, out)
	}
	m := map[string]ops.User{}
	for _, u := range us {
		m[u.Subject] = u
	}
	return m
}

// userCommands drives `users list|show|disable|enable` against the
// configured storage, in both output formats.
func userCommands(t *testing.T, cfg string) {
	const secret = "operator-secret-operator-secret-0123456"
	ctx := context.Background()

	// Configured users are listed before anyone logged in.
	us := listUsers(t, secret, cfg)
	if len(us) != 2 || !us["alice"].Configured || us["alice"].LastSeen != nil || !us["alice"].Active ||
		us["dora"].DisabledBy != "config" || us["dora"].Active {
		t.Fatalf("users list before any login: %+v", us)
	}

	// A login of alice, a person from an upstream, alice's grant and session.
	st, err := openStore(ctx, loadTestConfig(t, cfg, secret), false, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for _, u := range []storage.User{
		{Subject: "alice", LastSeen: now},
		{Subject: "corp:7", Upstream: "corp", UpstreamSubject: "7", Name: "Seven\x1b[2J", Email: "seven@acme.example", Groups: []string{"mcp-users"}, LastSeen: now},
	} {
		if _, err := st.RecordLogin(ctx, &u); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateToken(ctx, &storage.Token{Kind: storage.KindRefreshToken, Signature: "rt-alice", RequestID: "g-alice", ClientID: "ci-bot",
		Subject: "alice", Active: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, &storage.Session{ID: "s-alice", Subject: "alice", CreatedAt: now, LastSeenAt: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	us = listUsers(t, secret, cfg)
	if len(us) != 3 || us["alice"].LastSeen == nil || us["corp:7"].Source != "upstream" || us["corp:7"].Active {
		t.Fatalf("users list after logins (corp is not configured, so corp:7 is inactive): %+v", us)
	}
	table := mustCLI(t, secret, "users", "list", "--config", cfg)
	if !strings.HasPrefix(table, "SUBJECT") || !strings.Contains(table, "upstream:corp") || strings.Contains(table, "\x1b") {
		t.Fatalf("users list (table):\n%q", table)
	}
	show := mustCLI(t, secret, "users", "show", "corp:7", "--config", cfg)
	for _, want := range []string{"subject:", "corp:7", "seven@acme.example", "mcp-users", "last_seen:", "active:"} {
		if !strings.Contains(show, want) {
			t.Errorf("users show (table) lacks %q:\n%s", want, show)
		}
	}
	if code, _, errOut := cli(t, secret, "users", "show", "nobody", "--config", cfg); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("users show unknown: exit %d %s", code, errOut)
	}

	// disable: the record, the grant, the session.
	var change ops.UserChange
	out := mustCLI(t, secret, "users", "disable", "alice", "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &change); err != nil || !change.User.Disabled || change.User.DisabledBy != "admin" ||
		change.User.Active || len(change.RevokedGrants) != 1 || change.EndedSessions != 1 {
		t.Fatalf("users disable --format json: %v %s", err, out)
	}
	if tok, err := st.GetToken(ctx, storage.KindRefreshToken, "rt-alice"); err != nil || tok.Active {
		t.Fatalf("alice's refresh token after disable: %+v %v", tok, err)
	}
	if ss, err := st.ListSessions(ctx, "alice"); err != nil || len(ss) != 0 {
		t.Fatalf("alice's sessions after disable: %v %v", ss, err)
	}
	if u, err := st.GetUser(ctx, "alice"); err != nil || !u.Disabled {
		t.Fatalf("alice's record after disable: %+v %v", u, err)
	}

	// enable: a file-disabled user is refused, nothing written; alice is
	// enabled and her grant stays revoked.
	if code, _, errOut := cli(t, secret, "users", "enable", "dora", "--config", cfg); code != 1 || !strings.Contains(errOut, "users[].disabled") {
		t.Fatalf("users enable of a user disabled in the file: exit %d %s", code, errOut)
	}
	if _, err := st.GetUser(ctx, "dora"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused enable wrote a record: %v", err)
	}
	if code, _, errOut := cli(t, secret, "users", "disable", "nobody", "--config", cfg); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("users disable unknown: exit %d %s", code, errOut)
	}
	if _, err := st.GetUser(ctx, "nobody"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused disable wrote a record: %v", err)
	}
	out = mustCLI(t, secret, "users", "enable", "alice", "--config", cfg)
	if !strings.Contains(out, "enabled alice") {
		t.Fatalf("users enable: %s", out)
	}
	if u := listUsers(t, secret, cfg)["alice"]; u.Disabled || !u.Active {
		t.Fatalf("alice after enable: %+v", u)
	}
	if tok, err := st.GetToken(ctx, storage.KindRefreshToken, "rt-alice"); err != nil || tok.Active {
		t.Fatalf("enable brought the refresh token back: %+v %v", tok, err)
	}
	if code, _, errOut := cli(t, secret, "users", "disable", "--config", cfg); code != 2 || !strings.Contains(errOut, "SUBJECT") {
		t.Fatalf("users disable without a subject: exit %d %s", code, errOut)
	}
}

func TestUserCommandsOnSQLite(t *testing.T) {
	userCommands(t, usersConfig(t, "sqlite:"+filepath.Join(t.TempDir(), "users.db")))
}

func TestUserCommandsOnPostgreSQL(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	userCommands(t, usersConfig(t, dsn))
}

func TestUserCommandsHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"users", "--help"}, []string{"users <subcommand>", "list", "show SUBJECT", "disable SUBJECT", "enable SUBJECT"}},
		{[]string{"users", "disable", "--help"}, []string{"users disable [flags] SUBJECT", "revoked", "-format"}},
		{[]string{"users", "list", "-h"}, []string{"users list", "-format"}},
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

// A person logs in through the real pages of the running binary and gets a
// refresh token; `authserver users disable` on the same storage stops the
// refresh (invalid_grant), turns the access token inactive at
// introspection and refuses the next login; enabling lets them log in
// again, but the old refresh token stays dead.
func disableEndToEnd(t *testing.T, storage string) {
	dir := t.TempDir()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	issuer := "http://" + addr
	cfgText := adminConfig(t, issuer, addr, adminAddr, storage, "ops-bot")
	cfgText = strings.Replace(cfgText, "    default: true\n", "    default: true\n    introspection_clients: [ci-bot]\n", 1)
	cfgPath := writeConfig(t, dir, cfgText)
	start(t, dir, issuer, testEnv, "--config", cfgPath)
	md := discover(t, issuer)

	code := authorizationCode(t, issuer, issuer, appRedirect, "alice", alicePW)
	status, tok, err := postToken(issuer, url.Values{"grant_type": {"authorization_code"}, "code": {code.Code}, "redirect_uri": {appRedirect},
		"client_id": {"demo-app"}, "code_verifier": {code.Verifier}, "resource": {"http://127.0.0.1:8080/mcp"}})
	if err != nil || status != 200 || tok["refresh_token"] == nil {
		t.Fatalf("code exchange: %d %v %v", status, tok, err)
	}
	refresh := func(rt string) (int, map[string]any) {
		t.Helper()
		status, body, err := postToken(issuer, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"demo-app"}})
		if err != nil {
			t.Fatal(err)
		}
		return status, body
	}
	status, fresh := refresh(tok["refresh_token"].(string))
	if status != 200 {
		t.Fatalf("refresh before disable: %d %v", status, fresh)
	}
	rt, at := fresh["refresh_token"].(string), fresh["access_token"].(string)
	if !introspectActive(t, md, at) {
		t.Fatal("fresh access token inactive at introspection")
	}

	// The login was recorded.
	out, errOut, err := runBin(t, dir, testEnv, "", "users", "show", "alice", "--config", cfgPath, "--format", "json")
	var u ops.User
	if err != nil || json.Unmarshal([]byte(out), &u) != nil || u.LastSeen == nil || u.FirstSeen == nil || !u.Active {
		t.Fatalf("users show alice after her login: %v\n%s%s", err, out, errOut)
	}

	out, errOut, err = runBin(t, dir, testEnv, "", "users", "disable", "alice", "--config", cfgPath)
	if err != nil || !strings.Contains(out, "disabled alice; revoked 1 grant(s)") {
		t.Fatalf("users disable alice: %v\n%s%s", err, out, errOut)
	}
	if status, body := refresh(rt); status != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("refresh after disable: %d %v", status, body)
	}
	if introspectActive(t, md, at) {
		t.Fatal("access token active at introspection after disable")
	}
	if got := login(t, issuer, "alice", alicePW); got != 401 {
		t.Fatalf("login of a disabled user: %d, want 401", got)
	}

	out, errOut, err = runBin(t, dir, testEnv, "", "users", "enable", "alice", "--config", cfgPath)
	if err != nil || !strings.Contains(out, "enabled alice") {
		t.Fatalf("users enable alice: %v\n%s%s", err, out, errOut)
	}
	if status, body := refresh(rt); status != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("the old refresh token after enable: %d %v", status, body)
	}
	if introspectActive(t, md, at) {
		t.Fatal("the old access token is active again after enable")
	}
	if got := login(t, issuer, "alice", alicePW); got != 200 {
		t.Fatalf("login after enable: %d, want 200", got)
	}

	// The admin API of the running server sees the same record.
	opsTok := tokenFor(t, md, "ops-bot", opsSecret, issuer+"/admin", "admin")
	status, _, body := adminReq(t, "GET", "http://"+adminAddr+"/admin/v1/users/alice", opsTok, nil)
	if status != 200 || body["subject"] != "alice" || body["disabled"] != false || body["last_seen"] == nil {
		t.Fatalf("admin GET users/alice: %d %v", status, body)
	}
}

func TestDisablingAUserStopsTheirRefreshOnSQLite(t *testing.T) {
	disableEndToEnd(t, "sqlite:"+filepath.Join(t.TempDir(), "e2e.db"))
}

func TestDisablingAUserStopsTheirRefreshOnPostgreSQL(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	disableEndToEnd(t, dsn)
}
