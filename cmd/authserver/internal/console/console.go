package console

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/securecookie"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/storage"
)

// Prefix is the path every page lives under.
const Prefix = "/console/"

// Operations are the operator actions the pages call: *ops.Ops, the same
// operations as the CLI and the admin API. actor is the console's client
// id; the person is in the context (ops.WithAdminSubject).
type Operations interface {
	ListClientsPage(ctx context.Context, after string, limit int) ([]ops.Client, string, error)
	CountClients(ctx context.Context) (map[string]int, error)
	GetClient(ctx context.Context, id string) (*ops.Client, error)
	CreateClient(ctx context.Context, actor string, nc ops.NewClient) (*ops.CreatedClient, error)
	DeleteClient(ctx context.Context, actor, id string) error
	ListUsers(ctx context.Context, after string, limit int) ([]ops.User, string, error)
	GetUser(ctx context.Context, subject string) (*ops.User, error)
	DisableUser(ctx context.Context, actor, subject string) (*ops.UserChange, error)
	EnableUser(ctx context.Context, actor, subject string) (*ops.User, error)
	ListGrants(ctx context.Context, user, clientID string) ([]as.Grant, error)
	RevokeGrants(ctx context.Context, actor string, f as.GrantFilter) ([]as.Grant, error)
	ListKeys(ctx context.Context) ([]as.KeyInfo, error)
	RotateKey(ctx context.Context, actor string) (string, error)
	RetireKey(ctx context.Context, actor, kid string) (string, error)
	PruneKeys(ctx context.Context, actor string, unloadable bool) ([]string, error)
	ListAudit(ctx context.Context, q ops.AuditQuery) (ops.AuditPage, error)
	HourlyCounts(ctx context.Context, now time.Time, hours int, names ...string) (ops.HourlyCounts, error)
	ListApprovals(ctx context.Context, user, after string, limit int) ([]ops.Approval, string, error)
	RevokeApproval(ctx context.Context, actor, id string) error
	ListConnections(ctx context.Context, user string) ([]ops.Connection, error)
	RevokeConnections(ctx context.Context, actor, user, connection string) ([]ops.Connection, error)
}

// Sessions reads the server's browser sessions (storage.SessionStore): a
// console session lives only as long as the sign-in session it came from.
type Sessions interface {
	GetSession(ctx context.Context, id string) (*storage.Session, error)
	ListSessions(ctx context.Context, subject string) ([]storage.Session, error)
}

// Config configures New. Zero values are documented per field.
type Config struct {
	// Issuer is the authorization server's issuer: the browser is sent to
	// Issuer/authorize. Required.
	Issuer string
	// BaseURL is the console's own URL, such as
	// http://127.0.0.1:9001/console; its callback, BaseURL/callback, is
	// the client's redirect URI. Required.
	BaseURL string
	// ClientID and ClientSecret are the console's client at the server.
	// Required.
	ClientID, ClientSecret string
	// Resource is the admin resource (RFC 8707) the console's tokens are
	// for, with scope admin. Required.
	Resource string
	// HTTPClient reaches the server's token and introspection endpoints
	// (Issuer/token, Issuer/introspect). Nil: http.DefaultClient.
	HTTPClient *http.Client
	// Secret (at least 32 bytes) is the root of the cookie keys. Required.
	Secret []byte
	// SessionTTL ends a console session this long after its sign-in.
	// Zero: 8h.
	SessionTTL time.Duration
	// Ops returns the operations of the current configuration. Required.
	Ops func() Operations
	// Sessions reads the server's sign-in sessions. Required.
	Sessions Sessions
	// Allowed reports whether subject may still use the console
	// (admin.people, admin.groups, as policy.People.CapOn decides).
	// Required.
	Allowed func(ctx context.Context, subject string) (bool, error)
	// AuditKept: the server keeps audit events in storage
	// (admin.audit_retention is not 0), which the audit page lists.
	AuditKept bool
	// KeyRetention is how long a retired key stays published before
	// `keys prune` may delete it (as.KeyRetention).
	KeyRetention time.Duration
	// Logger receives internal errors. Nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// Console serves the pages.
type Console struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	oauth  oauth2.Config
	cookie *securecookie.SecureCookie
	secure bool
	mux    *http.ServeMux
	cache  countCache
}

