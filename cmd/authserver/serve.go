package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/auditsink"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/internal/accesslog"
	"github.com/mcpauth/mcpauth/internal/clientaddr"
	"github.com/mcpauth/mcpauth/internal/envvar"
	"github.com/mcpauth/mcpauth/internal/metrics"
	"github.com/mcpauth/mcpauth/internal/otelsetup"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/internal/safehttp"
	"github.com/mcpauth/mcpauth/internal/secret"
	"github.com/mcpauth/mcpauth/internal/tracing"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/tracedstore"
	"github.com/mcpauth/mcpauth/upstream"
	"go.opentelemetry.io/otel/trace"
)

// HTTP server limits. Requests to an AS are small; slow clients must not hold
// connections open (Slowloris).
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
	shutdownTimeout   = 15 * time.Second
)

// server is everything serve and the maintenance commands build from a
// configuration. What SIGHUP reloads (clients, users, resources, policy)
// lives in a generation, swapped atomically; the rest is fixed at start.
type server struct {
	// loginHint is the development-mode message telling the person how to
	// log in; serve prints it once the server listens.
	loginHint string
	cfg       *config.Config // as started; a reload keeps its fixed keys
	store     storage.Store
	secret    []byte
	metrics   *metrics.Metrics
	tp        trace.TracerProvider // nil or no-op: tracing is off
	gen       atomic.Pointer[generation]
	handler   http.Handler // the main listener's: access log, metrics, then the current generation
	log       *slog.Logger
	// sink copies the audit records and hourly counts to store.
	sink *auditsink.Sink
}

// sinkCloseTimeout bounds the last write of the audit records and counts
// at shutdown.
const sinkCloseTimeout = 10 * time.Second

// close writes what the sink holds, then closes the store.
func (s *server) close() {
	if s.sink != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sinkCloseTimeout)
		if err := s.sink.Close(ctx); err != nil {
			s.log.Warn("audit events and counts not all written to storage at shutdown", "err", err)
		}
		cancel()
	}
	s.store.Close()
}

// generation is what one configuration builds: the AS, the login pages,
// registration and their routes.
type generation struct {
	cfg     *config.Config
	as      *as.Server
	dcr     *dcr.Handler // nil-safe for Reap: built even when registration is off
	handler http.Handler
	ops     *ops.Ops
	// addrs finds a request's client address behind trusted_proxies.
	addrs *clientaddr.Resolver
	// users are the local users the login pages accept (the configured
	// ones; in development mode the generated admin).
	users []loginui.User
	// conns are the people's connected accounts (connections[]); with no
	// connection configured, a vault of none, which still lists and
	// revokes stored records.
	conns *connections.Vault
	// people decides who is active, what their claims cap and who holds
	// a reserved scope (the console's admin).
	people *policy.People
	stop   context.CancelFunc // ends this generation's key reload loop
}

func (s *server) current() *generation { return s.gen.Load() }

// build wires storage, the AS, the login pages and registration into one
// handler.
func build(ctx context.Context, cfg *config.Config, migrate bool, log *slog.Logger, e env) (*server, error) {
	key, source, err := serverSecret(cfg)
	if err != nil {
		return nil, err
	}
	m := metrics.New()
	// The audit records also go to storage, with the hourly counts, for
	// the console (auditsink); the records before the store opens wait.
	sink := auditsink.New(auditsink.Config{KeepEvents: cfg.KeptAuditFor() > 0, Dropped: m.AuditDropped, Log: log})
	log = slog.New(sink.Handler(m.AuditHandler(log.Handler())))
	log.Info("server secret", "source", source)
	st, err := openStore(ctx, cfg, migrate, log)
	if err != nil {
		return nil, err
	}
	// With tracing on, a span per storage call made under a request's
	// span; with it off the store itself, at no cost.
	st = tracedstore.New(st, e.tp, dbSystem(cfg))
	sink.Start(st, st)
	s := &server{cfg: cfg, store: st, secret: key, log: log, metrics: m, tp: e.tp, sink: sink}
	g, err := s.wire(ctx, cfg, e)
	if err != nil {
		s.close()
		return nil, err
	}
	g.ops = s.newOps(g)
	s.gen.Store(g)
	access := s.accessConfig(cfg, classifier(cfg))
	access.Observe = refusals(cfg, sink)
	s.handler = accesslog.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.current().handler.ServeHTTP(w, r)
	}), access)
	return s, nil
}

