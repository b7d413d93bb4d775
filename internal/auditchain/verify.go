package auditchain

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
)

// Failure names the first chained line that does not belong where it is.
type Failure struct {
	File string
	Line int    // 1-based line number in File
	Kind string // changed, removed, inserted, reordered
	Msg  string
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Line, f.Kind, f.Msg)
}

// Result is what a successful verification read.
type Result struct {
	Lines int // chained lines checked
	// Last is, per instance, its last chain value (hex) and seq: what a
	// later file must continue, and what an operator may record elsewhere
	// to detect a removed tail.
	Last map[string]Position
}

// Position is where an instance's chain stands.
type Position struct {
	Seq   uint64
	Chain string
}

type entry struct {
	file      string
	line      int
	inst      string
	seq       uint64
	chain     [32]byte
	body      []byte
	start     bool
	prevChain []byte // of a start line: 32 bytes, or nil for a new chain
}

type state struct {
	prev [32]byte
	seq  uint64
}

// VerifyFiles reads the files named, in order (a rotated series, oldest
// first), and checks the chains in them under key.
func VerifyFiles(key []byte, paths []string) (*Result, error) {
	var entries []entry
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		entries, err = readEntries(entries, p, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return verify(key, entries)
}

// Verify checks the chained lines of r (named name in failures) under key.
func Verify(key []byte, name string, r io.Reader) (*Result, error) {
	entries, err := readEntries(nil, name, r)
	if err != nil {
		return nil, err
	}
	return verify(key, entries)
}

func readEntries(entries []entry, name string, r io.Reader) ([]entry, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if e, ok := parseLine(bytes.TrimSuffix(line, []byte("\n"))); ok {
				e.file, e.line = name, n
				entries = append(entries, e)
			}
		}
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

const hexLen = 64

// parseLine recognises a chained line by its last members.
func parseLine(line []byte) (e entry, ok bool) {
	var body []byte
	var sum []byte
	jsonSuffix := len(`,"chain":"`) + hexLen + len(`"}`)
	textSuffix := len(" chain=") + hexLen
	switch {
	case len(line) > jsonSuffix && bytes.HasSuffix(line, []byte(`"}`)) && bytes.HasPrefix(line[len(line)-jsonSuffix:], []byte(`,"chain":"`)):
		sum = line[len(line)-hexLen-2 : len(line)-2]
		body = append(append([]byte(nil), line[:len(line)-jsonSuffix]...), '}')
		i := bytes.LastIndex(body, []byte(`,"seq":`))
		j := bytes.LastIndex(body, []byte(`,"instance":"`))
		if i < 0 || j < 0 || j > i || body[i-1] != '"' {
			return e, false
		}
		seq, err := strconv.ParseUint(string(body[i+len(`,"seq":`):len(body)-1]), 10, 64)
		if err != nil {
			return e, false
		}
		e.inst, e.seq = string(body[j+len(`,"instance":"`):i-1]), seq
		if bytes.Contains(body, []byte(`,"event":"`+StartEvent+`",`)) {
			e.start = true
			k := bytes.Index(body, []byte(`,"prev_chain":"`))
			if k < 0 {
				return e, false
			}
			rest := body[k+len(`,"prev_chain":"`):]
			end := bytes.IndexByte(rest, '"')
			if end < 0 || !e.setPrev(rest[:end]) {
				return e, false
			}
		}
	case len(line) > textSuffix && bytes.HasPrefix(line[len(line)-textSuffix:], []byte(" chain=")):
		sum = line[len(line)-hexLen:]
		body = append([]byte(nil), line[:len(line)-textSuffix]...)
		i := bytes.LastIndex(body, []byte(" seq="))
		j := bytes.LastIndex(body, []byte(" instance="))
		if i < 0 || j < 0 || j > i {
			return e, false
		}
		seq, err := strconv.ParseUint(string(body[i+len(" seq="):]), 10, 64)
		if err != nil {
			return e, false
		}
		e.inst, e.seq = string(body[j+len(" instance="):i]), seq
		if bytes.Contains(body, []byte(" event="+StartEvent+" ")) {
			e.start = true
			k := bytes.Index(body, []byte(" prev_chain="))
			if k < 0 {
				return e, false
			}
			rest := body[k+len(" prev_chain="):]
			if end := bytes.IndexByte(rest, ' '); end >= 0 {
				rest = rest[:end]
			}
			if string(rest) == `""` {
				rest = nil
			}
			if !e.setPrev(rest) {
				return e, false
			}
		}
	default:
		return e, false
	}
	if _, err := hex.Decode(e.chain[:], sum); err != nil {
		return e, false
	}
	e.body = body
	return e, true
}

// setPrev reads the prev_chain of a start line: empty, or 64 hex digits.
func (e *entry) setPrev(h []byte) bool {
	if len(h) == 0 {
		return true
	}
	if len(h) != hexLen {
		return false
	}
	e.prevChain = make([]byte, 32)
	_, err := hex.Decode(e.prevChain, h)
	return err == nil
}

func verify(key []byte, entries []entry) (*Result, error) {
	mac := hmac.New(sha256.New, key)
	valid := func(prev []byte, e *entry) bool {
		sum := Sum(mac, prev, e.body)
		return hmac.Equal(sum[:], e.chain[:])
	}
	states := map[string]*state{}
	fail := func(e *entry, kind, format string, args ...any) error {
		return &Failure{File: e.file, Line: e.line, Kind: kind, Msg: fmt.Sprintf(format, args...)}
	}
	for i := range entries {
		e := &entries[i]
		st := states[e.inst]
		if st == nil {
			if !e.start {
				return nil, fail(e, "removed", "instance %s begins here without a start line: the lines before it were removed, or the file that holds them is not given", e.inst)
			}
			prev := e.prevChain
			if prev == nil {
				prev = make([]byte, 32)
			}
			if !valid(prev, e) {
				return nil, fail(e, "changed", "its chain value does not match its content (or the key)")
			}
			states[e.inst] = &state{prev: e.chain, seq: e.seq + 1}
			continue
		}
		if e.start && e.prevChain != nil && !bytes.Equal(e.prevChain, st.prev[:]) && valid(e.prevChain, e) {
			return nil, fail(e, "removed", "this start line continues a chain value of instance %s that is not the last one read: lines before it were removed", e.inst)
		}
		if e.seq == st.seq && valid(st.prev[:], e) {
			st.prev, st.seq = e.chain, e.seq+1
			continue
		}
		// The line does not continue the chain: say why.
		next := func(seq uint64) *entry {
			for j := i + 1; j < len(entries); j++ {
				if f := &entries[j]; f.inst == e.inst && f.seq == seq && valid(st.prev[:], f) {
					return f
				}
			}
			return nil
		}
		switch {
		case e.seq < st.seq:
			return nil, fail(e, "reordered", "seq %d of instance %s comes after seq %d: the line is out of order or repeated", e.seq, e.inst, st.seq-1)
		case e.seq > st.seq:
			if f := next(st.seq); f != nil {
				return nil, fail(e, "reordered", "seq %d of instance %s comes before seq %d, which is at %s:%d", e.seq, e.inst, st.seq, f.file, f.line)
			}
			return nil, fail(e, "removed", "seq %d of instance %s follows seq %d: the lines between were removed", e.seq, e.inst, st.seq-1)
		default:
			if next(st.seq) != nil {
				return nil, fail(e, "inserted", "the line is not part of instance %s's chain: the next line of that instance continues without it", e.inst)
			}
			return nil, fail(e, "changed", "its chain value does not match its content (or the key)")
		}
	}
	res := &Result{Lines: len(entries), Last: map[string]Position{}}
	for inst, st := range states {
		res.Last[inst] = Position{Seq: st.seq - 1, Chain: hex.EncodeToString(st.prev[:])}
	}
	return res, nil
}

// Report writes "ok N" and each instance's last position, in order of
// instance id.
func (r *Result) Report(w io.Writer) {
	fmt.Fprintf(w, "ok %d\n", r.Lines)
	ids := make([]string, 0, len(r.Last))
	for id := range r.Last {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := r.Last[id]
		fmt.Fprintf(w, "instance %s seq %d chain %s\n", id, p.Seq, p.Chain)
	}
}
