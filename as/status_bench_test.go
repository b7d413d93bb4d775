package as

import (
	"compress/zlib"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// fixedStatuses is a StatusStore that answers one list, so the benchmarks
// measure the AS's rebuild and not a backend's read.
type fixedStatuses struct {
	last    int64
	invalid []int64
}

func (f *fixedStatuses) AllocateStatusIndices(context.Context, int) (int64, error) {
	f.last++
	return f.last, nil
}

func (f *fixedStatuses) StatusList(context.Context, time.Time) (int64, []int64, error) {
	return f.last, f.invalid, nil
}

func (f *fixedStatuses) DeleteExpiredStatuses(context.Context, time.Time, int) (int, error) {
	return 0, nil
}

// statusListOf n indices, a fraction of them revoked at random places.
func statusListOf(n int64, revoked float64) *fixedStatuses {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[int64]bool{}
	for len(seen) < int(float64(n)*revoked) {
		seen[1+r.Int64N(n)] = true
	}
	f := &fixedStatuses{last: n}
	for idx := range seen {
		f.invalid = append(f.invalid, idx)
	}
	slices.Sort(f.invalid)
	return f
}

var statusBenchSizes = []struct {
	n       int64
	revoked float64
}{{1e6, 0.001}, {1e6, 0.01}, {1e6, 0.1}}

// BenchmarkStatusListEncode: the lst value of a list of 1e6 indices at
// each zlib level.
func BenchmarkStatusListEncode(b *testing.B) {
	for _, sz := range statusBenchSizes {
		f := statusListOf(sz.n, sz.revoked)
		for _, lv := range []struct {
			name  string
			level int
		}{{"best", zlib.BestCompression}, {"default", zlib.DefaultCompression}, {"speed", zlib.BestSpeed}} {
			b.Run(fmt.Sprintf("n=%d/revoked=%g/%s", sz.n, sz.revoked, lv.name), func(b *testing.B) {
				var size int
				cpu := cpuTime()
				for b.Loop() {
					lst, err := encodeStatusBitsLevel(statusListLen(f.last), f.invalid, lv.level)
					if err != nil {
						b.Fatal(err)
					}
					size = len(lst)
				}
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
				b.ReportMetric(float64(size), "lst-bytes")
			})
		}
	}
}

// BenchmarkStatusListRebuild: one request for the list token after the
// cache has passed, with 1e6 indices: the store read (fixed here), the
// encoding when the list changed (another block of indices each time) or
// none when it did not, the claims and the signature. cpu-us/op is the
// process's CPU time, steadier than ns/op on a loaded machine.
func BenchmarkStatusListRebuild(b *testing.B) {
	h := newHarness(b, nil)
	for _, sz := range statusBenchSizes {
		for _, changed := range []bool{true, false} {
			f := statusListOf(sz.n, sz.revoked)
			b.Run(fmt.Sprintf("n=%d/revoked=%g/changed=%v", sz.n, sz.revoked, changed), func(b *testing.B) {
				l := &statusList{store: f, keys: h.as.keys, issuer: h.issuer, uri: h.as.StatusListURI(), now: h.clock.Now}
				var size int
				cpu := cpuTime()
				for b.Loop() {
					h.clock.Advance(statusListCache)
					if changed {
						f.last += statusHeadroom
					}
					tok, err := l.current(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					size = len(tok)
				}
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
				b.ReportMetric(float64(size), "token-bytes")
			})
		}
	}
}
