package dcr

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/internal/clientaddr"
	"github.com/mcpauth/mcpauth/internal/secret"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// ClientInformation is the client information response of RFC 7591 §3.2.1 and
// RFC 7592 §3: the accepted metadata plus what the server issued.
type ClientInformation struct {
	ClientID         string `json:"client_id"`
	ClientIDIssuedAt int64  `json:"client_id_issued_at"`
	// ClientSecret is present only in the response that issued it.
	ClientSecret string `json:"client_secret,omitempty"`
	// ClientSecretExpiresAt is present for confidential clients; 0: never.
	ClientSecretExpiresAt   *int64 `json:"client_secret_expires_at,omitempty"`
	RegistrationAccessToken string `json:"registration_access_token,omitempty"`
	RegistrationClientURI   string `json:"registration_client_uri"`
	ClientMetadata
}

// Handler serves RFC 7591 registration at the path of Config.Endpoint and RFC
// 7592 management below it. Safe for concurrent use.
type Handler struct {
	store     storage.ClientStore
	policy    *compiled
	open      bool
	iats      [][]byte
	secrets   *secret.Hasher
	regTokens *secret.Hasher
	iatHasher *secret.Hasher
	limiter   *limiter
	clientKey func(*http.Request) string
	endpoint  string
	path      string
	secretTTL time.Duration
	neverUsed time.Duration
	idle      time.Duration
	log       *slog.Logger
	now       func() time.Time
}

// New checks cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("dcr: Config.Store is required")
	}
	ep, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	pol := cfg.Policy
	comp, err := compileGrants(pol.Scopes, pol.Resources, pol.RedirectHostAllow, pol.RedirectHostDeny,
		pol.AllowClientCredentials, pol.MaxBodyBytes, pol.MaxRedirectURIs, pol.MaxStringLength)
	if err != nil {
		return nil, err
	}
	if err := comp.setForceConfidential(pol.ForceConfidentialRedirectURIs); err != nil {
		return nil, err
	}
	clientKey := cfg.ClientAddr
	if clientKey == nil {
		res, err := clientaddr.New(pol.TrustedProxies)
		if err != nil {
			return nil, fmt.Errorf("dcr: Policy.TrustedProxies: %w", err)
		}
		clientKey = res.Key
	}
	h := &Handler{store: cfg.Store, policy: comp, open: pol.Open, endpoint: ep.String(), path: ep.Path,
		secretTTL: pol.SecretLifetime, log: cfg.Logger, now: cfg.Now}
	if h.secrets, err = secret.NewHasher(cfg.Secret, PurposeClientSecret); err != nil {
		return nil, fmt.Errorf("dcr: Config.Secret: %w", err)
	}
	h.regTokens, _ = secret.NewHasher(cfg.Secret, PurposeRegistrationToken)
	h.iatHasher, _ = secret.NewHasher(cfg.Secret, purposeInitialAccessToken)
	for _, t := range pol.InitialAccessTokens {
		if t == "" {
			return nil, errors.New("dcr: an initial access token is empty")
		}
		h.iats = append(h.iats, h.iatHasher.Hash(t))
	}
	counters := cfg.Counters
	if counters == nil {
		counters = memory.New()
	}
	h.limiter = newLimiter(pol.RateLimit, counters)
	h.clientKey = clientKey
	h.neverUsed = defaultDuration(pol.ReapNeverUsedAfter, 24*time.Hour)
	h.idle = defaultDuration(pol.ReapIdleAfter, 90*24*time.Hour)
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h, nil
}

func defaultDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Path is the registration endpoint's path (e.g. "/register"). Mount the
// handler at Path and Path+"/" (see Mount).
func (h *Handler) Path() string { return h.path }