// wire builds a generation from cfg. Its key reload loop runs until ctx
// ends or the generation is replaced.
func (s *server) wire(ctx context.Context, cfg *config.Config, e env) (g *generation, err error) {
	ctx, stop := context.WithCancel(ctx)
	g = &generation{cfg: cfg, stop: stop}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	issuer, err := url.Parse(cfg.Issuer)
	if err != nil {
		return nil, err
	}
	basePath := strings.TrimSuffix(issuer.Path, "/")

	users, err := s.users(cfg, e)
	if err != nil {
		return nil, err
	}
	g.users = users
	// One view of the client address for every component.
	g.addrs, err = clientaddr.New(cfg.Proxies())
	if err != nil {
		return nil, fmt.Errorf("config: trusted_proxies: %w", err)
	}
	upstreams, recheck, err := s.upstreamProviders(cfg)
	if err != nil {
		return nil, err
	}
	// Built before the pages and the server and given to both: who is
	// active and what their claims cap (one policy.People), and the
	// revoker of grants the /consents page and the admin surfaces use.
	people := newPeople(users, upstreams, s.store, reservedScopes(cfg))
	g.people = people
	revoker := as.NewGrantRevoker(s.store, s.log.With("component", "as"))
	g.conns, err = s.connectionVault(cfg)
	if err != nil {
		return nil, err
	}
	var pageConns *connections.Vault
	if len(cfg.Connections) > 0 {
		pageConns = g.conns
	}
	ui, err := loginui.New(loginui.Config{
		Connections:   pageConns,
		Users:         users,
		Upstreams:     upstreams,
		UpstreamUsers: s.store,
		People:        people,
		Revoker:       revoker,
		Consents:      s.store,
		JTIs:          s.store,
		// The approval pages of held tool calls, and their list on /consents.
		Approvals: s.store,
		Secret:    s.secret,
		Secure:    issuer.Scheme == "https",
		BasePath:  basePath,
		Logger:    s.log.With("component", "loginui"),

		ClientAddr: g.addrs.Key,
		ClientIP:   g.addrs.String,
		// The throttle counts in the configured storage, so instances
		// sharing a database share it.
		Counters: s.store,
		// Sessions are stored, so logging out ends them on every instance.
		Sessions: s.store,
		// Logins are recorded (first and last seen) and refused for a
		// person an operator disabled.
		Records:        s.store,
		SessionTTL:     cfg.Sessions.AbsoluteTTL.D(),
		SessionIdleTTL: cfg.Sessions.IdleTTL.D(),
	})
	if err != nil {
		return nil, fmt.Errorf("login pages: %w", err)
	}

	fetch := fetchConfig(cfg.CIMD)
	fetch.RootCAs = e.rootCAs
	jwksClient, err := safehttp.NewClient(fetch)
	if err != nil {
		return nil, fmt.Errorf("config: cimd.allow_hosts: %w", err)
	}
	jwksClient.Transport = tracing.FetchTransport(s.tp, jwksClient.Transport, "jwks fetch")

	reg := cfg.Registration
	regEndpoint := cfg.Issuer + "/register"
	// What a registered or CIMD client may be granted.
	regScopes := orAll(reg.Scopes, allScopes(cfg))
	regResources := cfg.RegistrationResources()
	g.dcr, err = newRegistrar(cfg, s.store, s.secret, s.log, g.addrs)
	if err != nil {
		return nil, err
	}

	var resolver as.ClientResolver
	if cfg.CIMDEnabled() {
		m := cfg.CIMD
		fetch.Timeout = m.Timeout.D()
		cimdClient, err := safehttp.NewClient(fetch)
		if err != nil {
			return nil, fmt.Errorf("config: cimd.allow_hosts: %w", err)
		}
		cimdClient.Transport = tracing.FetchTransport(s.tp, cimdClient.Transport, "cimd fetch")
		r, err := dcr.NewCIMDResolver(dcr.CIMDConfig{
			HTTPClient:        cimdClient,
			MinCacheTTL:       m.CacheMin.D(),
			MaxCacheTTL:       m.CacheMax.D(),
			DomainAllow:       m.AllowedDomains,
			DomainDeny:        m.DeniedDomains,
			RedirectHostAllow: reg.AllowedRedirectHosts,
			RedirectHostDeny:  reg.DeniedRedirectHosts,
			Scopes:            regScopes,
			Resources:         regResources,
			Store:             s.store,
			Metrics:           s.metrics,
			Logger:            s.log.With("component", "cimd"),
		})
		if err != nil {
			return nil, fmt.Errorf("cimd: %w", err)
		}
		resolver = r
	}

	acfg := as.Config{
		Issuer:            cfg.Issuer,
		Resources:         asResources(cfg),
		Clients:           append(asClients(cfg), consoleClient(cfg, s.secret)...),
		Attributes:        newAttributes(cfg, s.store),
		UI:                ui,
		People:            people,
		Revoker:           revoker,
		Store:             s.store,
		Secret:            s.secret,
		AccessTokenTTL:    cfg.Tokens.AccessTTL.D(),
		RefreshTokenTTL:   cfg.Tokens.RefreshTTL.D(),
		CodeTTL:           cfg.Tokens.CodeTTL.D(),
		RefreshGrace:      offIfZero(cfg.Tokens.RefreshGrace),
		SigningAlg:        cfg.Signing.Algorithm,
		KeyReloadInterval: cfg.Signing.KeyReload.D(),
		ClientResolver:    resolver,
		JWKSHTTPClient:    jwksClient,
		ExchangePolicy:    asExchange(cfg),
		// Legacy clients that name the token endpoint as a client
		// assertion's audience (RFC 7523 before rfc7523bis).
		AssertionAudienceTokenEndpoint: cfg.ClientAssertions.AcceptTokenEndpointAudience,
		DPoP:                           as.DPoPConfig{Nonce: cfg.DPoP.Nonce, RequiredFor: cfg.DPoP.RequiredFor},
		// Trusted issuers of jwt-bearer assertions; their jwks_uri and
		// discovery documents are fetched through the SSRF-safe client.
		EnterpriseIdPs:       asIdPs(cfg),
		WorkloadIssuers:      asWorkloads(cfg),
		FederationHTTPClient: jwksClient,
		// The registration policy is the ceiling of registered and CIMD
		// clients; the scope a client registered with is its default.
		RegistrationScopes:    regScopes,
		RegistrationResources: regResources,
		// People recorded as signed in through an upstream keep their
		// grants while it is configured.
		UpstreamIDs: upstreamIDs(cfg),
		Recheck:     recheck,
		Logger:      s.log.With("component", "as"),
	}
	if cfg.RegistrationEnabled() {
		acfg.RegistrationEndpoint = regEndpoint
	}
	if len(cfg.Connections) > 0 {
		acfg.Connections = g.conns
	}
	g.as, err = as.New(ctx, acfg)
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("/", g.as.Handler())
	if cfg.RegistrationEnabled() {
		g.dcr.Mount(mux)
	}
	mux.HandleFunc(basePath+"/healthz", s.healthz)
	mux.HandleFunc(basePath+"/livez", livez)
	mux.HandleFunc(basePath+"/readyz", g.readyz(s.log))
	if cfg.AdminEnabled() {
		if err := mountAdminPRM(mux, cfg); err != nil {
			return nil, err
		}
	}
	g.handler = mux
	return g, nil
}

