package as

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ory/fosite"
	foauth2 "github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/pkce"
	"github.com/ory/fosite/token/hmac"

	"github.com/mcpauth/mcpauth/as/authflow"
	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/internal/secret"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/storage"
)

// Key-derivation purposes of Config.Secret. Each use gets its own key.
const (
	purposeHMAC    = "fosite hmac"
	purposeTokens  = "token payloads"
	purposeSecrets = "client secrets" // shared with dcr: the hash of generated client secrets
	purposeUI      = "login ui"
)

// maxBody caps request bodies of /token, /introspect and /revoke, and the
// form of /authorize.
const maxBody = 64 << 10

// Server is the authorization server. Create it with New.
type Server struct {
	cfg       Config
	issuer    string
	basePath  string
	resources []resource
	clients   *clientManager
	store     *tokenStore
	keys      *keyring
	tokens    *tokenStrategy
	provider  *fosite.Fosite
	fcfg      *fositeConfig
	ui        *loginui.UI
	// flow opens the authorization transactions the pages seal.
	flow *authflow.Codec
	// authorizeParses counts fosite's parses of authorization requests:
	// one per request, whatever the pages that follow.
	authorizeParses atomic.Int64
	log             logger
	now             func() time.Time
	metadata        []byte
	handler         http.Handler
	// people decides whether a grant's person may still use it and what
	// their claims cap (Config.People).
	people *policy.People
	// revoker revokes grants (Config.Revoker).
	revoker    *GrantRevoker
	statusList *statusList
	dpop       *dpopState
}

// fositeConfig is fosite's Config with the values a client assertion may
// name as its audience (assertionAudiences; authenticateAssertion has
// already required one of them as the sole value).
type fositeConfig struct {
	*fosite.Config
	tokenURLs []string
}

func (c *fositeConfig) GetTokenURLs(context.Context) []string { return c.tokenURLs }