// Mount registers h on mux at Path() and below it.
func (h *Handler) Mount(mux *http.ServeMux) {
	mux.Handle(h.path, h)
	mux.Handle(h.path+"/", h)
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// CORS: browser-based clients (MCP Inspector) register from other origins.
	// No cookies are involved, so any origin may call.
	hd.Set("Access-Control-Allow-Origin", "*")
	hd.Set("Access-Control-Expose-Headers", "WWW-Authenticate, Retry-After, Location")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Pragma", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")

	var id string
	switch {
	case r.URL.Path == h.path:
	case strings.HasPrefix(r.URL.Path, h.path+"/") && len(r.URL.Path) > len(h.path)+1:
		id = r.URL.Path[len(h.path)+1:]
	default:
		writeError(w, http.StatusNotFound, CodeInvalidRequest, "no such endpoint")
		return
	}
	if r.Method == http.MethodOptions {
		if id == "" {
			hd.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		} else {
			hd.Set("Access-Control-Allow-Methods", "GET, PUT, DELETE, OPTIONS")
		}
		hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		hd.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if id == "" {
		if r.Method != http.MethodPost {
			hd.Set("Allow", "POST, OPTIONS")
			writeError(w, http.StatusMethodNotAllowed, CodeInvalidRequest, "use POST to register a client")
			return
		}
		h.register(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet:
		h.read(w, r, id)
	case http.MethodPut:
		h.update(w, r, id)
	case http.MethodDelete:
		h.delete(w, r, id)
	default:
		hd.Set("Allow", "GET, PUT, DELETE, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, CodeInvalidRequest, "use GET, PUT or DELETE on a registration")
	}
}

// register is RFC 7591 §3.1.
func (h *Handler) register(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	addr := h.clientKey(r)
	ok, wait, err := h.limiter.allow(r.Context(), addr, now)
	if err != nil {
		h.log.ErrorContext(r.Context(), "dcr: rate limit counter", "err", err)
		writeError(w, http.StatusServiceUnavailable, CodeTemporarilyUnavail, "registration is temporarily unavailable; retry later")
		return
	}
	if !ok {
		secs := int(wait/time.Second) + 1
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, CodeTemporarilyUnavail, "too many registrations from this address; retry later")
		h.audit(r.Context(), "client.registration_limited", "addr", addr)
		return
	}
	if !h.open && !h.checkInitialAccessToken(r) {
		writeBearerError(w, bearerToken(r) != "", "registration requires a valid initial access token (RFC 7591 §3)")
		return
	}
	md, _, merr := h.readMetadata(w, r)
	if merr != nil {
		writeError(w, http.StatusBadRequest, merr.Code, merr.Description)
		return
	}
	accepted, merr := h.policy.validate(md, modeDCR)
	if merr != nil {
		writeError(w, http.StatusBadRequest, merr.Code, merr.Description)
		return
	}
	c, info, err := h.newClient(accepted, now)
	if err != nil {
		h.serverError(w, "build client", err)
		return
	}
	for attempt := 0; ; attempt++ {
		err = h.store.CreateClient(r.Context(), c)
		if !errors.Is(err, storage.ErrAlreadyExists) || attempt == 2 {
			break
		}
		c.ID = newClientID()
		info.ClientID = c.ID
		info.RegistrationClientURI = h.clientURI(c.ID)
	}
	if err != nil {
		h.serverError(w, "create client", err)
		return
	}
	h.audit(r.Context(), "client.registered", "client_id", c.ID, "client_name", c.Name,
		"auth_method", c.TokenEndpointAuthMethod, "redirect_uris", len(c.RedirectURIs), "addr", addr)
	w.Header().Set("Location", info.RegistrationClientURI)
	writeJSON(w, http.StatusCreated, info)
}

func (h *Handler) newClient(md ClientMetadata, now time.Time) (*storage.Client, *ClientInformation, error) {
	metaJSON, err := json.Marshal(md)
	if err != nil {
		return nil, nil, err
	}
	regToken := secret.Generate()
	c := &storage.Client{
		ID:                    newClientID(),
		RegistrationTokenHash: h.regTokens.Hash(regToken),
		Source:                "dcr",
		CreatedAt:             now,
		UpdatedAt:             now,
	}
	h.policy.applyMetadata(c, md, metaJSON)
	info := &ClientInformation{
		ClientID:                c.ID,
		ClientIDIssuedAt:        now.Unix(),
		RegistrationAccessToken: regToken,
		RegistrationClientURI:   h.clientURI(c.ID),
		ClientMetadata:          md,
	}
	h.issueSecret(c, info, now)
	return c, info, nil
}

// issueSecret gives confidential clients that authenticate with a shared
// secret a new one; other clients get none.
func (h *Handler) issueSecret(c *storage.Client, info *ClientInformation, now time.Time) {
	c.SecretHash, c.SecretExpiresAt = nil, time.Time{}
	if c.TokenEndpointAuthMethod != AuthClientSecretBasic && c.TokenEndpointAuthMethod != AuthClientSecretPost {
		return
	}
	s := secret.Generate()
	c.SecretHash = h.secrets.Hash(s)
	var exp int64
	if h.secretTTL > 0 {
		c.SecretExpiresAt = now.Add(h.secretTTL)
		exp = c.SecretExpiresAt.Unix()
	}
	info.ClientSecret = s
	info.ClientSecretExpiresAt = &exp
}

func newClientID() string { return "mcp_" + secret.Generate()[:27] }

func (h *Handler) clientURI(id string) string { return h.endpoint + "/" + url.PathEscape(id) }

func (h *Handler) readMetadata(w http.ResponseWriter, r *http.Request) (ClientMetadata, map[string]json.RawMessage, *MetadataError) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.Contains(strings.ToLower(ct), "json") {
		return ClientMetadata{}, nil, badMeta("Content-Type must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.policy.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return ClientMetadata{}, nil, badMeta("request body larger than %d bytes", h.policy.maxBody)
		}
		return ClientMetadata{}, nil, badMeta("request body could not be read")
	}
	return decodeMetadata(body)
}

