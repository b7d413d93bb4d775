package authflow

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
)

// JTIStore makes each step of a transaction usable once
// (storage.JTIStore).
type JTIStore interface {
	UseJTI(ctx context.Context, id string, expiresAt time.Time) error
}

// Errors of Codec.Open. Each means the browser holds no transaction it may
// go on with; none says why to the person beyond "start again".
var (
	// ErrInvalid: not sealed by this server, altered, or past MaxAge.
	ErrInvalid = errors.New("authflow: not a transaction of this server")
	// ErrOtherSession: another browser session's transaction.
	ErrOtherSession = errors.New("authflow: transaction of another session")
	// ErrExpired: the sealed copy's time is up.
	ErrExpired = errors.New("authflow: transaction expired")
	// ErrUsed: this step of the transaction was used already.
	ErrUsed = errors.New("authflow: transaction step already used")
)

// purpose is the key-derivation purpose of the sealing key.
const purpose = "mcpauth authorization transaction"

// MaxAge bounds a transaction's life however often a refused form shows
// its page again with a fresh copy.
const MaxAge = time.Hour

// maxSealed bounds what Open reads: a transaction sealed by us is far
// smaller.
const maxSealed = 12 << 10

// Codec seals transactions for the browser to carry and opens them again.
// The authorization endpoint and the pages each make one from the same
// secret. It is safe for concurrent use.
type Codec struct {
	sealer *seal.Sealer
	jtis   JTIStore
	ttl    time.Duration
	now    func() time.Time
}

// NewCodec derives the sealing key from secret (at least 32 bytes) with
// HKDF-SHA256. ttl is how long a sealed copy is accepted (zero: 10
// minutes); now is the clock (nil: time.Now).
func NewCodec(secret []byte, jtis JTIStore, ttl time.Duration, now func() time.Time) (*Codec, error) {
	if jtis == nil {
		return nil, errors.New("authflow: a JTIStore is required")
	}
	s, err := seal.New(secret, purpose)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &Codec{sealer: s, jtis: jtis, ttl: ttl, now: now}, nil
}

// New starts a transaction for req, shown with d.
func (c *Codec) New(req Request, d Display) *Transaction {
	req.RequestedAt = c.now().Unix()
	return &Transaction{ID: randomID(), Request: req, Display: d}
}

// Seal returns t sealed for the browser, accepted until the codec's ttl
// from now, for the session t.Session only.
func (c *Codec) Seal(t *Transaction) (string, error) {
	cp := *t
	cp.Step = randomID()
	cp.Expires = c.now().Add(c.ttl).Unix()
	b, err := json.Marshal(&cp)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(c.sealer.Seal(b, []byte(purpose))), nil
}

// Open reads a sealed transaction for the browser session sessionID and
// spends its step: a second Open of the same copy is ErrUsed. Only a
// failing JTIStore gives another error than those above.
func (c *Codec) Open(ctx context.Context, sealed, sessionID string) (*Transaction, error) {
	t, err := c.Peek(sealed, sessionID)
	if err != nil {
		return nil, err
	}
	switch err := c.jtis.UseJTI(ctx, "authz-txn:"+t.ID+":"+t.Step, time.Unix(t.Expires, 0)); {
	case errors.Is(err, storage.ErrAlreadyUsed):
		return nil, ErrUsed
	case err != nil:
		return nil, err
	}
	return t, nil
}

// Peek reads a sealed transaction for sessionID without spending its
// step. With ErrExpired or ErrOtherSession it still returns the
// transaction, so that a refused form's page can be shown again, with a
// fresh copy, for this session; with ErrInvalid it returns nil.
func (c *Codec) Peek(sealed, sessionID string) (*Transaction, error) {
	if sealed == "" || len(sealed) > maxSealed {
		return nil, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		return nil, ErrInvalid
	}
	b, err := c.sealer.Open(raw, []byte(purpose))
	if err != nil {
		return nil, ErrInvalid
	}
	var t Transaction
	now := c.now()
	if err := json.Unmarshal(b, &t); err != nil || t.ID == "" || t.Step == "" || !now.Before(time.Unix(t.Request.RequestedAt, 0).Add(MaxAge)) {
		return nil, ErrInvalid
	}
	if sessionID == "" || t.Session != sessionID {
		return &t, ErrOtherSession
	}
	if now.Unix() >= t.Expires {
		return &t, ErrExpired
	}
	return &t, nil
}

func randomID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("authflow: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