// newPeople are the configured local users and upstream providers (with
// their claim mappings) over the people's records in store.
func newPeople(users []loginui.User, upstreams []loginui.Upstream, store storage.Store, reserved []policy.Reserved) *policy.People {
	local := policy.LocalUsers{}
	for _, u := range users {
		local[u.Username] = u.Disabled
	}
	ups := make([]policy.Upstream, 0, len(upstreams))
	for _, u := range upstreams {
		ups = append(ups, policy.Upstream{ID: u.Provider.ID(), Claims: u.Provider})
	}
	return policy.NewPeople(policy.PeopleConfig{Local: local, Upstreams: ups, Records: store, Reserved: reserved})
}

// reservedScopes reserves the admin resource's admin scope, in a
// person's grant, to admin.people and admin.groups (nobody when both are
// empty), whatever client asks: the console's sign-in, or any other.
func reservedScopes(cfg *config.Config) []policy.Reserved {
	if !cfg.AdminEnabled() {
		return nil
	}
	return []policy.Reserved{{Resource: cfg.AdminResource(), Scope: config.AdminScope, Subjects: cfg.Admin.People, Groups: cfg.Admin.Groups}}
}

// upstreamIDs are the ids of the configured upstreams.
func upstreamIDs(cfg *config.Config) []string {
	ids := make([]string, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		ids = append(ids, u.ID)
	}
	return ids
}

