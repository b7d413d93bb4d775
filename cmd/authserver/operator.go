package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/admin"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/auditsink"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/console"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/internal/accesslog"
	"github.com/mcpauth/mcpauth/internal/clientaddr"
	"github.com/mcpauth/mcpauth/internal/metrics"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// accessConfig is the access log and request metrics of a listener.
func (s *server) accessConfig(cfg *config.Config, classify func(string) metrics.Endpoint) accesslog.Config {
	c := accesslog.Config{Metrics: s.metrics, Classify: classify, ClientAddr: func(r *http.Request) string {
		if g := s.current(); g != nil && g.addrs != nil {
			return g.addrs.String(r)
		}
		return ""
	}}
	if cfg.Log.Access == nil || *cfg.Log.Access {
		c.Logger = s.log.With("component", "http")
	}
	return c
}

// refusals counts, in sink, the refusals among the answers of the token
// endpoint, the authorization endpoint and its consent and continue
// steps, and the registration endpoint (auditsink.Sink.Refused).
func refusals(cfg *config.Config, sink *auditsink.Sink) func(*http.Request, int, string) {
	base := ""
	if u, err := url.Parse(cfg.Issuer); err == nil {
		base = strings.TrimSuffix(u.Path, "/")
	}
	counted := map[string]bool{
		base + "/token": true, base + "/authorize": true, base + loginui.ConsentPath: true,
		base + loginui.ContinuePath: true, base + "/register": true,
	}
	return func(r *http.Request, status int, code string) {
		if counted[r.URL.Path] {
			sink.Refused(status, code)
		}
	}
}

// classifier names the endpoint of a main-listener path for the metrics.
func classifier(cfg *config.Config) func(string) metrics.Endpoint {
	base := ""
	if u, err := url.Parse(cfg.Issuer); err == nil {
		base = strings.TrimSuffix(u.Path, "/")
	}
	fixed := map[string]metrics.Endpoint{
		"/authorize": metrics.Authorize, "/token": metrics.Token, "/introspect": metrics.Introspect,
		"/revoke": metrics.Revoke, "/jwks.json": metrics.JWKS, "/register": metrics.Register,
		"/consents": metrics.Consents, "/logout": metrics.Logout, "/approvals": metrics.Approvals,
		"/healthz": metrics.Health, "/livez": metrics.Health, "/readyz": metrics.Health,
	}
	return func(p string) metrics.Endpoint {
		if strings.Contains(p, "/.well-known/") {
			return metrics.Metadata
		}
		rel, ok := strings.CutPrefix(p, base)
		if !ok {
			return metrics.Other
		}
		if e, ok := fixed[rel]; ok {
			return e
		}
		switch {
		case strings.HasPrefix(rel, "/register/"):
			return metrics.RegisterClient
		case strings.HasPrefix(rel, "/ui/"):
			return metrics.UI
		case strings.HasPrefix(rel, "/approve/"):
			return metrics.Approve
		case rel == "/statuslists" || strings.HasPrefix(rel, "/statuslists/"):
			return metrics.StatusList
		}
		return metrics.Other
	}
}

func adminClassifier(p string) metrics.Endpoint {
	if p == "/metrics" {
		return metrics.MetricsEndpoint
	}
	if strings.HasPrefix(p, admin.Prefix) || strings.HasPrefix(p, console.Prefix) {
		return metrics.Admin
	}
	return metrics.Other
}

// livez answers 200 while the process serves HTTP at all.
func livez(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 when the server can issue tokens: storage answers and
// a signing key is loaded; 503 naming what is missing otherwise, with the
// cause logged (a storage error's text stays out of the answer).
func (g *generation) readyz(log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g.ready(w, r, log)
	}
}

