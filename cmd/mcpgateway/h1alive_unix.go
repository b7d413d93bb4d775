//go:build unix

package main

import (
	"errors"
	"net"
	"syscall"
)

// alive reports whether the idle connection c is still open and quiet: a
// peek that does not wait sees no close (FIN) or reset, and no bytes the
// upstream had no request to send for.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = n <= 0 && (rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK)
		return true // never wait for the poller
	})
	return err == nil && ok
}

// isConnReset reports a connection reset or broken pipe.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