func (h *Handler) checkInitialAccessToken(r *http.Request) bool {
	tok := bearerToken(r)
	if tok == "" {
		return false
	}
	sum := h.iatHasher.Hash(tok)
	ok := false
	for _, want := range h.iats {
		if hmac.Equal(sum, want) {
			ok = true
		}
	}
	return ok
}

// authorize loads the client a management request names and checks its
// registration access token (RFC 7592 §2). Any failure is 401 invalid_token,
// unknown clients included, so ids cannot be probed.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, id string) *storage.Client {
	tok := bearerToken(r)
	if tok == "" {
		writeBearerError(w, false, "a registration access token is required (RFC 7592 §2)")
		return nil
	}
	c, err := h.store.GetClient(r.Context(), id)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		h.serverError(w, "get client", err)
		return nil
	}
	if err != nil || c.Source != "dcr" || !h.regTokens.Equal(c.RegistrationTokenHash, tok) {
		h.audit(r.Context(), "client.auth_failed", "client_id", id, "path", r.URL.Path)
		writeBearerError(w, true, "the registration access token is not valid for this client")
		return nil
	}
	return c
}

// audit writes one audit event in the shape the AS uses: message "audit",
// attribute "event" (client.registered, client.updated, client.deleted,
// client.registration_limited, client.auth_failed), then the client and
// request facts. Secrets and registration access tokens never appear.
func (h *Handler) audit(ctx context.Context, event string, args ...any) {
	h.log.InfoContext(ctx, "audit", append([]any{"event", event}, args...)...)
}

// read is RFC 7592 §2.1.
func (h *Handler) read(w http.ResponseWriter, r *http.Request, id string) {
	c := h.authorize(w, r, id)
	if c == nil {
		return
	}
	writeJSON(w, http.StatusOK, h.info(c))
}

func (h *Handler) info(c *storage.Client) *ClientInformation {
	var md ClientMetadata
	_ = json.Unmarshal(c.Metadata, &md)
	info := &ClientInformation{
		ClientID:              c.ID,
		ClientIDIssuedAt:      c.CreatedAt.Unix(),
		RegistrationClientURI: h.clientURI(c.ID),
		ClientMetadata:        md,
	}
	if len(c.SecretHash) > 0 {
		var exp int64
		if !c.SecretExpiresAt.IsZero() {
			exp = c.SecretExpiresAt.Unix()
		}
		info.ClientSecretExpiresAt = &exp
	}
	return info
}

// update is RFC 7592 §2.2: the request replaces the metadata; omitted fields
// take their defaults.
func (h *Handler) update(w http.ResponseWriter, r *http.Request, id string) {
	c := h.authorize(w, r, id)
	if c == nil {
		return
	}
	md, raw, merr := h.readMetadata(w, r)
	if merr != nil {
		writeError(w, http.StatusBadRequest, merr.Code, merr.Description)
		return
	}
	for _, f := range []string{"registration_access_token", "registration_client_uri", "client_secret_expires_at", "client_id_issued_at"} {
		if _, ok := raw[f]; ok {
			writeError(w, http.StatusBadRequest, CodeInvalidClientMetadata, f+": must not be sent in an update (RFC 7592 §2.2)")
			return
		}
	}
	var gotID string
	if err := json.Unmarshal(raw["client_id"], &gotID); err != nil || gotID != id {
		writeError(w, http.StatusBadRequest, CodeInvalidClientMetadata, "client_id: must be present and equal this client's id (RFC 7592 §2.2)")
		return
	}
	if rs, ok := raw["client_secret"]; ok {
		var s string
		if err := json.Unmarshal(rs, &s); err != nil || !h.secrets.Equal(c.SecretHash, s) {
			writeError(w, http.StatusBadRequest, CodeInvalidClientMetadata, "client_secret: does not match the issued secret (RFC 7592 §2.2)")
			return
		}
	}
	accepted, merr := h.policy.validate(md, modeDCR)
	if merr != nil {
		writeError(w, http.StatusBadRequest, merr.Code, merr.Description)
		return
	}
	metaJSON, err := json.Marshal(accepted)
	if err != nil {
		h.serverError(w, "marshal metadata", err)
		return
	}
	now := h.now()
	var info *ClientInformation
	tok := bearerToken(r)
	err = h.store.UpdateClient(r.Context(), id, func(old storage.Client) (storage.Client, error) {
		if !h.regTokens.Equal(old.RegistrationTokenHash, tok) {
			return old, storage.ErrNotFound // deleted and re-created meanwhile
		}
		n := old
		h.policy.applyMetadata(&n, accepted, metaJSON)
		n.UpdatedAt = now
		info = h.info(&n)
		needsSecret := n.TokenEndpointAuthMethod == AuthClientSecretBasic || n.TokenEndpointAuthMethod == AuthClientSecretPost
		switch {
		case !needsSecret:
			n.SecretHash, n.SecretExpiresAt = nil, time.Time{}
			info.ClientSecretExpiresAt = nil
		case len(old.SecretHash) == 0:
			// Became confidential: issue its first secret.
			h.issueSecret(&n, info, now)
		}
		return n, nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		writeBearerError(w, true, "the registration access token is not valid for this client")
		return
	}
	if err != nil {
		h.serverError(w, "update client", err)
		return
	}
	h.audit(r.Context(), "client.updated", "client_id", id)
	writeJSON(w, http.StatusOK, info)
}

// delete is RFC 7592 §2.3.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, id string) {
	c := h.authorize(w, r, id)
	if c == nil {
		return
	}
	err := h.store.DeleteClient(r.Context(), id)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		h.serverError(w, "delete client", err)
		return
	}
	h.audit(r.Context(), "client.deleted", "client_id", id)
	w.WriteHeader(http.StatusNoContent)
}