// newRegistrar builds the registration handler (RFC 7591/7592) with the
// configured policy; `clients create` uses it too.
func newRegistrar(cfg *config.Config, st storage.Store, key []byte, log *slog.Logger, addrs *clientaddr.Resolver) (*dcr.Handler, error) {
	reg := cfg.Registration
	h, err := dcr.New(dcr.Config{
		Endpoint: cfg.Issuer + "/register",
		Store:    st,
		Secret:   key,
		Policy: dcr.Policy{
			Open:                   cfg.RegistrationEnabled() && cfg.RegistrationOpen(),
			InitialAccessTokens:    reg.InitialAccessTokens,
			Scopes:                 orAll(reg.Scopes, allScopes(cfg)),
			Resources:              cfg.RegistrationResources(),
			AllowClientCredentials: reg.AllowClientCredentials,
			RedirectHostAllow:      reg.AllowedRedirectHosts,
			RedirectHostDeny:       reg.DeniedRedirectHosts,
			RateLimit:              dcr.RateLimit{PerMinute: perMinute(reg.RateLimit), Burst: reg.RateLimit.Burst},
			MaxBodyBytes:           int64(reg.MaxBodyBytes),
			MaxRedirectURIs:        reg.MaxRedirectURIs,
			MaxStringLength:        reg.MaxStringLength,
			SecretLifetime:         reg.SecretLifetime.D(),
			ReapNeverUsedAfter:     offIfZero(reg.ReapNeverUsedAfter),
			ReapIdleAfter:          offIfZero(reg.ReapIdleAfter),
		},
		Logger:     log.With("component", "dcr"),
		ClientAddr: addrs.Key,
		Counters:   st,
	})
	if err != nil {
		return nil, fmt.Errorf("registration: %w", err)
	}
	return h, nil
}

// healthz answers 200 when storage answers, 503 otherwise.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.store.Ping(ctx); err != nil {
		s.log.Warn("health check failed", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "storage unavailable")
		return
	}
	fmt.Fprintln(w, "ok")
}

// users returns the configured users; with no configuration file it adds the
// development account "admin", whose password comes from
// AUTHSERVER_ADMIN_PASSWORD or is generated and printed once on stderr (not
// through the log: passwords never go to logs).
func (s *server) users(cfg *config.Config, e env) ([]loginui.User, error) {
	var out []loginui.User
	for _, u := range cfg.Users {
		out = append(out, loginui.User{Username: u.Username, PasswordHash: u.PasswordHash, Disabled: u.Disabled})
	}
	if cfg.FromFile {
		return out, nil
	}
	pw, fromEnv, err := envvar.Get(e.lookup, "AUTHSERVER_ADMIN_PASSWORD")
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !fromEnv || pw == "" {
		pw = secret.Generate()[:22]
		fromEnv = false
	}
	h, err := password.Hash(pw)
	if err != nil {
		return nil, err
	}
	out = append(out, loginui.User{Username: "admin", PasswordHash: h})
	login := cfg.Issuer + "/consents"
	if fromEnv {
		s.loginHint = fmt.Sprintf("\n  Development mode (no --config): log in at %s with username \"admin\" and the password in AUTHSERVER_ADMIN_PASSWORD (or its _FILE).\n\n", login)
	} else {
		s.loginHint = fmt.Sprintf("\n  Development mode (no --config): log in at %s with\n      username: admin\n      password: %s\n  This password is generated for this run only; set AUTHSERVER_ADMIN_PASSWORD to choose one.\n\n", login, pw)
	}
	return out, nil
}

// asResources maps resources: to as.Resource, plus, when the admin API is
// on, the admin resource with its single scope. A single configured resource
// is the default (RFC 8707 §2: the server's default when no resource is
// sent) whether marked or not; the admin resource added here does not change
// that.
func asResources(cfg *config.Config) []as.Resource {
	out := make([]as.Resource, 0, len(cfg.Resources)+1)
	for _, r := range cfg.Resources {
		out = append(out, as.Resource{URI: r.URI, Name: r.Name, Scopes: r.Scopes, DefaultScopes: r.DefaultScopes,
			Default: r.Default || len(cfg.Resources) == 1, IntrospectionClients: r.IntrospectionClients,
			ApprovalClients: r.ApprovalClients, TokenClaims: r.TokenClaims})
	}
	if cfg.AdminEnabled() {
		out = append(out, as.Resource{URI: cfg.AdminResource(), Name: "mcpauth admin API", Scopes: []string{config.AdminScope},
			IntrospectionClients: []string{config.ConsoleClientID}})
	}
	return out
}