func (g *generation) ready(w http.ResponseWriter, r *http.Request, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := g.as.Ready(ctx); err != nil {
		log.Warn("readiness check failed", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		if errors.Is(err, as.ErrStorageNotReady) {
			fmt.Fprintln(w, "not ready: storage unavailable")
			return
		}
		fmt.Fprintln(w, "not ready:", err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// mountAdminPRM serves the admin resource's RFC 9728 metadata on the main
// listener, where its path-inserted URL points.
func mountAdminPRM(mux *http.ServeMux, cfg *config.Config) error {
	doc, err := rsmiddleware.NewProtectedResourceMetadata(cfg.AdminResource(), []string{cfg.Issuer}, []string{config.AdminScope})
	if err != nil {
		return err
	}
	return rsmiddleware.MountPRM(mux, doc, false)
}

// configuredClients are the clients of cfg as the operator sees them, with
// their defaults filled in.
func configuredClients(cfg *config.Config) []ops.Client {
	all := asClients(cfg)
	out := make([]ops.Client, 0, len(all))
	for _, c := range all {
		resources := orAll(c.Resources, allResources(cfg))
		scopes := c.Scopes
		if len(scopes) == 0 {
			for _, r := range asResources(cfg) {
				for _, res := range resources {
					if r.URI == res {
						scopes = append(scopes, r.Scopes...)
					}
				}
			}
		}
		method := "client_secret_basic"
		if c.Public {
			method = "none"
		}
		out = append(out, ops.Client{ID: c.ID, Name: c.Name, Source: "config", Public: c.Public, TokenEndpointAuthMethod: method,
			RedirectURIs: orAll(c.RedirectURIs, []string{}), GrantTypes: c.GrantTypes, Scopes: orAll(scopes, []string{}), Resources: resources})
	}
	return out
}

// localUsers are the local users of g as the operator sees them: those
// the login pages accept, or, before the pages are built, the configured
// ones.
func localUsers(g *generation) []ops.LocalUser {
	var out []ops.LocalUser
	if g.users != nil {
		for _, u := range g.users {
			out = append(out, ops.LocalUser{Username: u.Username, Disabled: u.Disabled})
		}
		return out
	}
	for _, u := range g.cfg.Users {
		out = append(out, ops.LocalUser{Username: u.Username, Disabled: u.Disabled})
	}
	return out
}

// newOps is the operator's view of one configuration on store.
func (s *server) newOps(g *generation) *ops.Ops {
	o := &ops.Ops{
		Store:        s.store,
		Configured:   configuredClients(g.cfg),
		Users:        localUsers(g),
		Upstreams:    upstreamIDs(g.cfg),
		Registrar:    g.dcr,
		Secret:       s.secret,
		SigningAlg:   g.cfg.Signing.Algorithm,
		KeyRetention: as.KeyRetention(g.cfg.Tokens.AccessTTL.D(), g.cfg.Signing.KeyReload.D()),
		Log:          s.log.With("component", "admin"),
		Connections:  g.conns,
	}
	if g.as != nil {
		o.Grants = g.as
	}
	return o
}

// inProcess serves the admin API's verifier its AS metadata and JWKS from
// the current generation's handler, without a network round trip (the
// issuer's public URL may not be reachable from inside).
type inProcess struct{ s *server }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := &bufferedResponse{header: http.Header{}}
	t.s.current().handler.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		StatusCode: rec.status, Status: http.StatusText(rec.status), Header: rec.header,
		Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())), ContentLength: int64(rec.body.Len()),
		Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(s int) {
	if b.status == 0 {
		b.status = s
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// adminHandler is the admin listener's: /metrics and the admin API.
func (s *server) adminHandler() (http.Handler, error) {
	log := s.log.With("component", "admin")
	verifier, err := rsmiddleware.NewVerifier(rsmiddleware.Config{
		Issuer:     s.cfg.Issuer,
		Resource:   s.cfg.AdminResource(),
		HTTPClient: &http.Client{Transport: inProcess{s}, Timeout: 10 * time.Second},
		Logger:     log,
	})
	if err != nil {
		return nil, err
	}
	prm, err := rsmiddleware.ResourceMetadataURL(s.cfg.AdminResource())
	if err != nil {
		return nil, err
	}
	guard, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier:            verifier,
		ResourceMetadataURL: prm,
		Scopes:              rsmiddleware.Scopes{Base: []string{config.AdminScope}},
		Logger:              log,
	})
	if err != nil {
		return nil, err
	}
	api, err := admin.New(admin.Config{
		Guard:         guard,
		Ops:           func() *ops.Ops { return s.current().ops },
		IsAdminClient: func(id string) bool { return s.current().cfg.IsAdminClient(id) },
		Logger:        log,
	})
	if err != nil {
		return nil, err
	}
	con, err := s.newConsole(&http.Client{Transport: inProcess{s}, Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(admin.Prefix, api)
	mux.Handle(console.Prefix, con)
	mux.Handle("/console", con)
	mux.Handle("GET /metrics", s.metrics.Handler())
	return accesslog.Wrap(mux, s.accessConfig(s.cfg, adminClassifier)), nil
}

// reload reads the configuration file again and, when it is valid, swaps in
// what it configures: clients, users, resources, registration, CIMD and
// exchange policy, token lifetimes, admin.clients. Keys that need a restart
// (issuer, listen, storage, secret, signing, admin.listen, admin.console_url,
// admin.console_session_ttl, log, gc,
// admin.audit_retention, migrate_on_start) keep their running values, with
// a warning. A bad file is refused with its field path and the running
// configuration stays.
func (s *server) reload(ctx context.Context, path string, e env) error {
	if path == "" {
		return fmt.Errorf("no configuration file to reload (running on development defaults)")
	}
	cfg, err := config.Load(path, e.lookup)
	if err != nil {
		return err
	}
	old := s.cfg
	for _, f := range []struct {
		key     string
		changed bool
		keep    func()
	}{
		{"issuer", cfg.Issuer != old.Issuer, func() { cfg.Issuer = old.Issuer }},
		{"listen", cfg.Listen != old.Listen, func() { cfg.Listen = old.Listen }},
		{"storage", cfg.Storage != old.Storage, func() { cfg.Storage = old.Storage }},
		{"secret", cfg.Secret != old.Secret, func() { cfg.Secret = old.Secret }},
		{"signing", cfg.Signing != old.Signing, func() { cfg.Signing = old.Signing }},
		{"admin.listen", cfg.Admin.Listen != old.Admin.Listen, func() { cfg.Admin.Listen = old.Admin.Listen }},
		{"admin.console_url", cfg.Admin.ConsoleURL != old.Admin.ConsoleURL, func() { cfg.Admin.ConsoleURL = old.Admin.ConsoleURL }},
		{"admin.console_session_ttl", cfg.Admin.ConsoleSessionTTL != old.Admin.ConsoleSessionTTL, func() { cfg.Admin.ConsoleSessionTTL = old.Admin.ConsoleSessionTTL }},
		{"log", cfg.Log.Level != old.Log.Level || cfg.Log.Format != old.Log.Format || *cfg.Log.Access != *old.Log.Access, func() { cfg.Log = old.Log }},
		{"gc", cfg.GC != old.GC, func() { cfg.GC = old.GC }},
		{"admin.audit_retention", cfg.KeptAuditFor() != old.KeptAuditFor(), func() { cfg.Admin.AuditRetention = old.Admin.AuditRetention }},
	} {
		if f.changed {
			s.log.Warn("reload: this key needs a restart; keeping the running value", "key", f.key)
			f.keep()
		}
	}
	if cfg.Admin.Listen != "" {
		if err := cfg.Validate(); err != nil { // admin.clients against the kept admin.listen
			return err
		}
	}
	g, err := s.wire(ctx, cfg, e)
	if err != nil {
		return err
	}
	g.ops = s.newOps(g)
	prev := s.gen.Swap(g)
	prev.stop()
	return nil
}

// operate runs the `keys`, `clients`, `grants`, `users` and `approvals`
// subcommands on the configured storage.
func operate(ctx context.Context, cfg *config.Config, cmd *command, log *slog.Logger, e env) error {
	key, _, err := serverSecret(cfg)
	if err != nil {
		return err
	}
	if kind, _ := cfg.StorageKind(); kind == "memory" {
		return fmt.Errorf("%s %s: storage is memory, which lives inside one serve process; use the admin API instead", cmd.name, cmd.verb)
	}
	out := printer{w: e.stdout, json: cmd.format == "json"}
	const who = "cli"
	if cmd.name == "grants" {
		return operateGrants(ctx, cfg, cmd, log, e, out)
	}
	if cmd.name == "users" {
		return operateUsers(ctx, cfg, cmd, log, e, out)
	}
	if cmd.name == "connections" {
		return operateConnections(ctx, cfg, cmd, log, e, out)
	}
	st, err := openStore(ctx, cfg, cfg.MigrateEnabled(), slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer st.Close()
	addrs, err := clientaddr.New(cfg.Proxies())
	if err != nil {
		return err
	}
	reg, err := newRegistrar(cfg, st, key, slog.New(slog.DiscardHandler), addrs)
	if err != nil {
		return err
	}
	// The audit records of the changes are printed and kept in storage.
	sink := auditsink.New(auditsink.Config{KeepEvents: cfg.KeptAuditFor() > 0, Log: log})
	sink.Start(st, st)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sinkCloseTimeout)
		defer cancel()
		sink.Close(cctx)
	}()
	s := &server{cfg: cfg, store: st, secret: key, log: slog.New(sink.Handler(log.Handler()))}
	o := s.newOps(&generation{cfg: cfg, dcr: reg})
	switch cmd.name + " " + cmd.verb {
	case "clients list":
		cs, err := o.ListClients(ctx)
		if err != nil {
			return err
		}
		return out.clients(cs)
	case "clients show":
		c, err := o.GetClient(ctx, cmd.args[0])
		if err != nil {
			return err
		}
		return out.client(c, "")
	case "clients create":
		if cmd.clientName == "" || len(cmd.redirectURIs) == 0 {
			return &subcommandError{"clients create needs --name and at least one --redirect-uri", usageOf("clients create", specs["clients create"])}
		}
		c, err := o.CreateClient(ctx, who, ops.NewClient{Name: cmd.clientName, RedirectURIs: cmd.redirectURIs, Public: cmd.public})
		if err != nil {
			return err
		}
		return out.client(&c.Client, c.Secret)
	case "clients delete":
		if err := o.DeleteClient(ctx, who, cmd.args[0]); err != nil {
			return err
		}
		if out.json {
			return out.encode(map[string]string{"deleted": cmd.args[0]})
		}
		fmt.Fprintf(e.stdout, "deleted client %s\n", cmd.args[0])
		return nil
	case "approvals list":
		list, err := o.AllApprovals(ctx, cmd.user)
		if err != nil {
			return err
		}
		return out.approvals(list)
	case "approvals revoke":
		if err := o.RevokeApproval(ctx, who, cmd.args[0]); err != nil {
			return err
		}
		if out.json {
			return out.encode(map[string]string{"revoked": cmd.args[0]})
		}
		fmt.Fprintf(e.stdout, "revoked approval %s\n", cmd.args[0])
		return nil
	case "audit list":
		if cmd.limit < 1 || cmd.limit > ops.MaxAuditPage {
			return &subcommandError{fmt.Sprintf("--limit must be from 1 to %d", ops.MaxAuditPage), usageOf("audit list", specs["audit list"])}
		}
		if cmd.before < 0 {
			return &subcommandError{"--before must be the id of an event", usageOf("audit list", specs["audit list"])}
		}
		page, err := o.ListAudit(ctx, ops.AuditQuery{User: cmd.user, Client: cmd.client, Event: cmd.event, Before: cmd.before, Limit: cmd.limit})
		if err != nil {
			return err
		}
		return out.audit(page)
	case "keys list":
		ks, err := o.ListKeys(ctx)
		if err != nil {
			return err
		}
		return out.keys(ks)
	case "keys retire":
		signing, err := o.RetireKey(ctx, who, cmd.args[0])
		if err != nil {
			return err
		}
		if out.json {
			return out.encode(map[string]string{"retired_kid": cmd.args[0], "signing_kid": signing})
		}
		fmt.Fprintf(e.stdout, "retired %s; %s signs; running servers switch at their next key reload\n", cmd.args[0], signing)
		return nil
	case "keys prune":
		deleted, err := o.PruneKeys(ctx, who, cmd.unloadable)
		if err != nil {
			return err
		}
		if out.json {
			return out.encode(map[string]any{"deleted": deleted})
		}
		fmt.Fprintf(e.stdout, "deleted %d key(s)\n", len(deleted))
		for _, k := range deleted {
			fmt.Fprintln(e.stdout, " ", k)
		}
		return nil
	}
	return usagef("unknown command %s %s", cmd.name, cmd.verb)
}

// operateGrants runs `grants list|revoke`: they need the authorization
// server itself (which users exist, the status list), so it is built on
// the configured storage as serve builds it, without listening.
func operateGrants(ctx context.Context, cfg *config.Config, cmd *command, log *slog.Logger, e env, out printer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	s, err := build(ctx, cfg, cfg.MigrateEnabled(), quiet, e)
	if err != nil {
		return err
	}
	defer s.close()
	o := s.current().ops
	o.Log = slog.New(s.sink.Handler(log.Handler())) // printed, and kept in storage
	if cmd.verb == "list" {
		gs, err := o.ListGrants(ctx, cmd.user, cmd.client)
		if err != nil {
			return err
		}
		return out.grants(gs)
	}
	if cmd.user == "" && cmd.client == "" && cmd.grant == "" {
		return &subcommandError{"grants revoke needs --user, --client or --grant", usageOf("grants revoke", specs["grants revoke"])}
	}
	gs, err := o.RevokeGrants(ctx, "cli", as.GrantFilter{User: cmd.user, Client: cmd.client, GrantID: cmd.grant})
	if err != nil {
		return err
	}
	if out.json {
		return out.encode(map[string]any{"revoked": gs})
	}
	fmt.Fprintf(e.stdout, "revoked %d grant(s)\n", len(gs))
	return out.grants(gs)
}

// operateUsers runs `users list|show|disable|enable`. Disabling revokes
// grants, which needs the authorization server, so it is built on the
// configured storage as for `grants`.
func operateUsers(ctx context.Context, cfg *config.Config, cmd *command, log *slog.Logger, e env, out printer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := build(ctx, cfg, cfg.MigrateEnabled(), slog.New(slog.DiscardHandler), e)
	if err != nil {
		return err
	}
	defer s.close()
	o := s.current().ops
	o.Log = slog.New(s.sink.Handler(log.Handler())) // printed, and kept in storage
	switch cmd.verb {
	case "list":
		us, err := o.AllUsers(ctx)
		if err != nil {
			return err
		}
		return out.users(us)
	case "show":
		u, err := o.GetUser(ctx, cmd.args[0])
		if err != nil {
			return err
		}
		return out.user(u)
	case "disable":
		c, err := o.DisableUser(ctx, "cli", cmd.args[0])
		if err != nil {
			return err
		}
		if out.json {
			return out.encode(c)
		}
		fmt.Fprintf(e.stdout, "disabled %s; revoked %d grant(s), ended %d session(s)\n", c.User.Subject, len(c.RevokedGrants), c.EndedSessions)
		return nil
	case "enable":
		u, err := o.EnableUser(ctx, "cli", cmd.args[0])
		if err != nil {
			return err
		}
		if out.json {
			return out.encode(u)
		}
		fmt.Fprintf(e.stdout, "enabled %s\n", u.Subject)
		return nil
	}
	return usagef("unknown command %s %s", cmd.name, cmd.verb)
}

// operateConnections runs `connections list|revoke` on the configured
// storage, with the configured connections (to revoke at their providers).
func operateConnections(ctx context.Context, cfg *config.Config, cmd *command, log *slog.Logger, e env, out printer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := build(ctx, cfg, cfg.MigrateEnabled(), slog.New(slog.DiscardHandler), e)
	if err != nil {
		return err
	}
	defer s.store.Close()
	o := s.current().ops
	o.Log = log
	if cmd.verb == "list" {
		cs, err := o.ListConnections(ctx, cmd.user)
		if err != nil {
			return err
		}
		return out.connections(cs)
	}
	if cmd.user == "" {
		return &subcommandError{"connections revoke needs --user", usageOf("connections revoke", specs["connections revoke"])}
	}
	cs, err := o.RevokeConnections(ctx, "cli", cmd.user, cmd.connection)
	if err != nil {
		return err
	}
	if out.json {
		return out.encode(map[string]any{"revoked": cs})
	}
	fmt.Fprintf(e.stdout, "revoked %d connection(s)\n", len(cs))
	return out.connections(cs)
}

func (p printer) connections(cs []ops.Connection) error {
	if p.json {
		if cs == nil {
			cs = []ops.Connection{}
		}
		return p.encode(cs)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBJECT\tCONNECTION\tSCOPES\tEXPIRES\tNEEDS_RECONNECT\tCONFIGURED\tCONNECTED")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%t\t%s\n", printable(c.Subject), printable(c.Connection), printable(dash(strings.Join(c.Scopes, " "))),
			stamp(c.ExpiresAt), c.NeedsReconnect, c.Configured, stamp(c.CreatedAt))
	}
	return tw.Flush()
}

func (p printer) users(us []ops.User) error {
	if p.json {
		if us == nil {
			us = []ops.User{}
		}
		return p.encode(us)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBJECT\tSOURCE\tNAME\tEMAIL\tDISABLED\tACTIVE\tLAST_SEEN")
	for _, u := range us {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%s\n", printable(u.Subject), printable(userSource(u)), printable(dash(u.Name)), printable(dash(u.Email)), dash(u.DisabledBy), u.Active, stamp(u.LastSeen))
	}
	return tw.Flush()
}

// userSource is "local" or "upstream:ID".
func userSource(u ops.User) string {
	if u.Upstream != "" {
		return u.Source + ":" + u.Upstream
	}
	return u.Source
}

func (p printer) user(u *ops.User) error {
	if p.json {
		return p.encode(u)
	}
	var claims []string
	for _, k := range slices.Sorted(maps.Keys(u.Claims)) {
		claims = append(claims, k+"="+strings.Join(u.Claims[k], ","))
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	for _, r := range [][2]string{
		{"subject", u.Subject}, {"source", u.Source}, {"upstream", dash(u.Upstream)}, {"upstream_subject", dash(u.UpstreamSubject)},
		{"name", dash(u.Name)}, {"email", dash(u.Email)}, {"groups", dash(strings.Join(u.Groups, " "))},
		{"claims", dash(strings.Join(claims, " "))}, {"configured", fmt.Sprint(u.Configured)},
		{"disabled", fmt.Sprint(u.Disabled)}, {"disabled_by", dash(u.DisabledBy)}, {"active", fmt.Sprint(u.Active)},
		{"first_seen", stamp(u.FirstSeen)}, {"last_seen", stamp(u.LastSeen)}, {"checked_at", stamp(u.CheckedAt)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], printable(r[1]))
	}
	return tw.Flush()
}

// printable replaces control characters (a terminal escape in a name an
// upstream sent, a tab that would break the table) with U+FFFD.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

func (p printer) audit(page ops.AuditPage) error {
	if p.json {
		return p.encode(page)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tEVENT\tSUB\tCLIENT_ID\tADMIN\tDETAIL")
	for _, e := range page.Events {
		t := e.Time
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, stamp(&t), printable(e.Event), printable(dash(e.Subject)),
			printable(dash(e.ClientID)), printable(dash(e.AdminSubject)), printable(dash(string(e.Detail))))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextBefore != 0 {
		fmt.Fprintf(p.w, "more: --before %d\n", page.NextBefore)
	}
	return nil
}

func (p printer) grants(gs []as.Grant) error {
	if p.json {
		return p.encode(gs)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GRANT_ID\tUSER\tCLIENT_ID\tCREATED\tLAST_USED\tEXPIRES\tORPHANED")
	for _, g := range gs {
		orphaned := "-"
		if g.Orphaned {
			orphaned = g.OrphanedBecause
		}
		c, l, x := g.CreatedAt, g.LastUsedAt, g.ExpiresAt
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, dash(g.User), g.Client, stamp(&c), stampZero(&l), stamp(&x), orphaned)
	}
	return tw.Flush()
}

func stampZero(t *time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return stamp(t)
}

// printer writes records as JSON or as an aligned table.
type printer struct {
	w    io.Writer
	json bool
}

func (p printer) encode(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (p printer) clients(cs []ops.Client) error {
	if p.json {
		return p.encode(cs)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT_ID\tSOURCE\tNAME\tPUBLIC\tGRANT_TYPES\tLAST_USED")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\n", c.ID, c.Source, dash(c.Name), c.Public, strings.Join(c.GrantTypes, ","), stamp(c.LastUsedAt))
	}
	return tw.Flush()
}

func (p printer) client(c *ops.Client, secret string) error {
	if p.json {
		if secret != "" {
			return p.encode(ops.CreatedClient{Client: *c, Secret: secret})
		}
		return p.encode(c)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	rows := [][2]string{
		{"client_id", c.ID}, {"client_name", dash(c.Name)}, {"source", c.Source}, {"public", fmt.Sprint(c.Public)},
		{"token_endpoint_auth_method", dash(c.TokenEndpointAuthMethod)},
		{"redirect_uris", dash(strings.Join(c.RedirectURIs, " "))}, {"grant_types", dash(strings.Join(c.GrantTypes, " "))},
		{"scopes", dash(strings.Join(c.Scopes, " "))}, {"resources", dash(strings.Join(c.Resources, " "))},
		{"created_at", stamp(c.CreatedAt)}, {"last_used_at", stamp(c.LastUsedAt)},
	}
	if secret != "" {
		rows = append(rows, [2]string{"client_secret", secret + "   (shown once; store it now)"})
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

func (p printer) keys(ks []as.KeyInfo) error {
	if p.json {
		return p.encode(ks)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tALG\tCREATED\tRETIRED\tSIGNING\tLOADABLE")
	for _, k := range ks {
		created := k.CreatedAt
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%t\n", k.ID, k.Algorithm, stamp(&created), stamp(k.RetiredAt), k.Signing, k.Loadable)
	}
	return tw.Flush()
}

func (p printer) approvals(list []ops.Approval) error {
	if p.json {
		return p.encode(list)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APPROVAL_ID\tSUBJECT\tCLIENT_ID\tRESOURCE\tTOOL\tSTATUS\tEXPIRES")
	for _, a := range list {
		status := a.Status
		if a.Expired && (status == "pending" || status == "approved") {
			status += " (expired)"
		}
		exp := a.ExpiresAt
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, printable(a.Subject), printable(a.ClientID), printable(a.Resource),
			printable(a.Tool), status, stamp(&exp))
	}
	return tw.Flush()
}
