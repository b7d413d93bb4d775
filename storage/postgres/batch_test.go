package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// queueInserts holds every insert slot, starts one CreateToken per token,
// waits until all of them are queued, takes the queue, calls taken and
// hands the queue on as one batch, the way a returning insert does. It
// returns each call's error.
func queueInserts(t *testing.T, s *Store, ctxs []context.Context, toks []*storage.Token, taken func()) []error {
	t.Helper()
	b := &s.inserts
	b.mu.Lock()
	if b.running != 0 || len(b.queue) != 0 {
		b.mu.Unlock()
		t.Fatal("inserts under way before the test")
	}
	b.running = maxInsertFlushers
	b.mu.Unlock()
	errs := make([]error, len(toks))
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() { errs[i] = s.CreateToken(ctxs[i], toks[i]) })
	}
	for {
		b.mu.Lock()
		n := len(b.queue)
		b.mu.Unlock()
		if n == len(toks) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.mu.Lock()
	next := b.queue
	b.queue = nil
	b.mu.Unlock()
	if taken != nil {
		taken()
	}
	next[0].done <- insertResult{lead: next}
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	// The batch ran in one of the test's slots and gave it back.
	if b.running != maxInsertFlushers-1 || len(b.queue) != 0 {
		t.Fatalf("after the batch: %d inserts running, %d queued; want the %d other slots held by the test and none", b.running, len(b.queue), maxInsertFlushers-1)
	}
	b.running = 0
	return errs
}

func batchToken(i int, at time.Time) *storage.Token {
	tok := &storage.Token{
		Kind: storage.KindAccessToken, Signature: fmt.Sprintf("batch-%02d", i), RequestID: fmt.Sprintf("req-%d", i),
		ClientID: "client", Subject: fmt.Sprintf("sub-%d", i%3), Active: i%2 == 0,
		CreatedAt: at, ExpiresAt: at.Add(time.Hour), Data: []byte{byte(i), 0, 0xff}, StatusIndex: int64(i),
	}
	switch i % 4 {
	case 1:
		tok.RotatedAt = at.Add(time.Minute)
	case 2:
		tok.Data, tok.CreatedAt = nil, time.Time{}
	case 3:
		tok.Subject, tok.ExpiresAt = "", time.Time{}
	}
	return tok
}

// Fails if a grouped insert stores a field differently from a single
// insert, or if one row's fault fails the other rows of its batch.
func TestGroupedTokenInsertsWriteEachRowAsASingleInsertWould(t *testing.T) {
	pgtest.BaseDSN(t)
	dsn, _ := pgtest.Schema(t)
	s, err := Open(context.Background(), dsn, Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Microsecond)

	readBack := func(t *testing.T, toks []*storage.Token) {
		t.Helper()
		for _, want := range toks {
			got, err := s.GetToken(ctx, want.Kind, want.Signature)
			if err != nil {
				t.Fatalf("GetToken %s: %v", want.Signature, err)
			}
			if got.RequestID != want.RequestID || got.ClientID != want.ClientID || got.Subject != want.Subject ||
				got.Active != want.Active || !got.CreatedAt.Equal(want.CreatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) ||
				!got.RotatedAt.Equal(want.RotatedAt) || !bytes.Equal(got.Data, want.Data) || (got.Data == nil) != (want.Data == nil) ||
				got.StatusIndex != want.StatusIndex {
				t.Errorf("%s read back as %+v, want %+v", want.Signature, got, want)
			}
		}
	}

	t.Run("every field of every row", func(t *testing.T) {
		var toks []*storage.Token
		var ctxs []context.Context
		for i := range 12 {
			toks = append(toks, batchToken(i, at))
			ctxs = append(ctxs, ctx)
		}
		for i, err := range queueInserts(t, s, ctxs, toks, nil) {
			if err != nil {
				t.Fatalf("CreateToken %d: %v", i, err)
			}
		}
		readBack(t, toks)
	})

	t.Run("every field of every row inserted together in a transaction", func(t *testing.T) {
		tx, err := s.BeginTX(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var toks []*storage.Token
		for i := 50; i < 58; i++ {
			tok := batchToken(i, at)
			if err := s.CreateToken(tx, tok); err != nil {
				t.Fatal(err)
			}
			toks = append(toks, tok)
		}
		if err := s.Commit(tx); err != nil {
			t.Fatal(err)
		}
		readBack(t, toks)
	})

	t.Run("a duplicate and an unstorable string fail alone", func(t *testing.T) {
		bad := batchToken(20, at)
		bad.Signature = "nul\x00"
		toks := []*storage.Token{batchToken(21, at), batchToken(0, at), bad, batchToken(22, at)}
		errs := queueInserts(t, s, []context.Context{ctx, ctx, ctx, ctx}, toks, nil)
		if errs[0] != nil || errs[3] != nil {
			t.Fatalf("the good rows of the batch: %v, %v", errs[0], errs[3])
		}
		if !errors.Is(errs[1], storage.ErrAlreadyExists) {
			t.Errorf("duplicate signature: %v, want ErrAlreadyExists", errs[1])
		}
		if errs[2] == nil {
			t.Error("a signature with NUL was accepted")
		}
		for _, i := range []int{21, 22} {
			if _, err := s.GetToken(ctx, storage.KindAccessToken, batchToken(i, at).Signature); err != nil {
				t.Errorf("token %d: %v", i, err)
			}
		}
	})

	t.Run("a caller that gave up once its row was taken is not written, the others are", func(t *testing.T) {
		gone, cancel := context.WithCancel(ctx)
		defer cancel()
		toks := []*storage.Token{batchToken(30, at), batchToken(31, at), batchToken(32, at)}
		// Whichever caller is first in the queue sends the batch, even the
		// one that gave up.
		errs := queueInserts(t, s, []context.Context{ctx, gone, ctx}, toks, cancel)
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], context.Canceled) {
			t.Fatalf("errors %v, want nil, context.Canceled, nil", errs)
		}
		for i, want := range []error{nil, storage.ErrNotFound, nil} {
			if _, err := s.GetToken(ctx, storage.KindAccessToken, toks[i].Signature); !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", toks[i].Signature, err, want)
			}
		}
	})

	t.Run("the caller that fills a batch sends it without waiting", func(t *testing.T) {
		b := &s.inserts
		b.mu.Lock()
		b.running = insertFlushers // the inserts that would otherwise go first
		b.mu.Unlock()
		errs := make([]error, fullInsertBatch)
		var wg sync.WaitGroup
		for i := range fullInsertBatch {
			wg.Go(func() { errs[i] = s.CreateToken(ctx, batchToken(60+i, at)) })
		}
		wg.Wait()
		b.mu.Lock()
		running, queued := b.running, len(b.queue)
		b.running = 0
		b.mu.Unlock()
		if running != insertFlushers || queued != 0 {
			t.Fatalf("after the batch: %d inserts running, %d queued; want the %d held by the test and none", running, queued, insertFlushers)
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("CreateToken %d: %v", i, err)
			}
			if _, err := s.GetToken(ctx, storage.KindAccessToken, batchToken(60+i, at).Signature); err != nil {
				t.Fatalf("token %d: %v", 60+i, err)
			}
		}
	})

	t.Run("a caller that gives up while queued leaves the queue", func(t *testing.T) {
		b := &s.inserts
		b.mu.Lock()
		b.running = maxInsertFlushers
		b.mu.Unlock()
		gone, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.CreateToken(gone, batchToken(40, at)) }()
		for {
			b.mu.Lock()
			n := len(b.queue)
			b.mu.Unlock()
			if n == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		err := <-done
		b.mu.Lock()
		n := len(b.queue)
		b.running = 0
		b.mu.Unlock()
		if !errors.Is(err, context.Canceled) || n != 0 {
			t.Fatalf("CreateToken = %v with %d left queued, want context.Canceled and none", err, n)
		}
		if _, err := s.GetToken(ctx, storage.KindAccessToken, batchToken(40, at).Signature); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("the token of the caller that left: %v, want ErrNotFound", err)
		}
	})
}