// jwksBytes turns a JWK Set written as a YAML mapping into its JSON form.
func jwksBytes(m config.JWKS) []byte {
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		// yaml.v3 decodes mappings with string keys, which always marshal;
		// as.New refuses the empty set this leaves.
		return []byte("{}")
	}
	return b
}

// asIdPs maps enterprise.idps to as.EnterpriseIdP.
func asIdPs(cfg *config.Config) []as.EnterpriseIdP {
	var out []as.EnterpriseIdP
	for _, d := range cfg.Enterprise.IdPs {
		out = append(out, as.EnterpriseIdP{Issuer: d.Issuer, JWKS: jwksBytes(d.JWKS), JWKSURI: d.JWKSURI, Clients: d.Clients, LinkByEmail: d.LinkByEmail})
	}
	return out
}

// asWorkloads maps workload.issuers to as.WorkloadIssuer.
func asWorkloads(cfg *config.Config) []as.WorkloadIssuer {
	var out []as.WorkloadIssuer
	for _, w := range cfg.Workload.Issuers {
		wi := as.WorkloadIssuer{Issuer: w.Issuer, JWKS: jwksBytes(w.JWKS), JWKSURI: w.JWKSURI}
		for _, r := range w.Rules {
			wi.Rules = append(wi.Rules, as.WorkloadRule{Subject: r.Subject, Claims: r.Claims, ClientID: r.ClientID, Resources: r.Resources, Scopes: r.Scopes})
		}
		out = append(out, wi)
	}
	return out
}

// asExchange maps the exchange: list (RFC 8693 policy) to as.ExchangeRule.
func asExchange(cfg *config.Config) []as.ExchangeRule {
	out := make([]as.ExchangeRule, 0, len(cfg.Exchange))
	for _, x := range cfg.Exchange {
		out = append(out, as.ExchangeRule{From: x.From, To: x.To, Scopes: x.Scopes, SubjectScopes: x.SubjectScopes, Clients: x.Clients})
	}
	return out
}

// asClients maps clients: to as.Client. When the admin API is on, only
// admin.clients may get tokens for the admin resource: every other client's
// resources are spelled out (the configured ones, never the admin one), and
// the admin clients get the admin resource and scope on top of theirs.
func asClients(cfg *config.Config) []as.Client {
	out := make([]as.Client, 0, len(cfg.Clients))
	for _, c := range cfg.Clients {
		resources, scopes := c.Resources, c.Scopes
		if cfg.AdminEnabled() {
			resources = slices.Clone(orAll(resources, allResources(cfg)))
			if cfg.IsAdminClient(c.ID) {
				resources = append(resources, cfg.AdminResource())
				if len(scopes) > 0 {
					scopes = append(slices.Clone(scopes), config.AdminScope)
				}
			}
		}
		out = append(out, as.Client{
			ID:           c.ID,
			Secret:       c.Secret,
			Public:       c.Public,
			RedirectURIs: c.RedirectURIs,
			GrantTypes:   c.GrantTypes,
			Scopes:       scopes,
			Resources:    resources,
			Name:         c.Name,
			JWKS:         jwksBytes(c.JWKS),
			JWKSURI:      c.JWKSURI,

			DPoPBoundAccessTokens: c.DPoPBoundAccessTokens,
		})
	}
	return out
}

func allScopes(cfg *config.Config) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range cfg.Resources {
		for _, sc := range r.Scopes {
			if !seen[sc] {
				seen[sc] = true
				out = append(out, sc)
			}
		}
	}
	return out
}

func allResources(cfg *config.Config) []string {
	out := make([]string, 0, len(cfg.Resources))
	for _, r := range cfg.Resources {
		out = append(out, r.URI)
	}
	return out
}

func orAll(list, all []string) []string {
	if len(list) == 0 {
		return all
	}
	return list
}

func perMinute(r config.RateLimit) float64 {
	if r.PerMinute == 0 {
		return -1 // off
	}
	return float64(r.PerMinute)
}