// New returns the console.
func New(cfg Config) (*Console, error) {
	if cfg.Issuer == "" || cfg.BaseURL == "" || cfg.ClientID == "" || cfg.ClientSecret == "" || cfg.Resource == "" ||
		cfg.Ops == nil || cfg.Sessions == nil || cfg.Allowed == nil {
		return nil, errors.New("console: Issuer, BaseURL, ClientID, ClientSecret, Resource, Ops, Sessions and Allowed are required")
	}
	if len(cfg.Secret) < 32 {
		return nil, errors.New("console: Secret must be at least 32 bytes")
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, errors.New("console: BaseURL must be an http or https URL")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	c := &Console{cfg: cfg, log: cfg.Logger, now: cfg.Now, secure: base.Scheme == "https"}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	hashKey, err := hkdf.Key(sha256.New, cfg.Secret, nil, "mcpauth console cookie mac", 32)
	if err != nil {
		return nil, err
	}
	blockKey, err := hkdf.Key(sha256.New, cfg.Secret, nil, "mcpauth console cookie encryption", 32)
	if err != nil {
		return nil, err
	}
	c.cookie = securecookie.New(hashKey, blockKey).MaxAge(int(cfg.SessionTTL / time.Second)).MaxLength(8192)
	issuer := strings.TrimSuffix(cfg.Issuer, "/")
	c.oauth = oauth2.Config{
		ClientID:     cfg.ClientID,
		ClientSecret: cfg.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: issuer + "/authorize", TokenURL: issuer + "/token", AuthStyle: oauth2.AuthStyleInHeader},
		RedirectURL:  strings.TrimSuffix(cfg.BaseURL, "/") + "/callback",
		Scopes:       []string{"admin"},
	}
	c.routes()
	return c, nil
}

// ServeHTTP serves every path under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setPageHeaders(w.Header())
	c.mux.ServeHTTP(w, r)
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/style.css
var styleCSS []byte

var pages = template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html"))

// contentSecurityPolicy allows our stylesheet and nothing else (no
// script), posts only to ourselves, and forbids framing.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// setPageHeaders sets the anti-framing (RFC 9700 §4.11.1), no-referrer and
// no-store headers of every answer.
func setPageHeaders(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /console/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write(styleCSS)
	})
	m.HandleFunc("GET /console/signin", c.signIn)
	m.HandleFunc("GET /console/callback", c.callback)
	m.HandleFunc("POST /console/signout", c.page(c.signOut))
	m.HandleFunc("GET /console/{$}", c.page(c.overview))
	m.HandleFunc("GET /console/clients", c.page(c.clients))
	m.HandleFunc("GET /console/clients/new", c.page(c.newClient))
	m.HandleFunc("POST /console/clients/new", c.page(c.createClient))
	m.HandleFunc("GET /console/client", c.page(c.showClient))
	m.HandleFunc("POST /console/client/delete", c.page(c.deleteClient))
	m.HandleFunc("GET /console/people", c.page(c.people))
	m.HandleFunc("GET /console/person", c.page(c.showPerson))
	m.HandleFunc("POST /console/person/disable", c.page(c.disablePerson))
	m.HandleFunc("POST /console/person/enable", c.page(c.enablePerson))
	m.HandleFunc("GET /console/grants", c.page(c.grants))
	m.HandleFunc("POST /console/grants/revoke", c.page(c.revokeGrants))
	m.HandleFunc("GET /console/approvals", c.page(c.approvals))
	m.HandleFunc("POST /console/approvals/revoke", c.page(c.revokeApproval))
	m.HandleFunc("GET /console/connections", c.page(c.connections))
	m.HandleFunc("POST /console/connections/revoke", c.page(c.revokeConnection))
	m.HandleFunc("GET /console/keys", c.page(c.keys))
	m.HandleFunc("POST /console/keys/rotate", c.page(c.rotateKey))
	m.HandleFunc("POST /console/keys/retire", c.page(c.retireKey))
	m.HandleFunc("POST /console/keys/prune", c.page(c.pruneKeys))
	m.HandleFunc("GET /console/audit", c.page(c.audit))
	m.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, http.StatusNotFound, "message.html", &view{Title: "Not found", Detail: "There is no such page in the console."})
	})
	m.HandleFunc("/console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	})
	c.mux = m
}

// countCache keeps the overview's counts, which page through every person
// and client (see counts).
type countCache struct {
	mu      sync.Mutex
	at      time.Time
	last    *counts
	running bool // a recount runs in the background
	// first is held by the request making the first count.
	first sync.Mutex
}
