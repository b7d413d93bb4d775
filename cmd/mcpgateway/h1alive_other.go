//go:build !unix

package main

import (
	"errors"
	"net"
	"syscall"
)

// alive cannot peek here: a close is found when the connection is used.
func alive(net.Conn) bool { return true }

// isConnReset reports a connection reset or broken pipe.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
