package console

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
)

// countTTL is how long the overview's counts are reused.
const countTTL = time.Minute

// maxNeverUsed caps the clients never used the overview lists.
const maxNeverUsed = 10

// rotateAfter: a signing key older than this is listed as due for
// rotation.
const rotateAfter = 90 * 24 * time.Hour

// counts are the overview's figures.
type counts struct {
	Clients      map[string]int
	ClientsTotal int
	People       int
	Grants       int
	// GrantsCapped: there are at least Grants live grants (the list is
	// capped).
	GrantsCapped bool
	// NeverUsed are stored clients that never got a token (up to
	// maxNeverUsed of NeverUsedCount).
	NeverUsed      []ops.Client
	NeverUsedCount int
	// PendingApprovals are the live approvals of held tool calls no one
	// has decided yet.
	PendingApprovals int
	At               time.Time
}

// maxGrantCount is the list size at which the live grants stop being
// counted exactly.
const maxGrantCount = 10000

// counts returns the overview's counts. They page through every person
// and client (seconds at 100,000 of each), so they are kept: a request
// finding them older than countTTL gets them as they are while one
// recount runs in the background; only the first request waits.
func (c *Console) counts(ctx context.Context) (*counts, error) {
	c.cache.mu.Lock()
	last, stale := c.cache.last, c.cache.last == nil || c.now().Sub(c.cache.at) >= countTTL
	start := stale && last != nil && !c.cache.running
	if start {
		c.cache.running = true
	}
	c.cache.mu.Unlock()
	if last == nil {
		c.cache.first.Lock() // one first count at a time
		defer c.cache.first.Unlock()
		c.cache.mu.Lock()
		last = c.cache.last
		c.cache.mu.Unlock()
		if last != nil {
			return last, nil
		}
		return c.recount(ctx)
	}
	if start {
		go func() {
			bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
			defer cancel()
			if _, err := c.recount(bg); err != nil {
				c.log.Warn("console: counting clients and people failed", "err", err)
			}
			c.cache.mu.Lock()
			c.cache.running = false
			c.cache.mu.Unlock()
		}()
	}
	return last, nil
}

// recount counts anew and keeps the result.
func (c *Console) recount(ctx context.Context) (*counts, error) {
	now := c.now()
	o := c.cfg.Ops()
	n := &counts{At: now}
	var err error
	if n.Clients, err = o.CountClients(ctx); err != nil {
		return nil, err
	}
	for _, v := range n.Clients {
		n.ClientsTotal += v
	}
	for after := ""; ; {
		page, next, err := o.ListUsers(ctx, after, ops.MaxUserPage)
		if err != nil {
			return nil, err
		}
		n.People += len(page)
		if next == "" {
			break
		}
		after = next
	}
	for after := ""; ; {
		page, next, err := o.ListClientsPage(ctx, after, 500)
		if err != nil {
			return nil, err
		}
		for _, cl := range page {
			if cl.Source != "config" && cl.LastUsedAt == nil {
				n.NeverUsedCount++
				if len(n.NeverUsed) < maxNeverUsed {
					n.NeverUsed = append(n.NeverUsed, cl)
				}
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	for after := ""; ; {
		page, next, err := o.ListApprovals(ctx, "", after, ops.MaxApprovalPage)
		if err != nil {
			return nil, err
		}
		for _, a := range page {
			if a.Status == "pending" && !a.Expired {
				n.PendingApprovals++
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	gs, err := o.ListGrants(ctx, "", "")
	if err != nil {
		return nil, err
	}
	n.Grants, n.GrantsCapped = len(gs), len(gs) >= maxGrantCount
	c.cache.mu.Lock()
	c.cache.at, c.cache.last = now, n
	c.cache.mu.Unlock()
	return n, nil
}

type overviewPage struct {
	Counts *counts
	// Attention.
	Unloadable []as.KeyInfo
	Retired    []keyRow
	Old        []as.KeyInfo
	Charts     []chart
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	n, err := c.counts(r.Context())
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	rows, err := c.keyRows(r)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	d := overviewPage{Counts: n}
	now := c.now()
	for _, k := range rows {
		switch {
		case !k.Loadable:
			d.Unloadable = append(d.Unloadable, k.KeyInfo)
		case k.RetiredAt != nil:
			d.Retired = append(d.Retired, k)
		case k.Signing && now.Sub(k.CreatedAt) > rotateAfter:
			d.Old = append(d.Old, k.KeyInfo)
		}
	}
	d.Charts, err = c.charts(r.Context())
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	c.show(w, s, http.StatusOK, "overview.html", "overview", "Overview", d)
}