// Reap deletes clients of Source "dcr" and "cimd" that were never used
// Policy.ReapNeverUsedAfter after creation or have been idle longer than
// Policy.ReapIdleAfter, in batches, and returns how many it deleted. The
// server's GC loop calls it periodically; a deleted client that comes back
// gets 401 invalid_client at the token endpoint and registers again.
func (h *Handler) Reap(ctx context.Context, now time.Time) (int, error) {
	var neverUsedBefore, idleBefore time.Time // zero: rule disabled
	if h.neverUsed > 0 {
		neverUsedBefore = now.Add(-h.neverUsed)
	}
	if h.idle > 0 {
		idleBefore = now.Add(-h.idle)
	}
	if neverUsedBefore.IsZero() && idleBefore.IsZero() {
		return 0, nil
	}
	const batch = 500
	total := 0
	for i := 0; i < 1000; i++ {
		n, err := h.store.ReapClients(ctx, neverUsedBefore, idleBefore, batch)
		total += n
		if err != nil {
			return total, err
		}
		if n < batch {
			break
		}
	}
	if total > 0 {
		h.log.Info("dcr: reaped idle clients", "count", total)
	}
	return total, nil
}

func (h *Handler) serverError(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, storage.ErrUnavailable) {
		h.log.Warn("dcr: storage unavailable", "op", what, "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, CodeTemporarilyUnavail, "registration is temporarily unavailable")
		return
	}
	h.log.Error("dcr: internal error", "op", what, "err", err)
	writeError(w, http.StatusInternalServerError, CodeServerError, "internal error")
}

func bearerToken(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if len(a) < 7 || !strings.EqualFold(a[:7], "bearer ") {
		return ""
	}
	return strings.TrimSpace(a[7:])
}

// writeBearerError answers 401 with an RFC 6750 §3 challenge; invalid says
// whether a token was presented (then error="invalid_token").
func writeBearerError(w http.ResponseWriter, invalid bool, desc string) {
	if invalid {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer`)
	}
	writeError(w, http.StatusUnauthorized, CodeInvalidToken, desc)
}

// ErrorResponse is the JSON error body (RFC 7591 §3.2.2, RFC 6749 §5.2).
type ErrorResponse struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, ErrorResponse{Error: code, ErrorDescription: desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// SourceAdmin is the storage.Client Source of clients an operator created
// (Create): the reaper never deletes them.
const SourceAdmin = "admin"

// Create registers a client on an operator's behalf (the admin API,
// `authserver clients create`). The metadata passes the registration
// policy's checks as at RFC 7591 §3.1, without the rate limit and without an
// initial access token, even when registration is closed or disabled. The
// client gets Source SourceAdmin, so it is never reaped, and no registration
// access token (RFC 7592 management is for self-registered clients). The
// returned information holds the generated client secret, shown once.
// Refused metadata is a *MetadataError.
func (h *Handler) Create(ctx context.Context, md ClientMetadata) (*ClientInformation, error) {
	accepted, merr := h.policy.validate(md, modeDCR)
	if merr != nil {
		return nil, merr
	}
	now := h.now()
	c, info, err := h.newClient(accepted, now)
	if err != nil {
		return nil, err
	}
	c.Source, c.RegistrationTokenHash = SourceAdmin, nil
	info.RegistrationAccessToken, info.RegistrationClientURI = "", ""
	for attempt := 0; ; attempt++ {
		err = h.store.CreateClient(ctx, c)
		if !errors.Is(err, storage.ErrAlreadyExists) || attempt == 2 {
			break
		}
		c.ID = newClientID()
		info.ClientID = c.ID
	}
	if err != nil {
		return nil, err
	}
	return info, nil
}
