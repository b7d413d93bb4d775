package memory_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/storagetest"
)

func FuzzRoundTrip(f *testing.F) {
	for _, a := range storagetest.Awkward {
		f.Add(a, "b", []byte(a))
	}
	s := memory.New()
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, a, b string, raw []byte) {
		storagetest.CheckRoundTrip(t, s, fmt.Sprintf("%d:", n.Add(1)), a, b, raw)
	})
}
