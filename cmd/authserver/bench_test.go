package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
)

// BenchmarkServedClientCredentials issues client-credentials tokens through
// the handler serve listens with (memory storage), to price what the
// command adds around the AS: the access log line and the request metrics.
// "bare" is the AS's own handler; "metrics" adds the request metrics with
// the access log off; "access-log" is the default, both on. Those three
// log to a discarding logger; "logged" writes the access and audit lines
// (text) to io.Discard, as serve does to stderr, and "chained" does so with
// the audit lines chained (serve's logger).
func BenchmarkServedClientCredentials(b *testing.B) {
	for _, mode := range []string{"bare", "metrics", "access-log", "logged", "chained"} {
		b.Run(mode, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			text := stackConfig("http://127.0.0.1:1", "127.0.0.1:1", "memory")
			if mode == "metrics" {
				text += "  access: false\n"
			}
			text = strings.Replace(text, "level: debug", "level: info", 1)
			cfg, err := config.Parse([]byte(text), func(k string) (string, bool) {
				v, ok := map[string]string{"AUTHSERVER_SECRET": testSecret, "CI_BOT_SECRET": botSecret}[k]
				return v, ok
			})
			if err != nil {
				b.Fatal(err)
			}
			cfg.FromFile = true
			log := discardLogger()
			switch mode {
			case "logged":
				log = newLogger(cfg.Log, io.Discard)
			case "chained":
				key, ok, err := auditKey(cfg)
				if err != nil || !ok {
					b.Fatal(err, ok)
				}
				log = newChainedLogger(cfg.Log, io.Discard, key)
			}
			s, err := build(ctx, cfg, false, log, env{lookup: func(string) (string, bool) { return "", false }})
			if err != nil {
				b.Fatal(err)
			}
			defer s.store.Close()
			h := s.handler
			if mode == "bare" {
				h = s.current().as.Handler()
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
			one := func() {
				req, _ := http.NewRequest("POST", srv.URL+"/token", strings.NewReader("grant_type=client_credentials&scope=mcp:tools"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.SetBasicAuth("ci-bot", botSecret)
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
				}
			}
			one()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			work := make(chan struct{}, 64)
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						one()
					}
				}()
			}
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
		})
	}
}
