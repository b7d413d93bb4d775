// Package load drives an authorization server's token and introspection
// endpoints over real HTTP with a fixed number of concurrent keep-alive
// connections and reports throughput and latency. It is the engine of
// cmd/loadgen and of the scaletest benchmarks.
//
// It only talks to loopback addresses: it is a measuring tool for a server on
// the same machine, not a way to load somebody else's service.
//
// Grants measured:
//   - client_credentials (RFC 6749 §4.4), client_secret_basic (§2.3.1);
//   - authorization_code (RFC 6749 §4.1.3 with PKCE, RFC 7636 §4.5): the codes
//     are minted first, in a setup phase that is not timed, through the real
//     /authorize endpoint: one login and consent through the server's HTML
//     pages, then one /authorize per code with the session cookie and the
//     remembered consent; the timed phase redeems each code once;
//   - refresh_token (RFC 6749 §6): one grant per connection is set up through
//     the code flow; each connection then rotates its own chain (every answer
//     carries the next refresh token, RFC 9700 §4.14.2);
//   - introspection (RFC 7662 §2.1) of one active access token, authenticated
//     as a confidential client.
package load

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Grant names what is measured.
type Grant string

// Grants.
const (
	ClientCredentials Grant = "client_credentials"
	AuthorizationCode Grant = "authorization_code"
	Refresh           Grant = "refresh_token"
	Introspection     Grant = "introspection"
)

// Config describes one load run. Issuer and Grant are required.
type Config struct {
	// Issuer is the AS issuer; the endpoints are read from its RFC 8414
	// metadata (/.well-known/oauth-authorization-server).
	Issuer string
	// Connect, when set, is the host:port every connection dials instead of
	// the issuer's host (several instances behind one issuer). It must be a
	// loopback address.
	Connect string
	Grant   Grant
	// Connections is the number of concurrent connections (and requests in
	// flight). Zero value: 32.
	Connections int
	// Requests is how many timed requests to send in all. When zero, the
	// run lasts Duration. Required for AuthorizationCode (the codes are
	// minted beforehand).
	Requests int
	// Duration bounds the timed phase when Requests is zero. Zero value: 10 s.
	Duration time.Duration
	// ClientID and ClientSecret: the confidential client of client_credentials
	// and the caller of introspection (client_secret_basic).
	ClientID, ClientSecret string
	// Scope and Resource (RFC 8707) sent with token and authorization
	// requests; empty: not sent.
	Scope, Resource string
	// PublicClientID and RedirectURI: the public client of the code and
	// refresh grants; Username and Password log in on the server's pages.
	PublicClientID, RedirectURI string
	Username, Password          string
	// IntrospectPerson makes Introspection introspect the access token of
	// a person's grant (one code flow as Username) rather than a
	// client-credentials token, so that every request checks the person
	// too (their record, whether they are still active).
	IntrospectPerson bool
	// Timeout per request. Zero value: 30 s.
	Timeout time.Duration
	// Ready, when set, is called once after the setup phase, right before
	// the timed phase starts (to snapshot server-side counters).
	Ready func()
}

// Result is what one run measured.
type Result struct {
	Grant       Grant
	Connections int
	Requests    int // timed requests sent
	Errors      int // transport errors and answers that were not a success
	// Status counts answers by HTTP status (0: transport error).
	Status  map[int]int
	Elapsed time.Duration
	// PerSecond is successful requests per second of wall-clock time.
	PerSecond     float64
	P50, P99, Max time.Duration
	// FirstError describes the first failure, for diagnosis.
	FirstError string
}

// String is a one-line human summary.
func (r *Result) String() string {
	codes := make([]int, 0, len(r.Status))
	for c := range r.Status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var st []string
	for _, c := range codes {
		st = append(st, fmt.Sprintf("%d:%d", c, r.Status[c]))
	}
	s := fmt.Sprintf("%s: %d requests over %d connections in %v: %.0f/s, p50 %v, p99 %v, max %v, errors %d (status %s)",
		r.Grant, r.Requests, r.Connections, r.Elapsed.Round(time.Millisecond), r.PerSecond,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond),
		r.Errors, strings.Join(st, " "))
	if r.FirstError != "" {
		s += "; first error: " + r.FirstError
	}
	return s
}

