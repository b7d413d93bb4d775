package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
	"github.com/mcpauth/mcpauth/storage/open"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
	_ "github.com/mcpauth/mcpauth/storage/sqlite" // registers the "sqlite" database/sql driver
)

// TestUpstreamRefreshTokenIsSealedAtRestOnSQLite and ...OnPostgreSQL: the
// provider's refresh tokens, the first and the one rotated by a recheck,
// are kept only sealed: the bytes in the users table's upstream_refresh
// column hold none of them, and neither do the server's logs, the tokens
// the MCP client received, nor `authserver users show --format json`.
func TestUpstreamRefreshTokenIsSealedAtRestOnSQLite(t *testing.T) {
	db := filepath.Join(t.TempDir(), "as.db")
	upstreamRefreshSealed(t, "sqlite:"+db, func(ctx context.Context, subject string) []byte {
		t.Helper()
		conn, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var raw []byte
		if err := conn.QueryRowContext(ctx, `SELECT upstream_refresh FROM users WHERE subject = ?`, subject).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		return raw
	})
}

func TestUpstreamRefreshTokenIsSealedAtRestOnPostgreSQL(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	upstreamRefreshSealed(t, dsn, func(ctx context.Context, subject string) []byte {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var raw []byte
		if err := conn.QueryRow(ctx, `SELECT upstream_refresh FROM users WHERE subject = $1`, subject).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		return raw
	})
}

func upstreamRefreshSealed(t *testing.T, storage string, stored func(ctx context.Context, subject string) []byte) {
	logs := &lockedBuffer{}
	s, op := upstreamStackLogged(t, storage, "    recheck_after: 1m\n", logs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const sub = "corp:u-bob"
	session, tokens, _ := upstreamClient(t, ctx, s, "bob")
	if me := callTool[whoami](t, ctx, session, "whoami"); me.Subject != sub {
		t.Fatalf("whoami %+v", me)
	}
	issued := op.RefreshTokens()
	if len(issued) != 1 {
		t.Fatalf("the provider issued %d refresh tokens, want 1", len(issued))
	}
	first := stored(ctx, sub)
	if len(first) == 0 || bytes.Contains(first, []byte(issued[0])) {
		t.Fatalf("the record holds no sealed upstream refresh token, or holds it in clear (%d bytes)", len(first))
	}
	// Make the record's confirmation older than recheck_after through the
	// server's own storage, so that the next refresh rechecks at the
	// provider, which rotates its refresh token.
	ageRecord(t, ctx, s, sub)
	if _, _, err := tokens.refresh(); err != nil {
		t.Fatalf("refresh with a recheck: %v", err)
	}
	issued = op.RefreshTokens()
	if len(issued) < 2 {
		t.Fatalf("the recheck did not refresh at the provider: %d refresh tokens issued", len(issued))
	}
	second := stored(ctx, sub)
	if len(second) == 0 || bytes.Equal(first, second) {
		t.Fatal("the rotated upstream refresh token was not stored")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binaries(t), "authserver"), "users", "show", sub, "--format", "json", "--config", s.ConfigPath)
	cmd.Env = stackEnv(s)
	shown, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(shown), sub) {
		t.Fatalf("users show: %v\n%s", err, shown)
	}
	var client strings.Builder
	for _, tok := range tokens.all() {
		client.WriteString(tok.AccessToken + " " + tok.RefreshToken + " ")
		if id, ok := tok.Extra("id_token").(string); ok {
			client.WriteString(id)
		}
	}
	for _, rt := range issued {
		for where, b := range map[string][]byte{
			"the stored bytes (first)":     first,
			"the stored bytes (rotated)":   second,
			"the server's logs":            []byte(logs.String()),
			"the tokens the client holds":  []byte(client.String()),
			"`authserver users show` JSON": shown,
		} {
			if bytes.Contains(b, []byte(rt)) {
				t.Errorf("the provider's refresh token %.8s... is in %s", rt, where)
			}
		}
	}
	if strings.Contains(string(shown), "upstream_refresh") {
		t.Errorf("users show prints the sealed refresh token:\n%s", shown)
	}
}

// ageRecord moves the last confirmation of subject's record two hours
// back, through the storage the server uses (AUTHSERVER_STORAGE).
func ageRecord(t *testing.T, ctx context.Context, s *launch.Stack, subject string) {
	t.Helper()
	st, err := open.Open(ctx, s.Env["AUTHSERVER_STORAGE"])
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.GetUser(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateUpstreamSession(ctx, subject, rec.UpstreamRefresh, time.Now().Add(-2*time.Hour), rec.Groups, rec.Claims); err != nil {
		t.Fatal(err)
	}
}

// stackEnv is the environment the stack's processes run with, for the CLI.
func stackEnv(s *launch.Stack) []string {
	env := os.Environ()
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	return env
}