// New checks cfg, loads (or on first start creates) the signing key, and
// returns the server. The key reload loop runs until ctx ends.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.AccessTokenTTL == 0 {
		cfg.AccessTokenTTL = DefaultAccessTokenTTL
	}
	if cfg.RefreshTokenTTL == 0 {
		cfg.RefreshTokenTTL = DefaultRefreshTokenTTL
	}
	if cfg.GrantLifetime == 0 {
		cfg.GrantLifetime = DefaultGrantLifetime
	}
	if cfg.CodeTTL == 0 {
		cfg.CodeTTL = DefaultCodeTTL
	}
	if cfg.RefreshGrace == 0 {
		cfg.RefreshGrace = DefaultRefreshGrace
	}
	if cfg.SigningAlg == "" {
		cfg.SigningAlg = "ES256"
	}
	if cfg.KeyReloadInterval <= 0 {
		cfg.KeyReloadInterval = 15 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := logger{cfg.Logger}
	if log.l == nil {
		log.l = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	resources, err := buildResources(cfg.Resources)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Issuer)
	s := &Server{
		cfg:       cfg,
		issuer:    cfg.Issuer,
		basePath:  strings.TrimSuffix(u.EscapedPath(), "/"),
		resources: resources,
		log:       log,
		now:       cfg.Now,
	}

	hasher, err := secret.NewHasher(cfg.Secret, purposeSecrets)
	if err != nil {
		return nil, err
	}
	tokenSealer, err := seal.New(cfg.Secret, purposeTokens)
	if err != nil {
		return nil, err
	}
	keySealer, err := seal.New(cfg.Secret, sealPurposeKeys)
	if err != nil {
		return nil, err
	}
	hmacKey, err := hkdf.Key(sha256.New, cfg.Secret, nil, "mcpauth "+purposeHMAC, 32)
	if err != nil {
		return nil, err
	}

	s.clients = &clientManager{
		static:             map[string]*client{},
		store:              cfg.Store,
		resolver:           cfg.ClientResolver,
		resources:          resources,
		regScopes:          slices.Clone(cfg.RegistrationScopes),
		regResources:       slices.Clone(cfg.RegistrationResources),
		hasher:             hasher,
		now:                cfg.Now,
		jwks:               &jwksFetcher{client: cfg.JWKSHTTPClient, now: cfg.Now, cache: map[string]jwksEntry{}},
		assertionAudiences: assertionAudiences(cfg.Issuer, s.endpoint("/token"), cfg.AssertionAudienceTokenEndpoint),
	}
	for i, cc := range cfg.Clients {
		c, err := s.clients.fromConfig(i, cc)
		if err != nil {
			return nil, err
		}
		if _, dup := s.clients.static[c.id]; dup {
			return nil, fmt.Errorf("as: Clients[%d].ID %q is listed twice", i, c.id)
		}
		s.clients.static[c.id] = c
	}
	for i, r := range resources {
		for j, id := range r.introspectors {
			c, ok := s.clients.static[id]
			if !ok || c.public {
				return nil, fmt.Errorf("as: Resources[%d].IntrospectionClients[%d]: %q is not a configured confidential client", i, j, id)
			}
		}
		for j, id := range r.approvers {
			c, ok := s.clients.static[id]
			if !ok || c.public || c.authMethod == authPrivateKeyJWT {
				return nil, fmt.Errorf("as: Resources[%d].ApprovalClients[%d]: %q is not a configured confidential client with a secret", i, j, id)
			}
		}
	}

	s.clients.workload = map[string]*client{}
	for _, wi := range cfg.WorkloadIssuers {
		for _, r := range wi.Rules {
			if s.clients.workload[r.ClientID] == nil {
				s.clients.workload[r.ClientID] = &client{id: r.ClientID, source: sourceWorkload}
			}
			c := s.clients.workload[r.ClientID]
			for _, res := range r.Resources {
				if cr, err := metadata.CanonicalResource(res); err == nil && !slices.Contains(c.resources, cr) {
					c.resources = append(c.resources, cr)
				}
			}
			for _, sc := range r.Scopes {
				if !slices.Contains(c.scopes, sc) {
					c.scopes = append(c.scopes, sc)
				}
			}
		}
	}

	s.store = &tokenStore{store: cfg.Store, sealer: tokenSealer, clients: s.clients, now: cfg.Now, grace: cfg.RefreshGrace, log: log}
	s.keys = &keyring{
		store:     cfg.Store,
		sealer:    keySealer,
		alg:       cfg.SigningAlg,
		retention: KeyRetention(cfg.AccessTokenTTL, cfg.KeyReloadInterval),
		now:       cfg.Now,
		log:       log,
	}
	if err := s.keys.ensure(ctx); err != nil {
		return nil, fmt.Errorf("as: signing keys: %w", err)
	}
	go s.keys.run(ctx, cfg.KeyReloadInterval)

	s.fcfg = &fositeConfig{
		Config: &fosite.Config{
			AccessTokenLifespan:   cfg.AccessTokenTTL,
			RefreshTokenLifespan:  cfg.RefreshTokenTTL,
			AuthorizeCodeLifespan: cfg.CodeTTL,
			// RFC 7636 with S256 only, for every client (OAuth 2.1 §4.1.1).
			EnforcePKCE:                    true,
			EnablePKCEPlainChallengeMethod: false,
			// Exact matching; no wildcard or prefix semantics anywhere.
			ScopeStrategy:            fosite.ExactScopeStrategy,
			AudienceMatchingStrategy: exactAudience,
			GlobalSecret:             hmacKey,
			TokenEntropy:             32,
			TokenURL:                 s.endpoint("/token"),
			AccessTokenIssuer:        cfg.Issuer,
			ClientSecretsHasher:      secretHasher{hasher},
			JWKSFetcherStrategy:      s.clients.jwks,
			SanitationWhiteList:      []string{"redirect_uri", "resource"},
			// Refresh tokens are not gated on offline_access (clients rarely ask for it).
			RefreshTokenScopes: []string{},
			// state belongs to the client and is optional with PKCE (OAuth
			// 2.1 §4.1.1). fosite enforces at least 8 characters whatever
			// this says; serveAuthorize works around it (statePlaceholder).
			MinParameterEntropy:        -1,
			RedirectSecureChecker:      func(context.Context, *url.URL) bool { return true },
			OmitRedirectScopeParam:     false,
			SendDebugMessagesToClients: false,
		},
		tokenURLs: s.clients.assertionAudiences,
	}
	s.fcfg.ClientAuthenticationStrategy = s.clients.authenticate

	s.tokens = &tokenStrategy{
		HMACSHAStrategyUnPrefixed: foauth2.NewHMACSHAStrategyUnPrefixed(&hmac.HMACStrategy{Config: s.fcfg}, s.fcfg),
		keys:                      s.keys,
		issuer:                    cfg.Issuer,
		ttl:                       cfg.AccessTokenTTL,
		now:                       cfg.Now,
		status:                    &statusIndexer{store: cfg.Store},
		statusURI:                 s.endpoint(statusListPath),
		people:                    cfg.Attributes,
		tokenClaims:               map[string][]string{},
	}
	for _, r := range s.resources {
		if len(r.tokenClaims) > 0 {
			s.tokens.tokenClaims[r.URI] = r.tokenClaims
		}
	}
	s.revoker = cfg.Revoker
	if t := reflect.TypeOf(cfg.Store); s.revoker != nil && t != nil && t.Comparable() && s.revoker.store != cfg.Store {
		return nil, errors.New("as: Config.Revoker revokes in another store than Config.Store")
	}
	if s.revoker == nil {
		s.revoker = NewGrantRevoker(cfg.Store, log.l)
	}
	s.statusList = &statusList{store: cfg.Store, keys: s.keys, issuer: cfg.Issuer, uri: s.endpoint(statusListPath), now: cfg.Now, revocations: &s.revoker.revocations}
	s.store.revoked = s.statusList.invalidate

	codeHandler := &foauth2.AuthorizeExplicitGrantHandler{
		AccessTokenStrategy:    s.tokens,
		RefreshTokenStrategy:   s.tokens,
		AuthorizeCodeStrategy:  s.tokens,
		CoreStorage:            s.store,
		TokenRevocationStorage: s.store,
		Config:                 s.fcfg,
	}
	pkceHandler := &pkce.Handler{
		AuthorizeCodeStrategy: s.tokens,
		Storage:               s.store,
		Config:                s.fcfg,
	}
	refreshHandler := &foauth2.RefreshTokenGrantHandler{
		AccessTokenStrategy:    s.tokens,
		RefreshTokenStrategy:   s.tokens,
		TokenRevocationStorage: s.store,
		Config:                 s.fcfg,
	}
	ccHandler := &foauth2.ClientCredentialsGrantHandler{
		HandleHelper: &foauth2.HandleHelper{
			AccessTokenStrategy: s.tokens,
			AccessTokenStorage:  s.store,
			Config:              s.fcfg,
		},
		Config: s.fcfg,
	}
	revocation := &foauth2.TokenRevocationHandler{
		TokenRevocationStorage: s.store,
		RefreshTokenStrategy:   s.tokens,
		AccessTokenStrategy:    s.tokens,
	}
	s.fcfg.AuthorizeEndpointHandlers = fosite.AuthorizeEndpointHandlers{codeHandler, pkceHandler}
	// Order matters: the resource handler narrows client-credentials
	// requests before fosite's handler checks them, and checks the resource
	// of code and refresh requests after fosite's handlers loaded the grant.
	th := fosite.TokenEndpointHandlers{
		&resourcePreHandler{s: s},
		codeRace{gated{codeHandler}, s}, pkceGate{gated{pkceHandler}, s}, gated{refreshHandler}, gated{ccHandler},
	}
	th = append(th, s.extensionHandlers()...)
	th = append(th, &resourcePostHandler{s: s}, &userGate{s: s}, &dpopHandler{s: s})
	s.fcfg.TokenEndpointHandlers = th
	s.fcfg.RevocationHandlers = fosite.RevocationHandlers{revocation}
	s.provider = &fosite.Fosite{Store: s.clients, Config: s.fcfg}
	s.clients.f = s.provider

	s.ui = cfg.UI
	if s.ui != nil {
		s.ui.SetNames(displayNames{s})
	}
	if s.flow, err = authflow.NewCodec(cfg.Secret, cfg.Store, 0, cfg.Now); err != nil {
		return nil, err
	}
	s.people = cfg.People
	if s.people == nil {
		s.people = defaultPeople(cfg)
	}
	if err := s.initDPoP(); err != nil {
		return nil, err
	}
	s.metadata, err = s.buildMetadata()
	if err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// Handler serves every endpoint. Paths are the issuer's path followed by
// /authorize, /token, /introspect, /approvals, /revoke, /jwks.json, /statuslists/1 (the
// Token Status List), /statuslists (its aggregation), /consents, /approve/{id}, /logout,
// /ui/, /upstream/{id}/callback, plus the metadata documents at /.well-known/oauth-authorization-server{path},
// /.well-known/openid-configuration{path} and {path}/.well-known/openid-configuration.
func (s *Server) Handler() http.Handler { return s.handler }

// Issuer returns the configured issuer identifier.
func (s *Server) Issuer() string { return s.issuer }

// endpoint returns the absolute URL of an endpoint path.
func (s *Server) endpoint(p string) string { return s.issuer + p }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	bp := s.basePath
	mux.Handle(bp+"/authorize", http.HandlerFunc(s.serveAuthorize))
	mux.Handle(bp+loginui.ContinuePath, http.HandlerFunc(s.serveContinue))
	mux.Handle(bp+"/token", cors(noStore(oneAuthorization(http.HandlerFunc(s.serveToken)))))
	mux.Handle(bp+"/introspect", noStore(oneAuthorization(http.HandlerFunc(s.serveIntrospect))))
	mux.Handle(bp+ApprovalsPath, noStore(oneAuthorization(http.HandlerFunc(s.serveApprovals))))
	mux.Handle(bp+"/revoke", cors(noStore(oneAuthorization(http.HandlerFunc(s.serveRevoke)))))
	mux.Handle(bp+"/jwks.json", cors(http.HandlerFunc(s.serveJWKS)))
	mux.Handle(bp+statusListPath, cors(http.HandlerFunc(s.serveStatusList)))
	mux.Handle(bp+statusAggregationPath, cors(http.HandlerFunc(s.serveStatusAggregation)))
	md := cors(http.HandlerFunc(s.serveMetadata))
	mux.Handle("/.well-known/oauth-authorization-server"+bp, md)
	mux.Handle("/.well-known/openid-configuration"+bp, md)
	if bp != "" {
		mux.Handle(bp+"/.well-known/openid-configuration", md)
		mux.Handle(bp+"/.well-known/oauth-authorization-server", md)
		// Some clients (Claude Code) ask the root locations even when the
		// issuer has a path; the document still names the issuer exactly.
		mux.Handle("/.well-known/oauth-authorization-server", md)
		mux.Handle("/.well-known/openid-configuration", md)
	}
	if s.ui != nil {
		uh := s.ui.Handler()
		// The steps of an authorization transaction.
		mux.Handle(bp+loginui.LoginPath, uh)
		mux.Handle(bp+loginui.UpstreamPath, uh)
		mux.Handle(bp+loginui.ConsentPath, uh)
		mux.Handle(bp+"/consents", uh)
		// The pages where people decide about held tool calls.
		mux.Handle(bp+loginui.ApprovalPath, uh)
		mux.Handle(bp+"/logout", uh)
		mux.Handle(bp+"/ui/", uh)
		// Callbacks of upstream OpenID providers (loginui.Config.Upstreams).
		mux.Handle(bp+"/upstream/", uh)
	}
	return recoverer(s.log, mux)
}

