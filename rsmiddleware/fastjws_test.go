package rsmiddleware

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"
)

// After one token under the authorization server's header has verified,
// the next tokens under the same header bytes take the short path
// (headerCache): it must accept what the full JOSE path accepts for them
// and refuse the rest with ErrInvalidToken, and it refuses a segment whose
// base64url has stray bits (another spelling of the same bytes), so one
// signed token has one spelling.
func TestRememberedHeaderPathRefusesWhatTheFullPathRefuses(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.CacheSize = -1; c.RefreshInterval = time.Nanosecond })
	ctx := context.Background()
	first := ks.mint(ks.claims())
	if _, err := v.Verify(ctx, first); err != nil {
		t.Fatal(err)
	}
	hseg, _, _, _ := splitCompact(first)
	if _, ok := v.headers.get(hseg); !ok {
		t.Fatal("the header of a verified token is not remembered")
	}

	good := ks.mint(ks.claims())
	if h, _, _, _ := splitCompact(good); h != hseg {
		t.Fatal("the key server signs under a different header each time")
	}
	p, err := v.Verify(ctx, good)
	if err != nil || p.Subject != "alice" || p.ClientID != "client-1" {
		t.Fatalf("second token under the remembered header: %+v, %v", p, err)
	}

	_, pseg, sseg, _ := splitCompact(good)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ks.mu.Lock()
	ks.keys["stranger"] = other
	ks.mu.Unlock()
	forged := ks.mintWith("stranger", "at+jwt", ks.claims())
	_, fp, fs, _ := splitCompact(forged)
	expired := ks.claims()
	expired["exp"] = int64(1)
	_, ep, es, _ := splitCompact(ks.mint(expired))
	flip := func(s string) string {
		b := []byte(s)
		if b[5] == 'A' {
			b[5] = 'B'
		} else {
			b[5] = 'A'
		}
		return string(b)
	}
	cases := map[string]string{
		"payload of another token, same signature":        hseg + "." + fp + "." + sseg,
		"signature by another key":                        hseg + "." + fp + "." + fs,
		"payload changed":                                 hseg + "." + flip(pseg) + "." + sseg,
		"signature changed":                               hseg + "." + pseg + "." + flip(sseg),
		"signature with padding":                          good + "==",
		"signature truncated":                             hseg + "." + pseg + "." + sseg[:len(sseg)-2],
		"four segments":                                   good + ".x",
		"empty payload":                                   hseg + ".." + sseg,
		"signed, but expired":                             hseg + "." + ep + "." + es,
		"signature with stray bits in its last character": hseg + "." + pseg + "." + sseg[:len(sseg)-1] + strayBits(sseg[len(sseg)-1:]),
		"payload with a character outside base64url":      hseg + "." + pseg[:10] + "+" + pseg[11:] + "." + sseg,
	}
	for name, tok := range cases {
		if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: Verify = %v, want ErrInvalidToken", name, err)
		}
	}
	if strings.Count(good, ".") != 2 {
		t.Fatal("not a compact JWS")
	}
	// A rotated key signs under another header: the full path verifies it
	// and remembers that header too.
	ks.rotate("k2")
	rotated := ks.mint(ks.claims())
	if _, err := v.Verify(ctx, rotated); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
	if h, _, _, _ := splitCompact(rotated); h == hseg {
		t.Fatal("rotation kept the header")
	} else if _, ok := v.headers.get(h); !ok {
		t.Fatal("the rotated key's header is not remembered")
	}
}

// strayBits spells the last character of a 64-byte signature's base64url
// (2 bits used, 4 unused) with one unused bit set.
func strayBits(c string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.Index(alphabet, c)
	return string(alphabet[i^1])
}

// TestSplitCompact: exactly three segments, any of them possibly empty.
func TestSplitCompact(t *testing.T) {
	for tok, ok := range map[string]bool{
		"a.b.c": true, "a..c": true, ".b.c": true, "a.b.": true,
		"a": false, "a.b": false, "a.b.c.d": false, "a.b..c": false, "a.b.c.": false, "": false,
	} {
		h, p, s, got := splitCompact(tok)
		if got != ok || (ok && h+"."+p+"."+s != tok) || (!ok && h+p+s != "") {
			t.Errorf("splitCompact(%q) = %q, %q, %q, %v; want ok %v", tok, h, p, s, got, ok)
		}
	}
}
