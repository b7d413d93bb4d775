package freeport_test

import (
	"fmt"
	"net"

	"github.com/mcpauth/mcpauth/internal/freeport"
)

// A harness reserves an address, passes it to the server it starts (a flag,
// a configuration file) and releases it once the server has stopped.
func ExampleReserve() {
	addr, release, err := freeport.Reserve()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release()
	host, _, _ := net.SplitHostPort(addr)
	fmt.Println(host)
	// Output: 127.0.0.1
}
