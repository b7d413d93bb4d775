package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestReserveHandsOutHeldPortsBelowTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr := Addr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		host, p, err := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if err != nil || host != "127.0.0.1" || port < lowest || port >= ephemeralLow() {
			t.Fatalf("%s: not a loopback port in [%d, %d)", addr, lowest, ephemeralLow())
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the reserved %s cannot be bound: %v", addr, err)
		}
		ln.Close()
	}
}

func TestAReservedPortIsLockedUntilReleased(t *testing.T) {
	addr, release, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(addr)
	path := filepath.Join(os.TempDir(), "mcpauth-freeport", p)
	// Another open file description, as another process would have: the
	// lock is refused while the reservation is held.
	if f, err := lock(path); err == nil {
		f.Close()
		t.Fatalf("%s could be locked while reserved", addr)
	}
	release()
	release() // a second release is harmless
	f, err := lock(path)
	if err != nil {
		t.Fatalf("%s still locked after release: %v", addr, err)
	}
	f.Close()
}