// offIfZero maps an explicit 0 ("off" in the file) to dcr's negative "off".
func offIfZero(d *config.Duration) time.Duration {
	if d == nil {
		return 0
	}
	if *d == 0 {
		return -1
	}
	return d.D()
}

// fetchConfig turns cimd.allow_hosts ("127.0.0.1:8443", "localhost:9000")
// into the SSRF-safe client's allowlists: plain http for that host as it
// appears in URLs, and its address let through the special-use check.
func fetchConfig(m config.CIMD) safehttp.Config {
	var fc safehttp.Config
	for _, h := range m.AllowHosts {
		fc.AllowHTTP = append(fc.AllowHTTP, h)
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			continue
		}
		if strings.EqualFold(host, "localhost") {
			fc.Allow = append(fc.Allow, net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port))
			continue
		}
		fc.Allow = append(fc.Allow, net.JoinHostPort(strings.Trim(host, "[]"), port))
	}
	return fc
}

// serve runs the server until ctx ends (SIGINT, SIGTERM), then shuts down
// gracefully. SIGHUP reloads the configuration file (see reload).
func serve(ctx context.Context, cfg *config.Config, migrate bool, log *slog.Logger, e env, configPath string) error {
	logWarnings(log, cfg)
	if !cfg.FromFile {
		log.Info("no configuration file: running on development defaults", "storage", cfg.StorageForLog())
	}
	// Caught from the start, so a SIGHUP during start-up does not kill the
	// process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// Traces (OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables):
	// a server span per request of the main listener, continuing the
	// caller's traceparent (the gateway's exchange), and trace_id and
	// span_id in the log records of a request (access and audit lines).
	tp, err := otelsetup.New(ctx, "authserver", e.lookup)
	if err != nil {
		return err
	}
	defer tp.Flush(log) // the spans still buffered are exported at the exit
	if tracing.Enabled(tp.TracerProvider) {
		log = slog.New(tracing.LogHandler(log.Handler()))
		e.tp = tp.TracerProvider
	}

	s, err := build(ctx, cfg, migrate, log, e)
	if err != nil {
		return err
	}
	defer s.close() // after the listeners: the last audit records and counts are written
	log = s.log

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	servers := []*http.Server{newHTTPServer(ctx, tracing.Handler(tp.TracerProvider, s.handler, tracing.HandlerConfig{}), log)}
	listeners := []net.Listener{ln}
	if cfg.AdminEnabled() {
		h, err := s.adminHandler()
		if err != nil {
			ln.Close()
			return err
		}
		aln, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("admin.listen: %w", err)
		}
		servers = append(servers, newHTTPServer(ctx, h, log))
		listeners = append(listeners, aln)
	}
	gcCtx, stopGC := context.WithCancel(ctx)
	defer stopGC()
	go s.gcLoop(gcCtx)

	errc := make(chan error, len(servers))
	for i, hs := range servers {
		go func() { errc <- hs.Serve(listeners[i]) }()
	}
	log.Info("authserver listening", "addr", ln.Addr().String(), "issuer", cfg.Issuer, "storage", cfg.StorageForLog(),
		"metadata", wellKnown(cfg.Issuer), "version", versionString())
	if len(listeners) > 1 {
		log.Info("admin API listening", "addr", listeners[1].Addr().String(), "metrics", "http://"+listeners[1].Addr().String()+"/metrics",
			"admin_resource", cfg.AdminResource(), "admin_clients", cfg.Admin.Clients)
	}
	// Printed on stderr, never through the log: it may hold a password.
	fmt.Fprint(e.stderr, s.loginHint)

	var serveErr error
