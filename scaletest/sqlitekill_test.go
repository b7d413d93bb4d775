package scaletest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// registration is the part of an RFC 7591 §3.2.1 answer kept here.
type registration struct {
	ClientID                string `json:"client_id"`
	ClientSecret            string `json:"client_secret"`
	RegistrationAccessToken string `json:"registration_access_token"`
	RegistrationClientURI   string `json:"registration_client_uri"`
}

// acked is what the server acknowledged: registrations answered 201 and
// tokens answered 200, each read in full.
type acked struct {
	mu      sync.Mutex
	clients []registration
	tokens  []string
	regs    atomic.Int64
}

// write drives registrations and client-credentials issuance at in until
// stop is closed; errors (the process is killed under it) are expected and
// not acknowledged.
func (ak *acked) write(in *instance, stop <-chan struct{}, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := in.client()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if w%3 == 2 {
					a, err := postWith(c, in.issuer+"/token", url.Values{"grant_type": {"client_credentials"}}, botID, botSecret)
					if err == nil && a.status == http.StatusOK && a.AccessToken != "" {
						ak.mu.Lock()
						ak.tokens = append(ak.tokens, a.AccessToken)
						ak.mu.Unlock()
					}
					continue
				}
				body := fmt.Sprintf(`{"client_name":"kill test %d-%d","grant_types":["client_credentials"],"token_endpoint_auth_method":"client_secret_basic"}`, w, n)
				resp, err := c.Post(in.issuer+"/register", "application/json", strings.NewReader(body))
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				var r registration
				if err == nil && resp.StatusCode == http.StatusCreated && json.Unmarshal(b, &r) == nil && r.ClientID != "" {
					ak.mu.Lock()
					ak.clients = append(ak.clients, r)
					ak.mu.Unlock()
					ak.regs.Add(1)
				}
			}
		}()
	}
	return &wg
}

func TestSQLiteKilledDuringWritesKeepsWhatItAcknowledged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := newInstance(t, conf{storage: "sqlite:" + filepath.Join(dir, "auth.db")})
	ak := &acked{}
	for round := 0; round < 2; round++ {
		if !in.start(t) {
			t.FailNow()
		}
		stop := make(chan struct{})
		wg := ak.write(in, stop, 12)
		target := ak.regs.Load() + 150
		waitFor(t, 60*time.Second, "registrations acknowledged", func() bool { return ak.regs.Load() >= target })
		in.kill(t) // SIGKILL while the writers are still writing
		close(stop)
		wg.Wait()
	}
	if !in.start(t) {
		t.FailNow()
	}
	ak.mu.Lock()
	defer ak.mu.Unlock()
	t.Logf("acknowledged before the kills: %d registrations, %d tokens", len(ak.clients), len(ak.tokens))

	c := in.client()
	for i, r := range ak.clients {
		// RFC 7592 §2.1 read with the registration access token.
		req, _ := http.NewRequest(http.MethodGet, r.RegistrationClientURI, nil)
		req.Header.Set("Authorization", "Bearer "+r.RegistrationAccessToken)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("registration %d of %d (%s), acknowledged with 201 before a SIGKILL, reads %s after restart", i, len(ak.clients), r.ClientID, resp.Status)
		}
		// Every tenth client also authenticates at /token with its secret.
		if i%10 == 0 {
			a, err := postWith(c, in.issuer+"/token", url.Values{"grant_type": {"client_credentials"}}, r.ClientID, r.ClientSecret)
			if err != nil || a.status != http.StatusOK {
				t.Fatalf("registered client %s after restart: %v %d %s", r.ClientID, err, a.status, a.raw)
			}
		}
	}
	for i, tok := range ak.tokens {
		if !in.introspect(t, tok) {
			t.Fatalf("token %d of %d, acknowledged with 200 before a SIGKILL, is not active after restart", i, len(ak.tokens))
		}
	}
}
