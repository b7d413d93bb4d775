// Package auditsink keeps what the authorization server's audit log says in
// its storage as well, for the operator console: every audit record
// (message "audit") becomes a storage.AuditEvent, and hourly counts of
// tokens issued, refusals, logins and login failures are added to a
// storage.StatsStore. Instances sharing one database all add to the same
// events and counts.
//
// Nothing on a request's path waits for storage. Records go into a bounded
// buffer that one goroutine appends in batches; when the buffer is full a
// record is dropped, counted (Config.Dropped) and reported once in the log.
// Counts accumulate in memory and are added every Config.Interval. Close
// writes what is left. The log stays the record of every event (and the
// only one with its audit chain); storage holds a copy to page through.
package auditsink

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// The names of the hourly counts.
const (
	// TokensIssued counts token responses: audit event token.issued, one
	// per successful token request of any grant.
	TokensIssued = "tokens_issued"
	// Refusals counts requests the AS refused (see Sink.Refused).
	Refusals = "refusals"
	// Logins counts sign-ins: audit event login.succeeded, local or
	// through an upstream provider.
	Logins = "logins"
	// LoginFailures counts sign-ins that did not succeed: audit events
	// login.failed (wrong name or password), login.throttled,
	// login.refused (a disabled person), login.upstream_failed and
	// login.upstream_refused.
	LoginFailures = "login_failures"
)

// statOf maps an audit event to the hourly count it adds to.
var statOf = map[string]string{
	"token.issued":           TokensIssued,
	"login.succeeded":        Logins,
	"login.failed":           LoginFailures,
	"login.throttled":        LoginFailures,
	"login.refused":          LoginFailures,
	"login.upstream_failed":  LoginFailures,
	"login.upstream_refused": LoginFailures,
}

// Defaults of Config.
const (
	DefaultBuffer   = 8192
	DefaultBatch    = 256
	DefaultInterval = 10 * time.Second
)

// Config configures a Sink. Zero values take the defaults.
type Config struct {
	// KeepEvents appends audit records to storage; false keeps only the
	// counts (admin.audit_retention 0).
	KeepEvents bool
	// Buffer is how many records wait for storage before new ones are
	// dropped. Default DefaultBuffer.
	Buffer int
	// Batch is the most records one append writes. Default DefaultBatch.
	Batch int
	// Interval is how often the counts are added to storage. Default
	// DefaultInterval.
	Interval time.Duration
	// Timeout bounds each storage call. Default 10s.
	Timeout time.Duration
	// Dropped is told of records not kept: because the buffer was full
	// (failed false) or storage refused them (failed true). Nil: not told.
	Dropped func(n int, failed bool)
	// Now is the clock of the counts. Default time.Now.
	Now func() time.Time
	// Log receives the warnings (a full buffer, a failed write). Its
	// records do not pass through Handler. Nil: discarded.
	Log *slog.Logger
}

// Sink copies audit records and counts to storage. Create it with New,
// put Handler in the server's logger, Start it once storage is open and
// Close it at shutdown.
type Sink struct {
	cfg    Config
	events chan storage.AuditEvent

	mu     sync.Mutex
	counts map[statKey]int64

	started, closed atomic.Bool
	warnedFull      atomic.Bool // the full buffer was reported
	warnedFail      atomic.Bool // a failed write was reported
	stop, done      chan struct{}
	closeOnce       sync.Once

	audit storage.AuditStore
	stats storage.StatsStore
	log   *slog.Logger
}

type statKey struct {
	hour int64 // Unix seconds of the hour's start
	name string
}

