// Package auditchain makes audit lines tamper-evident: each line carries a
// chain value, an HMAC-SHA256 (RFC 2104) of the previous line's chain value
// and of this line, so a line changed, removed, inserted or reordered
// breaks the chain from that line on, and only the holder of the key can
// mend it.
//
// A chained line is a JSON line (log/slog's JSONHandler) or a key=value
// line (slog's TextHandler) to which the Writer appends three members,
// written last:
//
//	{...,"instance":"<id>","seq":<n>,"chain":"<64 hex>"}
//	... instance=<id> seq=<n> chain=<64 hex>
//
// instance names the writer (random per process: several instances write
// their own chains, possibly into one log), seq counts its lines from 0.
// The chain value of a line is
//
//	HMAC-SHA256(key, prev || body)
//
// where prev is the 32 bytes of the previous chained line of the same
// instance (32 zero bytes before the first) and body is the line as it
// would be written without its chain member and without its line end:
// for JSON `{...,"instance":"<id>","seq":<n>}`, for key=value
// `... instance=<id> seq=<n>`.
//
// A chain begins with a start line, event audit.chain.start, whose
// prev_chain member names the chain value it continues: empty for a new
// chain, the last value of the previous file after a rotation (Rotate).
// Verify reads only chained lines, so other log lines may be interleaved.
package auditchain

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"strconv"
	"sync"
	"time"
)

// StartEvent is the event of the line that begins a chain or continues
// it in a new file.
const StartEvent = "audit.chain.start"

// MinKeyBytes is the shortest key material DeriveKey accepts.
const MinKeyBytes = 32

// DeriveKey derives the 32-byte HMAC key of a chain from secret with
// HKDF-SHA256 (RFC 5869) and purpose as its info, so the secret used for
// other keys yields an independent one here.
func DeriveKey(secret []byte, purpose string) ([]byte, error) {
	if len(secret) < MinKeyBytes {
		return nil, errors.New("auditchain: key material shorter than 32 bytes")
	}
	return hkdf.Key(sha256.New, secret, nil, purpose, 32)
}

// Format is the form of the lines: JSON or key=value.
type Format int

// The line formats.
const (
	JSON Format = iota
	Text
)

// Writer chains the lines written through Chained and passes the lines
// written through Plain unchanged, one line per Write, all under one lock:
// the chain value is computed under the same lock as the write, so the
// order of the lines is the order of the chain.
type Writer struct {
	mu       sync.Mutex
	w        io.Writer
	mac      hash.Hash
	format   Format
	instance string
	prev     [32]byte
	seq      uint64
	started  bool
	now      func() time.Time
	buf      []byte
	scratch  [32]byte
}

// NewWriter returns a Writer of lines of format to w, chained under key
// (DeriveKey's), with a random instance id. The start line is written
// with the first chained line.
func NewWriter(w io.Writer, key []byte, format Format) *Writer {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Writer{w: w, mac: hmac.New(sha256.New, key), format: format, instance: hex.EncodeToString(id[:]), now: time.Now}
}

// Instance is the writer's instance id.
func (c *Writer) Instance() string { return c.instance }

// Plain is an io.Writer whose lines are written as they are.
func (c *Writer) Plain() io.Writer { return plainWriter{c} }

// Chained is an io.Writer each Write of which is one line (ending in a
// newline) to chain.
func (c *Writer) Chained() io.Writer { return chainedWriter{c} }

type plainWriter struct{ c *Writer }

func (p plainWriter) Write(b []byte) (int, error) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.c.w.Write(b)
}

type chainedWriter struct{ c *Writer }

func (p chainedWriter) Write(b []byte) (int, error) {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		if err := c.writeStart(); err != nil {
			return 0, err
		}
	}
	if err := c.writeLine(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Rotate makes w the destination of the lines: the first line written to
// it is a start line naming the last chain value written before, so a
// file verified alone and a series of files both check.
func (c *Writer) Rotate(w io.Writer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w = w
	return c.writeStart()
}

// writeStart writes the start line, naming the chain value it continues.
func (c *Writer) writeStart() error {
	c.started = true
	prev := ""
	if c.seq > 0 {
		prev = hex.EncodeToString(c.prev[:])
	}
	now := c.now()
	var line []byte
	if c.format == Text {
		// As slog's TextHandler writes the time; JSONHandler writes
		// RFC 3339 with nanoseconds.
		t := now.Format("2006-01-02T15:04:05.000Z07:00")
		if prev == "" {
			prev = `""`
		}
		line = []byte("time=" + t + " level=INFO msg=audit event=" + StartEvent + " prev_chain=" + prev + "\n")
	} else {
		t := now.Format(time.RFC3339Nano)
		line = []byte(`{"time":"` + t + `","level":"INFO","msg":"audit","event":"` + StartEvent + `","prev_chain":"` + prev + `"}` + "\n")
	}
	return c.writeLine(line)
}

// writeLine appends the instance, seq and chain members to line and
// writes it; c.mu is held.
func (c *Writer) writeLine(line []byte) error {
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
	}
	b := c.buf[:0]
	if c.format == JSON {
		if n == 0 || line[n-1] != '}' {
			return errors.New("auditchain: not a JSON object line")
		}
		b = append(b, line[:n-1]...)
		b = append(b, `,"instance":"`...)
		b = append(b, c.instance...)
		b = append(b, `","seq":`...)
		b = strconv.AppendUint(b, c.seq, 10)
		b = append(b, '}')
	} else {
		b = append(b, line[:n]...)
		b = append(b, " instance="...)
		b = append(b, c.instance...)
		b = append(b, " seq="...)
		b = strconv.AppendUint(b, c.seq, 10)
	}
	c.mac.Reset()
	c.mac.Write(c.prev[:])
	c.mac.Write(b)
	var sum [32]byte
	copy(sum[:], c.mac.Sum(c.scratch[:0]))
	if c.format == JSON {
		b = append(b[:len(b)-1], `,"chain":"`...)
		b = hex.AppendEncode(b, sum[:])
		b = append(b, `"}`...)
	} else {
		b = append(b, " chain="...)
		b = hex.AppendEncode(b, sum[:])
	}
	b = append(b, '\n')
	c.buf = b
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	c.prev = sum
	c.seq++
	return nil
}

// Sum is the chain value of body after prev under mac (an HMAC-SHA256).
func Sum(mac hash.Hash, prev, body []byte) (sum [32]byte) {
	mac.Reset()
	mac.Write(prev)
	mac.Write(body)
	mac.Sum(sum[:0])
	return sum
}
