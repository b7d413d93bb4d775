package sqlite_test

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mcpauth/mcpauth/storage/storagetest"
)

func FuzzRoundTrip(f *testing.F) {
	for _, a := range storagetest.Awkward {
		f.Add(a, "b", []byte(a))
	}
	s := openMigrated(f, filepath.Join(f.TempDir(), "fuzz.db"))
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, a, b string, raw []byte) {
		storagetest.CheckRoundTrip(t, s, fmt.Sprintf("%d:", n.Add(1)), a, b, raw)
	})
}