loop:
	for {
		select {
		case serveErr = <-errc:
			break loop
		case <-hup:
			if err := s.reload(ctx, configPath, e); err != nil {
				log.Error("reload refused; the running configuration stays", "err", err)
				continue
			}
			log.Info("configuration reloaded", "file", configPath)
		case <-ctx.Done():
			break loop
		}
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	for _, hs := range servers {
		if err := hs.Shutdown(sctx); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	for range len(servers) - btoi(serveErr != nil) {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	s.current().stop()
	log.Info("stopped")
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newHTTPServer(ctx context.Context, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// logWarnings logs the weak settings of cfg (config.Warnings), one line
// each; serve calls it at start-up and check-config prints the same lines.
func logWarnings(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		log.Warn(w.Msg, "field", w.Path)
	}
}

// wellKnown is the RFC 8414 §3 metadata URL of issuer (path inserted).
func wellKnown(issuer string) string {
	u, err := metadata.WellKnownURL(issuer, metadata.SuffixAuthorizationServer)
	if err != nil {
		return ""
	}
	return u
}

// upstreamProviders builds the OpenID relying party of every configured
// upstream (none is contacted until someone signs in) and, when any has
// recheck_after, the AS's recheck at refresh (nil otherwise).
func (s *server) upstreamProviders(cfg *config.Config) ([]loginui.Upstream, as.UpstreamRecheck, error) {
	var out []loginui.Upstream
	rc := &upstream.Rechecker{Providers: map[string]*upstream.Provider{}, After: map[string]time.Duration{}, Store: s.store}
	for i, u := range cfg.Upstreams {
		pc := upstream.Config{
			ID: u.ID, Issuer: u.Issuer, ClientID: u.ClientID, ClientSecret: u.ClientSecret,
			RedirectURL:    cfg.Issuer + "/upstream/" + u.ID + "/callback",
			Scopes:         u.Scopes,
			SubjectClaim:   u.SubjectClaim,
			AllowedDomains: u.AllowedDomains,
			AllowedGroups:  u.AllowedGroups,
			ClaimScopes:    u.ClaimScopes,
			AuthParams:     u.AuthorizationParams,
		}
		if u.TenantClaim != "" {
			pc.KeepClaims = []string{u.TenantClaim}
		}
		if k := u.PrivateKeyJWT; k != nil {
			pc.PrivateKey, pc.KeyID, pc.KeyAlg, pc.AssertionAudience = k.Key, k.KeyID, k.Alg, k.Audience
		}
		if tracing.Enabled(s.tp) {
			// Discovery, keys, token and userinfo calls as client spans.
			c := upstream.NewHTTPClient(upstream.DefaultTimeout)
			c.Transport = tracing.FetchTransport(s.tp, c.Transport, "upstream "+u.ID)
			pc.HTTPClient = c
		}
		p, err := upstream.New(pc)
		if err != nil {
			return nil, nil, fmt.Errorf("config: upstreams[%d]: %w", i, err)
		}
		out = append(out, loginui.Upstream{Provider: p, Name: u.Name})
		if d := u.RecheckAfter.D(); d > 0 {
			rc.Providers[u.ID], rc.After[u.ID] = p, d
		}
	}
	if len(rc.Providers) == 0 {
		return out, nil, nil
	}
	sealer, err := loginui.RefreshSealer(s.secret)
	if err != nil {
		return nil, nil, err
	}
	rc.Sealer = sealer
	return out, rc, nil
}

// connectionVault builds the provider of every configured connection (none
// is contacted until someone connects) and the vault of people's tokens,
// sealed under keys derived from the server secret.
func (s *server) connectionVault(cfg *config.Config) (*connections.Vault, error) {
	var ps []*connections.Provider
	for i, x := range cfg.Connections {
		pc := connections.Config{
			ID: x.ID, Name: x.Name,
			AuthorizationEndpoint: x.AuthorizationEndpoint, TokenEndpoint: x.TokenEndpoint, Issuer: x.Issuer,
			RevocationEndpoint: x.RevocationEndpoint,
			ClientID:           x.ClientID, ClientSecret: x.ClientSecret, Scopes: x.Scopes,
			Resource: x.Resource, Clients: x.Clients,
			RedirectURL: cfg.Issuer + loginui.ConnectionsPath + "/" + x.ID + "/callback",
		}
		if tracing.Enabled(s.tp) {
			c := upstream.NewHTTPClient(upstream.DefaultTimeout)
			c.Transport = tracing.FetchTransport(s.tp, c.Transport, "connection "+x.ID)
			pc.HTTPClient = c
		} else {
			pc.HTTPClient = upstream.NewHTTPClient(upstream.DefaultTimeout)
		}
		p, err := connections.NewProvider(pc)
		if err != nil {
			return nil, fmt.Errorf("config: connections[%d]: %w", i, err)
		}
		ps = append(ps, p)
	}
	log := s.log.With("component", "connections")
	return connections.NewVault(connections.VaultConfig{
		Providers: ps, Store: s.store, Secret: s.secret, Logger: log,
		Audit: func(ctx context.Context, event string, kv ...any) {
			log.InfoContext(ctx, "audit", append([]any{"event", event}, kv...)...)
		},
	})
}
