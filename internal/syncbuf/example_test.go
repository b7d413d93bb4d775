package syncbuf_test

import (
	"fmt"
	"sync"

	"github.com/mcpauth/mcpauth/internal/syncbuf"
)

func ExampleBuffer() {
	var out syncbuf.Buffer
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprint(&out, "x")
		}()
	}
	wg.Wait()
	fmt.Println(out.String())
	// Output: xxx
}
