package as

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// allocationCounter counts AllocateStatusIndices calls.
type allocationCounter struct {
	storage.StatusStore
	mu    sync.Mutex
	calls int
}

func (a *allocationCounter) AllocateStatusIndices(ctx context.Context, n int) (int64, error) {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	return a.StatusStore.AllocateStatusIndices(ctx, n)
}

// TestStatusIndicesComeFromOneBlock: statusIndexer hands out consecutive
// indices, reserving statusBlock of them per store call. Fails if a block
// ends before its last index (a reservation per token, indices statusBlock
// apart, a list statusBlock times longer).
func TestStatusIndicesComeFromOneBlock(t *testing.T) {
	store := &allocationCounter{StatusStore: memory.New()}
	a := &statusIndexer{store: store}
	ctx := context.Background()
	first, err := a.index(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= statusBlock; i++ {
		idx, err := a.index(ctx)
		if err != nil || idx != first+i {
			t.Fatalf("index %d = %d, %v; want %d", i, idx, err, first+i)
		}
	}
	if store.calls != 2 {
		t.Errorf("%d reservations for %d indices, want 2", store.calls, statusBlock+1)
	}
}

// TestStatusEndpointsAnswerGETAndHEADOnly: the status list (§8.1) and the
// aggregation (§9.3) answer GET and HEAD; any other method is 405 with
// Allow.
func TestStatusEndpointsAnswerGETAndHEADOnly(t *testing.T) {
	h := newHarness(t, nil)
	for _, path := range []string{statusListPath, statusAggregationPath} {
		for method, want := range map[string]int{http.MethodGet: 200, http.MethodHead: 200, http.MethodPost: 405, http.MethodPut: 405, http.MethodDelete: 405} {
			req, _ := http.NewRequest(method, h.issuer+path, strings.NewReader(""))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
			}
			if want == 405 && resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q", method, path, resp.Header.Get("Allow"))
			}
		}
	}
}
