// Package freeport hands test harnesses loopback addresses for servers they
// start in another process (a built binary, node, PostgreSQL), which must be
// told their address before they bind it.
//
// Listening on 127.0.0.1:0 and closing the listener to learn a free port is
// racy: until the child binds the port, the kernel may give that same port
// to any other listener on :0 or to an outgoing connection's local end (both
// are drawn from the ephemeral range), and the child then fails with
// "address already in use" or, worse, a health check reaches another
// process. Reserve avoids both: it draws ports below the ephemeral range
// (net.ipv4.ip_local_port_range), where the kernel never picks them, and
// holds an advisory lock on a file named after the port, so that no other
// caller of Reserve on this machine, in any process, gets it before release.
// The lock is the operating system's and goes with the process, so a killed
// test leaves nothing stale behind.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// lowest is the lowest port Reserve hands out; below it sit the fixed ports
// of the development stack (9000, 8080, 8081, ...) and of common services.
const lowest = 20000

// ephemeralLow is the first port of the kernel's ephemeral range, 32768 when
// it cannot be read.
var ephemeralLow = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 32768
	}
	return n
})

// Reserve returns an address 127.0.0.1:PORT whose port was free when
// checked, lies outside the ephemeral range, and is handed to no other
// caller of Reserve on this machine until release is called (or this
// process exits). Call release once the server that was given the address
// has stopped for good; a server restarted on the same address keeps it.
func Reserve() (addr string, release func(), err error) {
	lo, hi := lowest, ephemeralLow()-1
	if hi-lo < 1000 {
		return "", nil, fmt.Errorf("freeport: the ephemeral range starts at %d, leaving no room below it", hi+1)
	}
	dir := filepath.Join(os.TempDir(), "mcpauth-freeport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", nil, fmt.Errorf("freeport: %w", err)
	}
	os.Chmod(dir, 0o777|os.ModeSticky) // shared by every user's harnesses; fails harmlessly when another user owns it
	for range 200 {
		port := lo + rand.IntN(hi-lo+1)
		f, err := lock(filepath.Join(dir, strconv.Itoa(port)))
		if err != nil {
			continue // held by another harness (or unusable): try another port
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			f.Close() // bound by something that does not use this package
			continue
		}
		ln.Close()
		var once sync.Once
		return addr, func() { once.Do(func() { f.Close() }) }, nil
	}
	return "", nil, errors.New("freeport: no free port found in 200 tries")
}

// lock opens path (read-only, so another user's file serves too) and takes
// an exclusive advisory lock on it without waiting.
func lock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Addr is Reserve for a test: it fails tb when no port is found and
// releases the port when tb and its cleanups have finished. Register it
// before the cleanup that stops the server (cleanups run last first), so the
// port is released after the server has stopped.
func Addr(tb testing.TB) string {
	tb.Helper()
	addr, release, err := Reserve()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(release)
	return addr
}
