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
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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

// Handler returns a slog.Handler that passes every record to next (as
// far as next is enabled for it) and takes the audit records (message
// "audit") whatever level next logs at.
func (s *Sink) Handler(next slog.Handler) slog.Handler {
	return &handler{s: s, next: next}
}

// handler is Sink.Handler. attrs are those of WithAttrs, each under the
// groups open when it was added.
type handler struct {
	s      *Sink
	next   slog.Handler
	attrs  []groupedAttr
	groups []string
}

type groupedAttr struct {
	groups []string
	attr   slog.Attr
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "audit" {
		if h.s.cfg.KeepEvents {
			h.s.record(h.event(r))
		} else {
			h.s.count(eventName(r))
		}
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		n.attrs = append(n.attrs, groupedAttr{h.groups, a})
	}
	n.next = h.next.WithAttrs(as)
	return &n
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.groups = append(slices.Clip(h.groups), name)
	n.next = h.next.WithGroup(name)
	return &n
}

// event turns an audit record into an AuditEvent: the attributes event,
// sub, client_id and admin_subject (else admin_client, the admin API's
// client or "cli") become its fields, the others (admin_client included)
// its Detail, a JSON object written in the order of the attributes, with
// the groups of WithGroup as nested objects. It runs on a request's path,
// so it writes the JSON itself rather than through a map.
func (h *handler) event(r slog.Record) storage.AuditEvent {
	e := storage.AuditEvent{Time: r.Time}
	var adminClient string
	w := detailWriter{b: make([]byte, 0, 256)}
	w.open()
	field := func(a slog.Attr) bool {
		var p *string
		switch a.Key {
		case "event":
			p = &e.Event
		case "sub":
			p = &e.Subject
		case "client_id":
			p = &e.ClientID
		case "admin_subject":
			p = &e.AdminSubject
		case "admin_client":
			adminClient = a.Value.Resolve().String()
			return false
		default:
			return false
		}
		*p = a.Value.Resolve().String()
		return true
	}
	// The handler's groups only grow, so its attributes come in order of
	// depth, each under a prefix of h.groups.
	next := 0
	for depth := 0; depth <= len(h.groups); depth++ {
		for ; next < len(h.attrs) && len(h.attrs[next].groups) == depth; next++ {
			if a := h.attrs[next].attr; depth > 0 || !field(a) {
				w.attr(a)
			}
		}
		if depth < len(h.groups) {
			w.key(h.groups[depth])
			w.open()
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		if len(h.groups) > 0 || !field(a) {
			w.attr(a)
		}
		return true
	})
	for range len(h.groups) {
		w.close()
	}
	w.close()
	if e.AdminSubject == "" {
		e.AdminSubject = adminClient
	}
	if len(w.b) > 2 {
		e.Detail = w.b
	}
	return e
}

// eventName is the record's event attribute.
func eventName(r slog.Record) string {
	var name string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "event" {
			name = a.Value.Resolve().String()
			return false
		}
		return true
	})
	return name
}

// detailWriter writes a JSON object of slog attributes.
type detailWriter struct {
	b     []byte
	empty bool // nothing written yet in the object open last
}

func (w *detailWriter) open() {
	w.b = append(w.b, '{')
	w.empty = true
}

func (w *detailWriter) close() {
	w.b = append(w.b, '}')
	w.empty = false
}

func (w *detailWriter) key(k string) {
	if !w.empty {
		w.b = append(w.b, ',')
	}
	w.empty = false
	w.b = appendString(w.b, k)
	w.b = append(w.b, ':')
}

// attr writes a as a member; an empty attribute is skipped and a group
// without a key inlined, as slog does.
func (w *detailWriter) attr(a slog.Attr) {
	v := a.Value.Resolve()
	switch {
	case a.Key == "" && v.Kind() == slog.KindGroup:
		for _, g := range v.Group() {
			w.attr(g)
		}
		return
	case a.Key == "" && v.Any() == nil:
		return
	}
	w.key(a.Key)
	w.value(v)
}

func (w *detailWriter) value(v slog.Value) {
	switch v.Kind() {
	case slog.KindString:
		w.b = appendString(w.b, v.String())
	case slog.KindInt64:
		w.b = strconv.AppendInt(w.b, v.Int64(), 10)
	case slog.KindUint64:
		w.b = strconv.AppendUint(w.b, v.Uint64(), 10)
	case slog.KindBool:
		w.b = strconv.AppendBool(w.b, v.Bool())
	case slog.KindFloat64:
		if f := v.Float64(); !math.IsInf(f, 0) && !math.IsNaN(f) {
			w.b = strconv.AppendFloat(w.b, f, 'g', -1, 64)
		} else {
			w.b = appendString(w.b, strconv.FormatFloat(f, 'g', -1, 64))
		}
	case slog.KindDuration:
		w.b = appendString(w.b, v.Duration().String())
	case slog.KindTime:
		w.b = appendString(w.b, v.Time().UTC().Format(time.RFC3339Nano))
	case slog.KindGroup:
		w.open()
		for _, a := range v.Group() {
			w.attr(a)
		}
		w.close()
	default:
		switch x := v.Any().(type) {
		case error:
			w.b = appendString(w.b, x.Error())
			return
		case json.Marshaler:
		case fmt.Stringer:
			w.b = appendString(w.b, x.String())
			return
		}
		if j, err := json.Marshal(v.Any()); err == nil {
			w.b = append(w.b, j...)
		} else {
			w.b = appendString(w.b, fmt.Sprint(v.Any()))
		}
	}
}

// appendString appends s as a JSON string (RFC 8259 §7): quotation mark,
// reverse solidus and control characters escaped, invalid UTF-8 as
// U+FFFD, and U+2028 and U+2029 escaped as encoding/json does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
