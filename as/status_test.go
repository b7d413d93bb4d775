package as

import (
	"context"
	"encoding/base64"
	"net/url"
	"testing"
	"unsafe"
)

// TestStatusListEncodedOnlyWhenChanged: a rebuild re-signs the list (a new
// iat) but encodes it again only when the store's answer changed: a
// revocation, or a last index past the rounded length. Fails if an
// unchanged list of 1e6 indices costs a compression every second again.
func TestStatusListEncodedOnlyWhenChanged(t *testing.T) {
	h := newHarness(t, nil)
	l := h.as.statusList
	ctx := context.Background()
	_, tok := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	at := tok["access_token"].(string)
	idx := statusIdx(t, h, at)

	first := statusListToken(t, h)
	lst := unsafe.StringData(l.lst)
	h.clock.Advance(statusListCache)
	again := statusListToken(t, h)
	if string(again) == string(first) {
		t.Fatal("the list token was not signed again after the cache time")
	}
	if unsafe.StringData(l.lst) != lst {
		t.Error("an unchanged list was encoded again")
	}
	if _, c := h.claims(string(again)); c["iat"].(float64) <= mustIAT(t, h, first) {
		t.Errorf("iat %v not after the first list's", c["iat"])
	}

	// Another block reserved elsewhere, within the rounded length: the
	// same encoding, and it still covers the block.
	blk, err := h.store.AllocateStatusIndices(ctx, statusBlock)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(statusListCache)
	if n := int64(len(statusBits(t, h)) * 8); n < blk+statusBlock+statusHeadroom {
		t.Errorf("list of %d indices; want at least %d", n, blk+statusBlock+statusHeadroom)
	}
	if unsafe.StringData(l.lst) != lst {
		t.Error("a block within the rounded length made the list encode again")
	}

	// A revocation changes the list: encoded again, with the bit set.
	if resp, body := h.post("/revoke", url.Values{"token": {at}}, "ci-bot", ciSecret); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d %v", resp.StatusCode, body)
	}
	if !bitOf(t, statusBits(t, h), idx) {
		t.Fatal("revoked token's bit not set")
	}
	if unsafe.StringData(l.lst) == lst {
		t.Error("a revocation did not encode the list again")
	}

	// Indices past the rounded length: a longer list.
	lst = unsafe.StringData(l.lst)
	before := len(statusBits(t, h))
	far, err := h.store.AllocateStatusIndices(ctx, statusHeadroom)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(statusListCache)
	bits := statusBits(t, h)
	if len(bits) <= before || int64(len(bits)*8) < far+statusHeadroom+statusHeadroom || !bitOf(t, bits, idx) {
		t.Errorf("after reserving past the list: %d bytes (was %d), want room for %d and the revoked bit kept", len(bits), before, far+2*statusHeadroom)
	}
	if unsafe.StringData(l.lst) == lst {
		t.Error("a longer list was not encoded again")
	}
}

func mustIAT(t *testing.T, h *harness, tok []byte) float64 {
	t.Helper()
	_, c := h.claims(string(tok))
	iat, ok := c["iat"].(float64)
	if !ok {
		t.Fatalf("list token without iat: %v", c)
	}
	return iat
}

// TestStatusListLen: the list covers statusHeadroom indices past the last
// one handed out, in whole multiples of statusHeadroom.
func TestStatusListLen(t *testing.T) {
	for _, last := range []int64{0, 1, statusHeadroom - 2, statusHeadroom - 1, statusHeadroom, 3*statusHeadroom + 7, 1e6} {
		n := statusListLen(last)
		if n < last+1+statusHeadroom || n%statusHeadroom != 0 || n >= last+1+2*statusHeadroom {
			t.Errorf("statusListLen(%d) = %d", last, n)
		}
	}
}

// TestStatusListIsFastDeflate: the served list is compressed at the fastest
// zlib level (RFC 1950 §2.2 FLEVEL 0). Fails if it goes back to
// BestCompression, 16-86 ms of CPU per rebuild at 1e6 indices.
func TestStatusListIsFastDeflate(t *testing.T) {
	h := newHarness(t, nil)
	_, lc := h.claims(string(statusListToken(t, h)))
	raw, err := base64.RawURLEncoding.DecodeString(lc["status_list"].(map[string]any)["lst"].(string))
	if err != nil || len(raw) < 2 {
		t.Fatalf("lst %v %v", raw, err)
	}
	if flevel := raw[1] >> 6; raw[0]&0x0f != 8 || flevel != 0 {
		t.Errorf("zlib header %#x %#x: want deflate at FLEVEL 0", raw[0], raw[1])
	}
}

// TestStatusListAfterARevocationInATransaction: a grant revoked inside a
// transaction (as fosite revokes a replayed refresh token's grant) is in
// the list served right after the commit, even when a request rebuilt the
// list between the revocation and the commit, which could not see it yet.
// Fails if the list is invalidated only when the revocation is made.
func TestStatusListAfterARevocationInATransaction(t *testing.T) {
	store := openSQLite(t)
	h := newHarness(t, func(c *Config) { c.Store = store })
	ctx := context.Background()
	_, tok := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	idx := statusIdx(t, h, tok["access_token"].(string))
	grants, err := h.as.ListGrants(ctx, GrantFilter{Client: "ci-bot"}, 0)
	if err != nil || len(grants) != 1 {
		t.Fatalf("ListGrants: %v %v", grants, err)
	}

	tctx, err := h.as.store.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.as.store.RevokeRefreshToken(tctx, grants[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := h.as.store.RevokeAccessToken(tctx, grants[0].ID); err != nil {
		t.Fatal(err)
	}
	if bitOf(t, statusBits(t, h), idx) {
		t.Fatal("the revocation is in the list before its commit")
	}
	if err := h.as.store.Commit(tctx); err != nil {
		t.Fatal(err)
	}
	if !bitOf(t, statusBits(t, h), idx) {
		t.Error("the list served right after the commit does not have the revocation")
	}
}
