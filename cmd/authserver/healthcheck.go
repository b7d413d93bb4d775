package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/internal/envvar"
)

// healthcheckTimeout bounds one probe; container health checks run it every
// few seconds.
const healthcheckTimeout = 5 * time.Second

// healthcheck is the probe container images run (a distroless image has no
// shell or curl): it GETs the readiness endpoint of a running server and
// succeeds on a 2xx answer. The URL is --url, or else
// http://LISTEN/BASE/readyz, falling back to /healthz when the server has no
// /readyz (404), where LISTEN is the configured listen address (a wildcard
// host such as 0.0.0.0 probed on loopback) and BASE the issuer's path. The
// listen address and issuer come from the configuration file when one is
// given (--config, AUTHSERVER_CONFIG), otherwise from AUTHSERVER_LISTEN and
// AUTHSERVER_ISSUER, otherwise the defaults.
func healthcheck(ctx context.Context, cmd *command, e env) error {
	targets, err := healthTargets(cmd, e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, u := range targets {
		status, err := probe(ctx, client, u)
		if err != nil {
			return fmt.Errorf("healthcheck: %w", err)
		}
		if status == http.StatusNotFound && i+1 < len(targets) {
			continue // no /readyz on this server: ask /healthz
		}
		if status < 200 || status > 299 {
			return fmt.Errorf("healthcheck: %s answered %d %s", u, status, http.StatusText(status))
		}
		fmt.Fprintf(e.stdout, "ok: %s answered %d\n", u, status)
		return nil
	}
	return errors.New("healthcheck: nothing to probe")
}

func probe(ctx context.Context, client *http.Client, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// healthTargets returns the URLs healthcheck asks, in order.
func healthTargets(cmd *command, e env) ([]string, error) {
	if cmd.url != "" {
		u, err := url.Parse(cmd.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("healthcheck --url: not an absolute http(s) URL: %q", cmd.url)
		}
		return []string{cmd.url}, nil
	}
	listen, issuer := config.DefaultListen, ""
	if cmd.configPath != "" {
		cfg, err := config.Load(cmd.configPath, e.lookup)
		if err != nil {
			return nil, err
		}
		listen, issuer = cfg.Listen, cfg.Issuer
	} else {
		for name, dst := range map[string]*string{"AUTHSERVER_LISTEN": &listen, "AUTHSERVER_ISSUER": &issuer} {
			v, ok, err := envvar.Get(e.lookup, name)
			if err != nil {
				return nil, fmt.Errorf("config: %w", err)
			}
			if ok && v != "" {
				*dst = v
			}
		}
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" || port == "0" {
		return nil, fmt.Errorf("healthcheck: cannot probe listen address %q (give --url)", listen)
	}
	switch ip := net.ParseIP(host); {
	case host == "":
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified() && ip.To4() != nil:
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	base := "http://" + net.JoinHostPort(host, port)
	if u, err := url.Parse(issuer); err == nil && issuer != "" {
		base += strings.TrimSuffix(u.Path, "/")
	}
	return []string{base + "/readyz", base + "/healthz"}, nil
}
