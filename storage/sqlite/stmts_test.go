package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// openFiles counts this process's open file descriptors on path and its
// -wal and -shm files.
func openFiles(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, path) {
			n++
		}
	}
	return n
}

// Fails if a store closed while a transaction holds the writer leaves the
// writer's statements unfinalized, which keeps its connection and the
// database file open after the transaction ends.
func TestCloseDuringATransactionLeavesNoFileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authserver.db")
	s := openMigrated(t, path)
	ctx := context.Background()
	at := time.Now()
	tx, err := s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok := &storage.Token{Kind: storage.KindAccessToken, Signature: "sig", RequestID: "req", ClientID: "c",
		Active: true, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	if err := s.CreateToken(tx, tok); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(tx); err != nil {
		t.Fatalf("Commit of the transaction under way at Close: %v", err)
	}
	if n := openFiles(t, path); n != 0 {
		t.Fatalf("%d descriptors still open on the database after Close and the transaction's end", n)
	}
	s2 := openMigrated(t, path)
	if _, err := s2.GetToken(ctx, storage.KindAccessToken, "sig"); err != nil {
		t.Fatalf("the committed token: %v", err)
	}
}