// New returns a Sink that buffers until Start.
func New(cfg Config) *Sink {
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Sink{
		cfg: cfg, log: cfg.Log, events: make(chan storage.AuditEvent, cfg.Buffer), counts: map[statKey]int64{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// Start writes to events (required when Config.KeepEvents is set) and
// stats from now on, in a goroutine of its own. Records logged before
// Start wait in the buffer. It may be called once.
func (s *Sink) Start(events storage.AuditStore, stats storage.StatsStore) {
	if s.started.Swap(true) {
		return
	}
	s.audit, s.stats = events, stats
	go s.run()
}

// Close writes the buffered records and the counts, and stops. It
// returns when they are written or ctx ends. Records logged after Close
// are not kept.
func (s *Sink) Close(ctx context.Context) error {
	s.closed.Store(true)
	if !s.started.Load() {
		return nil
	}
	s.closeOnce.Do(func() { close(s.stop) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Count adds one to name in the current hour.
func (s *Sink) Count(name string) {
	if s.closed.Load() {
		return
	}
	k := statKey{s.cfg.Now().UTC().Truncate(time.Hour).Unix(), name}
	s.mu.Lock()
	s.counts[k]++
	s.mu.Unlock()
}

// Refused counts one refusal when a request to the token, authorization
// or registration endpoint was answered with a client error (4xx) or an
// OAuth error other than server_error and temporarily_unavailable (an
// error redirect of the authorization endpoint, RFC 6749 §4.1.2.1): the
// AS said no. Answers of the AS's own failures (5xx) are not refusals.
func (s *Sink) Refused(status int, oauthError string) bool {
	refused := status >= 400 && status < 500 ||
		oauthError != "" && oauthError != "server_error" && oauthError != "temporarily_unavailable"
	if refused {
		s.Count(Refusals)
	}
	return refused
}

// count counts an audit event.
func (s *Sink) count(event string) {
	if name, ok := statOf[event]; ok {
		s.Count(name)
	}
}

// record takes an audit event on a request's path: it counts it and
// queues it for storage, or drops it when the buffer is full.
func (s *Sink) record(e storage.AuditEvent) {
	if s.closed.Load() {
		return
	}
	s.count(e.Event)
	select {
	case s.events <- e:
	default:
		if s.cfg.Dropped != nil {
			s.cfg.Dropped(1, false)
		}
		if !s.warnedFull.Swap(true) {
			s.log.Warn("audit events are coming faster than storage takes them; dropping from storage (the log keeps them)",
				"buffer", s.cfg.Buffer)
		}
	}
}

// run appends the queued events as they come, adds the counts every
// Interval, and at stop writes what is left.
func (s *Sink) run() {
	defer close(s.done)
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	batch := make([]storage.AuditEvent, 0, s.cfg.Batch)
	for {
		select {
		case e := <-s.events:
			batch = s.fill(append(batch[:0], e))
			s.append(batch, false)
		case <-tick.C:
			s.flushStats()
		case <-s.stop:
			for {
				batch = s.fill(batch[:0])
				if len(batch) == 0 {
					break
				}
				s.append(batch, true)
			}
			s.flushStats()
			return
		}
	}
}

// fill adds queued events to batch, without waiting, up to Batch.
func (s *Sink) fill(batch []storage.AuditEvent) []storage.AuditEvent {
	for len(batch) < s.cfg.Batch {
		select {
		case e := <-s.events:
			batch = append(batch, e)
		default:
			return batch
		}
	}
	return batch
}

// append writes batch, trying again twice after a pause unless stopping.
func (s *Sink) append(batch []storage.AuditEvent, stopping bool) {
	var err error
	for attempt := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
		err = s.audit.AppendAuditEvents(ctx, batch)
		cancel()
		if err == nil {
			s.warnedFull.Store(false)
			s.warnedFail.Store(false)
			return
		}
		if stopping || attempt == 2 {
			break
		}
		select {
		case <-time.After(time.Duration(attempt+1) * time.Second):
		case <-s.stop:
			stopping = true
		}
	}
	if s.cfg.Dropped != nil {
		s.cfg.Dropped(len(batch), true)
	}
	if !s.warnedFail.Swap(true) {
		s.log.Warn("audit events could not be kept in storage (the log keeps them)", "events", len(batch), "err", err)
	}
}

// flushStats adds the counts gathered since the last flush; on failure
// they are kept for the next one.
func (s *Sink) flushStats() {
	s.mu.Lock()
	counts := s.counts
	s.counts = map[statKey]int64{}
	s.mu.Unlock()
	if len(counts) == 0 || s.stats == nil {
		return
	}
	list := make([]storage.StatCount, 0, len(counts))
	for k, n := range counts {
		list = append(list, storage.StatCount{Hour: time.Unix(k.hour, 0).UTC(), Name: k.name, Count: n})
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	err := s.stats.AddStats(ctx, list)
	cancel()
	if err == nil {
		return
	}
	s.log.Warn("hourly counts could not be added to storage; trying again at the next flush", "err", err)
	s.mu.Lock()
	for k, n := range counts {
		s.counts[k] += n
	}
	s.mu.Unlock()
}
