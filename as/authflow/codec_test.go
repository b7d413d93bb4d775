package authflow

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage/memory"
)

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func newCodec(t testing.TB, secret string, clk *clock) *Codec {
	t.Helper()
	c, err := NewCodec([]byte(secret), memory.New(), 5*time.Minute, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const secret = "0123456789abcdef0123456789abcdef-authflow"

func sealedTxn(t testing.TB, c *Codec, sess string) (*Transaction, string) {
	t.Helper()
	tx := c.New(Request{ClientID: "app", RedirectURI: "https://app.example/cb", State: "st", Scopes: []string{"mcp:tools"}, MaxAge: -1},
		Display{ClientName: "App"})
	tx.Session = sess
	s, err := c.Seal(tx)
	if err != nil {
		t.Fatal(err)
	}
	return tx, s
}

func TestCodec(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	c := newCodec(t, secret, clk)
	t.Run("a sealed transaction opens once, for its session", func(t *testing.T) {
		tx, s := sealedTxn(t, c, "s1")
		got, err := c.Open(ctx, s, "s1")
		if err != nil || got.ID != tx.ID || got.Request.State != "st" || got.Display.ClientName != "App" || got.Step == "" {
			t.Fatalf("Open = %+v, %v", got, err)
		}
		if _, err := c.Open(ctx, s, "s1"); !errors.Is(err, ErrUsed) {
			t.Fatalf("second Open: %v, want ErrUsed", err)
		}
		again, err := c.Seal(got)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Open(ctx, again, "s1"); err != nil {
			t.Fatalf("the next step's copy: %v", err)
		}
	})
	t.Run("another session's transaction is refused and shown for what it is", func(t *testing.T) {
		_, s := sealedTxn(t, c, "s1")
		for _, sess := range []string{"s2", ""} {
			if got, err := c.Open(ctx, s, sess); !errors.Is(err, ErrOtherSession) || got != nil {
				t.Fatalf("Open for %q: %v, %v", sess, got, err)
			}
			if got, err := c.Peek(s, sess); !errors.Is(err, ErrOtherSession) || got == nil {
				t.Fatalf("Peek for %q: %v, %v", sess, got, err)
			}
		}
		if _, err := c.Open(ctx, s, "s1"); err != nil {
			t.Fatalf("its own session after the refusals: %v", err)
		}
	})
	t.Run("a copy expires after the ttl", func(t *testing.T) {
		_, s := sealedTxn(t, c, "s1")
		clk.t = clk.t.Add(5*time.Minute - time.Second)
		if _, err := c.Peek(s, "s1"); err != nil {
			t.Fatalf("a second before: %v", err)
		}
		clk.t = clk.t.Add(time.Second)
		if got, err := c.Open(ctx, s, "s1"); !errors.Is(err, ErrExpired) || got != nil {
			t.Fatalf("at the ttl: %v, %v", got, err)
		}
	})
	t.Run("a transaction ends after MaxAge however often it is sealed again", func(t *testing.T) {
		tx, _ := sealedTxn(t, c, "s1")
		clk.t = clk.t.Add(MaxAge - time.Minute)
		s, err := c.Seal(tx)
		if err != nil {
			t.Fatal(err)
		}
		clk.t = clk.t.Add(time.Minute)
		if got, err := c.Open(ctx, s, "s1"); !errors.Is(err, ErrInvalid) || got != nil {
			t.Fatalf("past MaxAge: %v, %v", got, err)
		}
	})
	t.Run("what this server did not seal is invalid", func(t *testing.T) {
		_, s := sealedTxn(t, c, "s1")
		other := newCodec(t, secret+"-other", clk)
		_, foreign := sealedTxn(t, other, "s1")
		raw, _ := base64.RawURLEncoding.DecodeString(s)
		raw[len(raw)-1] ^= 1
		for name, v := range map[string]string{
			"another secret's": foreign, "altered": base64.RawURLEncoding.EncodeToString(raw), "empty": "",
			"not base64url": s[:10] + "*" + s[11:], "oversized": strings.Repeat("A", maxSealed+1),
		} {
			if got, err := c.Open(ctx, v, "s1"); !errors.Is(err, ErrInvalid) || got != nil {
				t.Errorf("%s: %v, %v", name, got, err)
			}
		}
	})
}

func TestNewCodecRefuses(t *testing.T) {
	if _, err := NewCodec([]byte("short"), memory.New(), 0, nil); err == nil {
		t.Error("a short secret was accepted")
	}
	if _, err := NewCodec([]byte(secret), nil, 0, nil); err == nil {
		t.Error("no JTIStore was accepted")
	}
}

func FuzzPeek(f *testing.F) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	c := newCodec(f, secret, clk)
	_, s := sealedTxn(f, c, "s1")
	f.Add(s, "s1")
	f.Add(s[:len(s)-1], "s1")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, sealed, sess string) {
		got, err := c.Peek(sealed, sess)
		switch {
		case err == nil:
			if got == nil || got.Session != sess || got.ID == "" {
				t.Fatalf("accepted %+v for %q", got, sess)
			}
		case errors.Is(err, ErrInvalid):
			if got != nil {
				t.Fatal("ErrInvalid with a transaction")
			}
		case errors.Is(err, ErrOtherSession), errors.Is(err, ErrExpired):
			if got == nil {
				t.Fatalf("%v without the transaction", err)
			}
		default:
			t.Fatalf("error %v", err)
		}
	})
}