// Fails if a grouped insert answers a caller with another caller's
// outcome, tells a caller its row was written when it was not, lets two
// callers of one signature both succeed, or leaves a slot or a queued
// caller behind: many callers race for few connections, three to a
// signature, a third of them giving up at once.
func TestGroupedTokenInsertsAnswerEachCallerItsOwnRow(t *testing.T) {
	pgtest.BaseDSN(t)
	dsn, _ := pgtest.Schema(t)
	s, err := Open(context.Background(), dsn, Options{MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Microsecond)
	const sigs, per = 120, 3
	type call struct {
		tok  *storage.Token
		gone bool
		err  error
	}
	calls := make([]call, sigs*per)
	var wg sync.WaitGroup
	for i := range calls {
		c := &calls[i]
		c.tok = batchToken(i/per, at)
		c.tok.Signature = fmt.Sprintf("race-%03d", i/per)
		c.tok.RequestID = fmt.Sprintf("caller-%d", i) // whose row was written
		c.gone = i%3 == 1
		cctx, cancel := context.WithCancel(ctx)
		wg.Go(func() {
			defer cancel()
			if c.gone {
				go cancel()
			}
			c.err = s.CreateToken(cctx, c.tok)
		})
	}
	wg.Wait()
	for sig := range sigs {
		got, gerr := s.GetToken(ctx, storage.KindAccessToken, fmt.Sprintf("race-%03d", sig))
		var ok []int
		for j := range per {
			i := sig*per + j
			switch c := calls[i]; {
			case c.err == nil:
				ok = append(ok, i)
			case errors.Is(c.err, storage.ErrAlreadyExists):
				if gerr != nil {
					t.Errorf("caller %d: ErrAlreadyExists, but no row: %v", i, gerr)
				}
			case errors.Is(c.err, context.Canceled) && c.gone:
			default:
				t.Errorf("caller %d (gave up %v): %v", i, c.gone, c.err)
			}
		}
		switch {
		case len(ok) > 1:
			t.Errorf("signature %d: callers %v all told their row was written", sig, ok)
		case len(ok) == 1 && gerr != nil:
			t.Errorf("signature %d: caller %d told its row was written, but: %v", sig, ok[0], gerr)
		case len(ok) == 1 && got.RequestID != calls[ok[0]].tok.RequestID:
			t.Errorf("signature %d: caller %d told its row was written, but the row is %s's", sig, ok[0], got.RequestID)
		case len(ok) == 0 && gerr == nil && !calls[sig*per+1].gone:
			t.Errorf("signature %d: a row written that no caller was told of", sig)
		}
	}
	b := &s.inserts
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running != 0 || len(b.queue) != 0 {
		t.Fatalf("after every caller returned: %d inserts running, %d queued", b.running, len(b.queue))
	}
}
