package storagetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// RunBenchmarks measures the operations on the hot path of every grant:
// CreateToken (issuing), GetToken (introspection, refresh lookup),
// TouchClient (every token issued), DeactivateToken and RedeemCode (the
// transaction of a code redemption), each once sequentially and once from
// 16*GOMAXPROCS goroutines. newStore must return an empty store closed when
// b ends.
func RunBenchmarks(b *testing.B, newStore func(b *testing.B) storage.Store) {
	ctx := context.Background()
	tok := func(i int64) *storage.Token {
		t := fullToken(storage.KindAccessToken, fmt.Sprintf("sig-%012d", i), fmt.Sprintf("req-%d", i), time.Now().UTC())
		t.Data = make([]byte, 512) // about the size of a sealed fosite request
		return t
	}
	var seq atomic.Int64
	for _, parallel := range []bool{false, true} {
		suffix := ""
		if parallel {
			suffix = "/parallel"
		}
		run := func(b *testing.B, op func(i int64) error) {
			b.ReportAllocs()
			b.ResetTimer()
			if !parallel {
				for i := 0; i < b.N; i++ {
					if err := op(int64(i)); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			var n atomic.Int64
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := op(n.Add(1) - 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		b.Run("CreateToken"+suffix, func(b *testing.B) {
			s := newStore(b)
			base := seq.Add(1) << 32
			run(b, func(i int64) error { return s.CreateToken(ctx, tok(base+i)) })
		})
		b.Run("GetToken"+suffix, func(b *testing.B) {
			s := newStore(b)
			const n = 1000
			for i := range int64(n) {
				if err := s.CreateToken(ctx, tok(i)); err != nil {
					b.Fatal(err)
				}
			}
			run(b, func(i int64) error {
				_, err := s.GetToken(ctx, storage.KindAccessToken, fmt.Sprintf("sig-%012d", i%n))
				return err
			})
		})
		b.Run("TouchClient"+suffix, func(b *testing.B) {
			// One client issuing every token: the hot row of a
			// client_credentials load.
			s := newStore(b)
			if err := s.CreateClient(ctx, fullClient("hot", time.Now())); err != nil {
				b.Fatal(err)
			}
			run(b, func(i int64) error { return s.TouchClient(ctx, "hot", time.Now()) })
		})
		b.Run("DeactivateToken"+suffix, func(b *testing.B) {
			s := newStore(b)
			for i := range int64(b.N) {
				if err := s.CreateToken(ctx, tok(i)); err != nil {
					b.Fatal(err)
				}
			}
			run(b, func(i int64) error {
				return s.DeactivateToken(ctx, storage.KindAccessToken, fmt.Sprintf("sig-%012d", i))
			})
		})
		b.Run("RedeemCode"+suffix, func(b *testing.B) {
			// The storage side of a code redemption (RFC 6749 §4.1.3):
			// in one transaction the code is deactivated (the point of
			// exclusivity) and the access and refresh tokens are written.
			s := newStore(b)
			for i := range int64(b.N) {
				c := tok(i)
				c.Kind = storage.KindAuthorizeCode
				if err := s.CreateToken(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			run(b, func(i int64) error {
				txCtx, err := s.BeginTX(ctx)
				if err != nil {
					return err
				}
				err = s.DeactivateToken(txCtx, storage.KindAuthorizeCode, fmt.Sprintf("sig-%012d", i))
				if err == nil {
					err = s.CreateToken(txCtx, tok(i))
				}
				if err == nil {
					rt := tok(i)
					rt.Kind = storage.KindRefreshToken
					err = s.CreateToken(txCtx, rt)
				}
				if err != nil {
					_ = s.Rollback(txCtx)
					return err
				}
				return s.Commit(txCtx)
			})
		})
	}
}
