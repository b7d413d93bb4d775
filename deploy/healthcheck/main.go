// Command healthcheck is the probe the container images use for their
// docker compose health checks: the final images are distroless and have no
// shell, curl or wget. It GETs one URL on the loopback interface and exits 0
// when the answer is 2xx, 1 otherwise.
//
//	healthcheck http://127.0.0.1:9000/.well-known/oauth-authorization-server
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: healthcheck URL")
		os.Exit(2)
	}
	if err := probe(os.Args[1], 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// probe GETs url and reports an error unless the status is 2xx.
func probe(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
