package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
)

// The embedded database runs in WAL mode (durability across crashes, readers
// beside the writer). The SQLite file header says so on disk: bytes 18 and 19 (file format write and read versions) are
// 2 for WAL and 1 for the rollback journal (sqlite.org/fileformat.html §1.3).
func TestDatabaseFileIsInWALMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authserver.db")
	s := openMigrated(t, path)
	if err := s.CreateClient(context.Background(), &storage.Client{ID: "c", Source: "dcr"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 20)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	if string(hdr[:16]) != "SQLite format 3\x00" {
		t.Fatalf("not an SQLite file: %q", hdr[:16])
	}
	if hdr[18] != 2 || hdr[19] != 2 {
		t.Errorf("file format versions %d/%d, want 2/2 (WAL)", hdr[18], hdr[19])
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no write-ahead log next to the database: %v", err)
	}
}