// noStore sets Cache-Control: no-store (RFC 6749 §5.1) before the handler runs.
func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// oneAuthorization answers 400 invalid_request to a request with more than
// one Authorization header: the client would be authenticated by whichever
// one the parser happens to read (RFC 6749 §5.2: a request that "includes
// multiple credentials" is invalid_request; RFC 9110 §5.3 allows repeating a
// field only when its value is a list, which Authorization's is not).
func oneAuthorization(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values("Authorization")) > 1 {
			writeJSONError(w, http.StatusBadRequest, "invalid_request", "The request has more than one Authorization header.")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// cors lets browser-based clients (MCP Inspector) read metadata, keys and
// token responses. No credentials are involved, so any origin is allowed.
func cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Access-Control-Allow-Origin", "*")
		hd.Set("Access-Control-Expose-Headers", "WWW-Authenticate, DPoP-Nonce")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hd.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version, DPoP")
			hd.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a logged server_error: no stack trace ever
// reaches a client.
func recoverer(log logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.error(r.Context(), "panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeJSONError(w, serverErrorAnswer.status, serverErrorAnswer.Code, serverErrorAnswer.Description)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// gated asks a fosite handler whether it handles a request before calling it.
// fosite's handlers answer requests of other grants with a stack-captured
// ErrUnknownRequest, which costs more than the rest of a client-credentials
// request besides signing; the plain sentinel means the same to fosite.
type gated struct{ fosite.TokenEndpointHandler }

func (g gated) HandleTokenEndpointRequest(ctx context.Context, r fosite.AccessRequester) error {
	if !g.CanHandleTokenEndpointRequest(ctx, r) {
		return fosite.ErrUnknownRequest
	}
	return g.TokenEndpointHandler.HandleTokenEndpointRequest(ctx, r)
}

func (g gated) PopulateTokenEndpointResponse(ctx context.Context, r fosite.AccessRequester, resp fosite.AccessResponder) error {
	if !g.CanHandleTokenEndpointRequest(ctx, r) {
		return fosite.ErrUnknownRequest
	}
	return g.TokenEndpointHandler.PopulateTokenEndpointResponse(ctx, r, resp)
}

// codeRace covers the redemption that loses a race: its Populate step finds
// the code already redeemed (by a request that passed the same checks a
// moment earlier). Like a replay, it revokes what the code issued (RFC 6749
// §4.1.2, revokeGrant: in a transaction, which waits for the winner's, and
// in the lock order of every other revocation of a grant) and answers
// invalid_grant instead of fosite's server_error.
type codeRace struct {
	gated
	s *Server
}

func (c codeRace) PopulateTokenEndpointResponse(ctx context.Context, r fosite.AccessRequester, resp fosite.AccessResponder) error {
	err := c.gated.PopulateTokenEndpointResponse(ctx, r, resp)
	if err == nil && c.CanHandleTokenEndpointRequest(ctx, r) {
		c.s.store.deletePKCE(ctx, c.s.tokens.AuthorizeCodeSignature(ctx, r.GetRequestForm().Get("code")))
	}
	if err == nil || !(errors.Is(err, fosite.ErrInvalidatedAuthorizeCode) || errors.Is(err, errCodeRace)) {
		return err
	}
	sig := c.s.tokens.AuthorizeCodeSignature(ctx, r.GetRequestForm().Get("code"))
	if t, gerr := c.s.cfg.Store.GetToken(ctx, storage.KindAuthorizeCode, sig); gerr == nil {
		c.s.store.revokeGrant(ctx, t.RequestID)
	}
	return fosite.ErrInvalidGrant.WithHint("The authorization code has already been used.")
}

// pkceGate burns the code when its PKCE verification fails (RFC 7636 §4.6),
// so a stolen code cannot be tried with many verifiers.
//
// A code that is no longer active by then was redeemed (or burned) by
// another request after this one found it active: it was presented again,
// so what it issued is revoked (RFC 6749 §4.1.2), as for any replay.
type pkceGate struct {
	gated
	s *Server
}

func (p pkceGate) HandleTokenEndpointRequest(ctx context.Context, r fosite.AccessRequester) error {
	err := p.gated.HandleTokenEndpointRequest(ctx, r)
	if err != nil && !errors.Is(err, fosite.ErrUnknownRequest) {
		sig := p.s.tokens.AuthorizeCodeSignature(ctx, r.GetRequestForm().Get("code"))
		derr := p.s.cfg.Store.DeactivateToken(ctx, storage.KindAuthorizeCode, sig)
		switch {
		case errors.Is(derr, storage.ErrInactive):
			if m := remembered(ctx, sig); m != nil {
				p.s.log.audit(ctx, "code.replayed", "client_id", m.tok.ClientID, "sub", m.tok.Subject, "grant", m.tok.RequestID)
				p.s.store.revokeGrant(ctx, m.tok.RequestID)
			}
		case derr != nil && !errors.Is(derr, storage.ErrNotFound):
			p.s.log.error(ctx, "burning a code after failed PKCE", "err", derr)
		}
		p.s.store.deletePKCE(ctx, sig)
	}
	return err
}

// exactAudience replaces fosite's prefix matcher: every needle must equal,
// as a string, one canonical resource URI in the haystack.
func exactAudience(haystack, needle []string) error {
	for _, n := range needle {
		ok := false
		for _, h := range haystack {
			if h == n {
				ok = true
				break
			}
		}
		if !ok {
			return errInvalidTarget("The requested resource is not one this client may use.")
		}
	}
	return nil
}

// logger wraps slog for internal errors. Secrets never reach it.
type logger struct{ l *slog.Logger }

func (l logger) error(ctx context.Context, msg string, args ...any) {
	l.l.ErrorContext(ctx, msg, args...)
}

// audit writes one audit event (SECURITY.md, "Audit events"): message
// "audit", attribute "event" naming what happened (token.issued,
// token.exchanged, token.revoked, code.replayed, refresh.reused,
// client.auth_failed, assertion.refused), then client_id, sub and the granted scope/aud. Raw
// tokens, codes, secrets and assertions never appear: a token argument is
// logged as its digest (see digest).
func (l logger) audit(ctx context.Context, event string, args ...any) {
	l.l.InfoContext(ctx, "audit", append([]any{"event", event}, args...)...)
}

// auditIssued writes the token.issued audit event: what audit(ctx,
// "token.issued", "client_id", clientID, "grant_type", grantType, "sub",
// sub, "aud", aud, "scope", scope) writes, with the attributes built as
// such rather than from a list of values.
func (l logger) auditIssued(ctx context.Context, clientID, grantType, sub, aud, scope string) {
	l.l.LogAttrs(ctx, slog.LevelInfo, "audit", slog.String("event", "token.issued"), slog.String("client_id", clientID),
		slog.String("grant_type", grantType), slog.String("sub", sub), slog.String("aud", aud), slog.String("scope", scope))
}

// digest names a secret argument in an audit event without revealing it:
// the first 12 bytes of its SHA-256, base64url.
func digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// isUnavailable reports a storage outage anywhere in err's chain.
func isUnavailable(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) || errors.Is(err, fosite.ErrTemporarilyUnavailable)
}

// defaultPeople builds the people of a Config without People: the local
// accounts of Users, else of the UI; the upstream providers of the UI (with
// their claim mappings) and of UpstreamIDs; the records in Store.
func defaultPeople(cfg Config) *policy.People {
	var pc policy.PeopleConfig
	if cfg.UI != nil {
		pc = cfg.UI.People().Config()
	}
	if cfg.Users != nil {
		pc.Local = cfg.Users
	}
	for _, id := range cfg.UpstreamIDs {
		if !slices.ContainsFunc(pc.Upstreams, func(u policy.Upstream) bool { return u.ID == id }) {
			pc.Upstreams = append(pc.Upstreams, policy.Upstream{ID: id})
		}
	}
	pc.Records = cfg.Store
	return policy.NewPeople(pc)
}