// ErrNotLoopback is returned for a target that is not a loopback address.
var ErrNotLoopback = errors.New("load: only loopback targets (127.0.0.0/8, ::1, localhost) may be loaded")

// checkLoopback accepts loopback IP literals and "localhost".
func checkLoopback(hostport string) error {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %q", ErrNotLoopback, hostport)
	}
	return nil
}

// endpoints are the parts of the RFC 8414 metadata used here.
type endpoints struct {
	Issuer        string `json:"issuer"`
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
	Introspection string `json:"introspection_endpoint"`
}

// runner holds what the workers share.
type runner struct {
	cfg    Config
	client *http.Client
	ep     endpoints
}

func (c *Config) defaults() error {
	if c.Connections <= 0 {
		c.Connections = 32
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("load: issuer %q is not an http(s) URL", c.Issuer)
	}
	if c.Connect != "" {
		if err := checkLoopback(c.Connect); err != nil {
			return err
		}
	} else if err := checkLoopback(u.Host); err != nil {
		return err
	}
	switch c.Grant {
	case ClientCredentials, Introspection:
		if c.ClientID == "" || c.ClientSecret == "" {
			return fmt.Errorf("load: %s needs a client id and secret", c.Grant)
		}
		if c.IntrospectPerson && (c.PublicClientID == "" || c.RedirectURI == "" || c.Username == "" || c.Password == "") {
			return errors.New("load: introspecting a person's token needs a public client id, redirect URI, username and password")
		}
	case AuthorizationCode, Refresh:
		if c.PublicClientID == "" || c.RedirectURI == "" || c.Username == "" || c.Password == "" {
			return fmt.Errorf("load: %s needs a public client id, redirect URI, username and password", c.Grant)
		}
		if c.Grant == AuthorizationCode && c.Requests <= 0 {
			return errors.New("load: authorization_code needs a request count (codes are minted before the timed phase)")
		}
	default:
		return fmt.Errorf("load: unknown grant %q", c.Grant)
	}
	return nil
}

func newClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		MaxIdleConns:        cfg.Connections,
		MaxIdleConnsPerHost: cfg.Connections,
		MaxConnsPerHost:     cfg.Connections,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if cfg.Connect != "" {
				addr = cfg.Connect
			}
			if err := checkLoopback(addr); err != nil {
				return nil, err
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	return &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Run sets up what the grant needs, then sends the timed requests and
// returns the measurements. A failed setup is an error; failed timed
// requests are counted in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, client: newClient(cfg)}
	defer r.client.CloseIdleConnections()
	if err := r.discover(ctx); err != nil {
		return nil, err
	}

	// Setup: one job per timed request (codes) or per connection (refresh
	// chains, the introspected token).
	var jobs chan Code
	var chains []string
	switch cfg.Grant {
	case AuthorizationCode:
		codes, err := r.mintCodes(ctx, cfg.Requests)
		if err != nil {
			return nil, err
		}
		jobs = make(chan Code, len(codes))
		for _, c := range codes {
			jobs <- c
		}
		close(jobs)
	case Refresh:
		var err error
		chains, err = r.refreshTokens(ctx, cfg.Connections)
		if err != nil {
			return nil, err
		}
	case Introspection:
		tok, err := r.introspected(ctx)
		if err != nil {
			return nil, fmt.Errorf("load: getting the token to introspect: %w", err)
		}
		chains = []string{tok}
	}

	res := &Result{Grant: cfg.Grant, Connections: cfg.Connections, Status: map[int]int{}}
	var (
		mu        sync.Mutex
		lat       []time.Duration
		sent      atomic.Int64
		wg        sync.WaitGroup
		deadline  = time.Now().Add(cfg.Duration)
		byRequest = cfg.Requests > 0
	)
	take := func() bool {
		if byRequest {
			return sent.Add(1) <= int64(cfg.Requests)
		}
		return time.Now().Before(deadline)
	}
	if cfg.Ready != nil {
		cfg.Ready()
	}
	start := time.Now()
	for w := 0; w < cfg.Connections; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			status := map[int]int{}
			var errs int
			var firstErr string
			var chain string
			if cfg.Grant == Refresh {
				chain = chains[w]
			} else if cfg.Grant == Introspection {
				chain = chains[0]
			}
			for ctx.Err() == nil {
				var code Code
				if cfg.Grant == AuthorizationCode {
					var ok bool
					if code, ok = <-jobs; !ok {
						break
					}
				} else if !take() {
					break
				}
				t0 := time.Now()
				st, next, err := r.one(ctx, code, chain)
				mine = append(mine, time.Since(t0))
				status[st]++
				if err != nil {
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
					if cfg.Grant == Refresh && st == 0 {
						continue
					}
				}
				if cfg.Grant == Refresh && next != "" {
					chain = next
				}
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			for k, v := range status {
				res.Status[k] += v
			}
			res.Errors += errs
			if res.FirstError == "" {
				res.FirstError = firstErr
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Requests = len(lat)
	if res.Elapsed > 0 {
		res.PerSecond = float64(res.Requests-res.Errors) / res.Elapsed.Seconds()
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		res.P50 = lat[n*50/100]
		res.P99 = lat[min(n-1, n*99/100)]
		res.Max = lat[n-1]
	}
	return res, ctx.Err()
}

func (r *runner) discover(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(r.cfg.Issuer, "/")+"/.well-known/oauth-authorization-server", nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("load: metadata: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("load: metadata: %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r.ep); err != nil {
		return fmt.Errorf("load: metadata: %w", err)
	}
	if r.ep.Token == "" {
		return errors.New("load: metadata has no token_endpoint")
	}
	return nil
}

// tokenAnswer is the part of an RFC 6749 §5.1 answer checked here.
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	Active       *bool  `json:"active"`
	Error        string `json:"error"`
}

// post sends a form and decodes the JSON answer. status 0 means a
// transport error.
func (r *runner) post(ctx context.Context, endpoint string, form url.Values, basic bool) (int, tokenAnswer, error) {
	var ans tokenAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, ans, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		// RFC 6749 §2.3.1: form-encode, then Basic.
		req.SetBasicAuth(url.QueryEscape(r.cfg.ClientID), url.QueryEscape(r.cfg.ClientSecret))
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, ans, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, ans, err
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return resp.StatusCode, ans, fmt.Errorf("%s: not JSON: %.200q", resp.Status, body)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ans, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return resp.StatusCode, ans, nil
}

// one sends one timed request; next is the rotated refresh token.
func (r *runner) one(ctx context.Context, code Code, chain string) (status int, next string, err error) {
	cfg := r.cfg
	switch cfg.Grant {
	case ClientCredentials:
		st, ans, err := r.post(ctx, r.ep.Token, r.ccForm(), true)
		if err == nil && ans.AccessToken == "" {
			err = errors.New("200 without access_token")
		}
		return st, "", err
	case AuthorizationCode:
		st, ans, err := r.redeem(ctx, code)
		if err == nil && ans.AccessToken == "" {
			err = errors.New("200 without access_token")
		}
		return st, "", err
	case Refresh:
		st, ans, err := r.post(ctx, r.ep.Token, url.Values{
			"grant_type": {"refresh_token"}, "refresh_token": {chain}, "client_id": {cfg.PublicClientID},
		}, false)
		if err == nil && (ans.AccessToken == "" || ans.RefreshToken == "") {
			err = errors.New("200 without access_token or refresh_token")
		}
		return st, ans.RefreshToken, err
	case Introspection:
		st, ans, err := r.post(ctx, r.ep.Introspection, url.Values{"token": {chain}}, true)
		if err == nil && (ans.Active == nil || !*ans.Active) {
			err = errors.New("token introspected inactive")
		}
		return st, "", err
	}
	return 0, "", fmt.Errorf("load: unknown grant %q", cfg.Grant)
}

// redeem exchanges a code for tokens as the public client (RFC 6749
// §4.1.3, RFC 7636 §4.5).
func (r *runner) redeem(ctx context.Context, c Code) (int, tokenAnswer, error) {
	return r.post(ctx, r.ep.Token, url.Values{
		"grant_type": {"authorization_code"}, "code": {c.Code}, "redirect_uri": {r.cfg.RedirectURI},
		"client_id": {r.cfg.PublicClientID}, "code_verifier": {c.Verifier},
	}, false)
}

func (r *runner) ccForm() url.Values {
	f := url.Values{"grant_type": {"client_credentials"}}
	if r.cfg.Scope != "" {
		f.Set("scope", r.cfg.Scope)
	}
	if r.cfg.Resource != "" {
		f.Set("resource", r.cfg.Resource)
	}
	return f
}

func (r *runner) clientCredentials(ctx context.Context) (string, error) {
	_, ans, err := r.post(ctx, r.ep.Token, r.ccForm(), true)
	if err != nil {
		return "", err
	}
	return ans.AccessToken, nil
}

// pkce returns a fresh RFC 7636 §4.1 verifier and its S256 challenge (§4.2).
func pkce() (verifier, challenge string) {
	b := make([]byte, 32)
	rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

var (
	formAction  = regexp.MustCompile(`<form method="post" action="([^"]*)">`)
	hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)
)

// session is a logged-in browser: a cookie jar on the shared transport.
type session struct {
	r      *runner
	client *http.Client
}

func (r *runner) login() *session {
	jar, _ := cookiejar.New(nil)
	c := *r.client
	c.Jar = jar
	return &session{r: r, client: &c}
}

// code runs /authorize once and returns the code and its verifier. The
// first call goes through the login and consent forms; later ones ride on
// the session cookie and the remembered consent.
func (s *session) code(ctx context.Context) (Code, error) {
	cfg := s.r.cfg
	verifier, challenge := pkce()
	state := base64.RawURLEncoding.EncodeToString([]byte(verifier[:12]))
	q := url.Values{
		"response_type": {"code"}, "client_id": {cfg.PublicClientID}, "redirect_uri": {cfg.RedirectURI},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "state": {state},
	}
	if cfg.Scope != "" {
		q.Set("scope", cfg.Scope)
	}
	if cfg.Resource != "" {
		q.Set("resource", cfg.Resource)
	}
	authz := s.r.ep.Authorization
	if authz == "" {
		authz = strings.TrimSuffix(cfg.Issuer, "/") + "/authorize"
	}
	u, err := url.Parse(authz + "?" + q.Encode())
	if err != nil {
		return Code{}, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	resp, err := s.client.Do(req)
	if err != nil {
		return Code{}, err
	}
	for step := 0; step < 5; step++ {
		if loc := resp.Header.Get("Location"); resp.StatusCode == http.StatusFound || resp.StatusCode == http.StatusSeeOther {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			cb, err := url.Parse(loc)
			if err != nil {
				return Code{}, err
			}
			if !strings.HasPrefix(loc, cfg.RedirectURI) {
				// A redirect inside the AS (after a form post).
				next, err := resp.Request.URL.Parse(loc)
				if err != nil {
					return Code{}, err
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, next.String(), nil)
				if resp, err = s.client.Do(req); err != nil {
					return Code{}, err
				}
				continue
			}
			if e := cb.Query().Get("error"); e != "" {
				return Code{}, fmt.Errorf("authorization error %s: %s", e, cb.Query().Get("error_description"))
			}
			if cb.Query().Get("state") != state || cb.Query().Get("code") == "" {
				return Code{}, fmt.Errorf("bad authorization response: %s", loc)
			}
			return Code{Code: cb.Query().Get("code"), Verifier: verifier}, nil
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		page := string(b)
		var extra url.Values
		switch {
		case resp.StatusCode >= 500:
			return Code{}, fmt.Errorf("authorization page: %s", resp.Status)
		case strings.Contains(page, `name="password"`):
			extra = url.Values{"username": {cfg.Username}, "password": {cfg.Password}}
		case strings.Contains(page, `value="approve"`):
			extra = url.Values{"action": {"approve"}}
		default:
			return Code{}, fmt.Errorf("unexpected authorization page (%s): %.300s", resp.Status, page)
		}
		if resp, err = s.submit(ctx, resp.Request.URL, page, extra); err != nil {
			return Code{}, err
		}
	}
	return Code{}, errors.New("the authorization flow did not reach the redirect URI")
}

// submit posts the page's form with its hidden fields plus extra.
func (s *session) submit(ctx context.Context, pageURL *url.URL, page string, extra url.Values) (*http.Response, error) {
	m := formAction.FindStringSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("no form on page: %.300s", page)
	}
	action, err := pageURL.Parse(html.UnescapeString(m[1]))
	if err != nil {
		return nil, err
	}
	form := url.Values{}
	for _, h := range hiddenInput.FindAllStringSubmatch(page, -1) {
		form.Set(h[1], html.UnescapeString(h[2]))
	}
	for k, v := range extra {
		form[k] = v
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, action.String(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return s.client.Do(req)
}

// Code is an authorization code and the PKCE verifier that redeems it.
type Code struct {
	Code, Verifier string
}

// MintCodes logs in once on the server's pages as cfg.Username and runs
// /authorize n times for cfg.PublicClientID over cfg.Connections connections,
// returning the codes (not yet redeemed). Grant, Requests and Duration are
// ignored.
func MintCodes(ctx context.Context, cfg Config, n int) ([]Code, error) {
	cfg.Grant, cfg.Requests = Refresh, 0
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, client: newClient(cfg)}
	defer r.client.CloseIdleConnections()
	if err := r.discover(ctx); err != nil {
		return nil, err
	}
	return r.mintCodes(ctx, n)
}

// mintCodes logs in once and mints n codes over the configured connections.
func (r *runner) mintCodes(ctx context.Context, n int) ([]Code, error) {
	s := r.login()
	first, err := s.code(ctx)
	if err != nil {
		return nil, fmt.Errorf("load: setup: first authorization: %w", err)
	}
	codes := []Code{first}
	var mu sync.Mutex
	var firstErr error
	var left atomic.Int64
	left.Store(int64(n - 1))
	var wg sync.WaitGroup
	for w := 0; w < r.cfg.Connections; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				c, err := s.code(ctx)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				codes = append(codes, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("load: setup: minting codes: %w", firstErr)
	}
	return codes, ctx.Err()
}

// introspected is the token Introspection introspects: a client-credentials
// token, or a person's access token (Config.IntrospectPerson).
func (r *runner) introspected(ctx context.Context) (string, error) {
	if !r.cfg.IntrospectPerson {
		return r.clientCredentials(ctx)
	}
	codes, err := r.mintCodes(ctx, 1)
	if err != nil {
		return "", err
	}
	st, ans, err := r.redeem(ctx, codes[0])
	if err != nil {
		return "", err
	}
	if st != http.StatusOK || ans.AccessToken == "" {
		return "", fmt.Errorf("load: setup: redeeming a code: status %d", st)
	}
	return ans.AccessToken, nil
}

// refreshTokens sets up n grants through the code flow and returns their
// refresh tokens.
func (r *runner) refreshTokens(ctx context.Context, n int) ([]string, error) {
	codes, err := r.mintCodes(ctx, n)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, n)
	for _, code := range codes {
		_, ans, err := r.redeem(ctx, code)
		if err != nil {
			return nil, fmt.Errorf("load: setup: redeeming a code: %w", err)
		}
		if ans.RefreshToken == "" {
			return nil, errors.New("load: setup: the code grant issued no refresh token (does the client have the refresh_token grant?)")
		}
		out = append(out, ans.RefreshToken)
	}
	return out, nil
}
