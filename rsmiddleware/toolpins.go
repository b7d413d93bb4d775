package rsmiddleware

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Modes of ToolPins (ToolPinsConfig.Mode).
const (
	// PinsEnforce: a tool is offered and callable only while its
	// definition's digest is the one pinned in the file.
	PinsEnforce = "enforce"
	// PinsLearn: as PinsEnforce, but a tool the file does not name yet is
	// pinned at its first listing (trust on first use) and written to the
	// file; a later change of it awaits approval as in PinsEnforce.
	PinsLearn = "learn"
)

// definitionMembers are the members of a tools/list entry (MCP
// specification, server/tools, "Tool") that make up its definition, the
// part a pin covers.
var definitionMembers = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// ToolDefinition returns the RFC 8785 canonical JSON of the definition
// members of a tools/list entry (name, title, description, inputSchema,
// outputSchema, annotations; other members such as _meta and icons are
// left out) and the lowercase hex SHA-256 of it, the digest ToolPins pins.
func ToolDefinition(entry map[string]json.RawMessage) (canonical []byte, sha string, err error) {
	def := make(map[string]json.RawMessage, len(definitionMembers))
	for _, k := range definitionMembers {
		if v, ok := entry[k]; ok {
			def[k] = v
		}
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return nil, "", err
	}
	if canonical, err = CanonicalJSON(raw); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(canonical)
	return canonical, hex.EncodeToString(sum[:]), nil
}

// PinsFile is the JSON file of approved tool definitions. Tools are the
// approved ones; Pending the definitions a gateway listed that are not
// approved (new, or changed since their approval), recorded there for
// `mcpgateway pins diff` and `approve`. encoding/json writes map keys
// sorted, so the file's form is stable under version control.
type PinsFile struct {
	Tools   map[string]PinnedTool `json:"tools"`
	Pending map[string]PinnedTool `json:"pending,omitempty"`
}

// PinnedTool is one definition: its digest (ToolDefinition) and the
// canonical definition itself.
type PinnedTool struct {
	SHA256     string          `json:"sha256"`
	Definition json.RawMessage `json:"definition,omitempty"`
	// Seen is when a gateway first listed a pending definition.
	Seen *time.Time `json:"seen,omitempty"`
}

// MaxPending is the most definitions one instance records in the pending
// section, and the most that section holds: a server that lists ever new
// tools cannot grow the file without bound. Unrecorded definitions are
// still hidden; they are logged.
const MaxPending = 1000

// maxPinsFileBytes bounds the file read.
const maxPinsFileBytes = 32 << 20

// ParsePinsFile reads a pins file. An empty file has no pins. Unknown
// members, a digest that is not 64 lowercase hex digits, or a definition
// whose digest or name differs from its entry are errors naming the entry.
func ParsePinsFile(data []byte) (*PinsFile, error) {
	pf := &PinsFile{Tools: map[string]PinnedTool{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return pf, nil
	}
	if len(data) > maxPinsFileBytes {
		return nil, fmt.Errorf("pins file larger than %d bytes", maxPinsFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(pf); err != nil {
		return nil, fmt.Errorf("pins file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("pins file: data after the JSON object")
	}
	if pf.Tools == nil {
		pf.Tools = map[string]PinnedTool{}
	}
	for section, m := range map[string]map[string]PinnedTool{"tools": pf.Tools, "pending": pf.Pending} {
		for name, t := range m {
			if err := t.check(name); err != nil {
				return nil, fmt.Errorf("pins file: %s.%q: %w", section, name, err)
			}
			if len(t.Definition) > 0 {
				c, err := CanonicalJSON(t.Definition)
				if err != nil {
					return nil, fmt.Errorf("pins file: %s.%q: %w", section, name, err)
				}
				t.Definition = c
				m[name] = t
			}
		}
	}
	return pf, nil
}

// check verifies t as the entry of name.
func (t PinnedTool) check(name string) error {
	if name == "" {
		return errors.New("empty tool name")
	}
	if len(t.SHA256) != 64 {
		return errors.New("sha256 must be 64 lowercase hex digits")
	}
	for _, c := range []byte(t.SHA256) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return errors.New("sha256 must be 64 lowercase hex digits")
		}
	}
	if len(t.Definition) == 0 {
		return nil
	}
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(t.Definition, &entry); err != nil {
		return fmt.Errorf("definition: %w", err)
	}
	var n string
	if json.Unmarshal(entry["name"], &n) != nil || n != name {
		return errors.New("definition: its name is not the entry's")
	}
	_, sha, err := ToolDefinition(entry)
	if err != nil {
		return fmt.Errorf("definition: %w", err)
	}
	if sha != t.SHA256 {
		return fmt.Errorf("definition: its sha256 is %s, not the entry's", sha)
	}
	return nil
}

// Marshal returns the file's JSON: pretty-printed, keys sorted, a final
// newline.
func (pf *PinsFile) Marshal() ([]byte, error) {
	if pf.Tools == nil {
		pf.Tools = map[string]PinnedTool{}
	}
	b, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Names returns the names of m, sorted.
func Names(m map[string]PinnedTool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// UpdatePinsFile applies fn to the pins file at path under an exclusive
// lock (flock(2) of path+".lock"), so gateways and the CLI sharing the
// file apply their changes one after the other, and writes the result
// atomically (a temporary file in the same directory, synced, renamed
// over path) when fn reports a change. A missing file is read as empty.
func UpdatePinsFile(path string, fn func(*PinsFile) (bool, error)) error {
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	pf, err := ReadPinsFile(path)
	if err != nil {
		return err
	}
	changed, err := fn(pf)
	if err != nil || !changed {
		return err
	}
	out, err := pf.Marshal()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadPinsFile reads and parses the pins file at path; a missing file has
// no pins.
func ReadPinsFile(path string) (*PinsFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &PinsFile{Tools: map[string]PinnedTool{}}, nil
	}
	if err != nil {
		return nil, err
	}
	return ParsePinsFile(data)
}

// ToolPinsConfig configures ToolPins.
type ToolPinsConfig struct {
	// File is the pins file (PinsFile). Required.
	File string
	// Mode is PinsEnforce or PinsLearn. Zero value: PinsEnforce.
	Mode string
	// Logger: zero value slog.Default().
	Logger *slog.Logger
	// Now: zero value time.Now.
	Now func() time.Time
}

// ToolPins holds the approved tool definitions of a pins file for
// MCPFilter (MCPFilterConfig.Pins). It is safe for concurrent use.
type ToolPins struct {
	path, mode string
	log        *slog.Logger
	now        func() time.Time

	mu       sync.RWMutex
	approved map[string]string // name -> sha256
	// recorded: name -> sha256 last written to the file by this instance
	// (pending or learnt), so a definition is written once.
	recorded map[string]string
	stamp    fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
	ok   bool
}

// NewToolPins reads cfg.File (a missing file has no pins) and returns its
// ToolPins.
func NewToolPins(cfg ToolPinsConfig) (*ToolPins, error) {
	if cfg.File == "" {
		return nil, errors.New("pins.file: required")
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = PinsEnforce
	case PinsEnforce, PinsLearn:
	default:
		return nil, fmt.Errorf("pins.mode: %q is not enforce or learn", cfg.Mode)
	}
	tp := &ToolPins{path: cfg.File, mode: cfg.Mode, log: cfg.Logger, now: cfg.Now, recorded: map[string]string{}}
	if tp.log == nil {
		tp.log = slog.Default()
	}
	if tp.now == nil {
		tp.now = time.Now
	}
	if err := tp.Reload(); err != nil {
		return nil, fmt.Errorf("pins.file: %w", err)
	}
	return tp, nil
}

// Mode is PinsEnforce or PinsLearn.
func (tp *ToolPins) Mode() string { return tp.mode }

func stampOf(path string) fileStamp {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{mod: st.ModTime(), size: st.Size(), ok: true}
}

// Reload reads the file again. A file that cannot be parsed leaves the
// pins as they were and is reported.
func (tp *ToolPins) Reload() error {
	st := stampOf(tp.path)
	pf, err := ReadPinsFile(tp.path)
	if err != nil {
		return err
	}
	approved := make(map[string]string, len(pf.Tools))
	for name, t := range pf.Tools {
		approved[name] = t.SHA256
	}
	tp.mu.Lock()
	tp.approved, tp.stamp = approved, st
	tp.mu.Unlock()
	return nil
}

// ReloadIfChanged reloads the file when its modification time or size
// differ from those of the last read; it reports whether it reloaded.
func (tp *ToolPins) ReloadIfChanged() (bool, error) {
	st := stampOf(tp.path)
	tp.mu.RLock()
	same := st == tp.stamp
	tp.mu.RUnlock()
	if same {
		return false, nil
	}
	return true, tp.Reload()
}

// Watch reloads the file when it changes, checking every interval, until
// stop is closed. A file that cannot be parsed is logged and the pins
// stay as they were.
func (tp *ToolPins) Watch(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if ok, err := tp.ReloadIfChanged(); err != nil {
				tp.log.Warn("rsmiddleware: pins file not reloaded; the previous pins stay", "file", tp.path, "error", err)
			} else if ok {
				tp.log.Info("rsmiddleware: pins file reloaded", "file", tp.path)
			}
		}
	}
}

// Pinned returns the pinned digest of name ("" when none).
func (tp *ToolPins) Pinned(name string) string {
	tp.mu.RLock()
	defer tp.mu.RUnlock()
	return tp.approved[name]
}

// Listed decides a definition seen in a tools/list answer: it reports
// whether sha is the approved digest of name, and the digest pinned
// before ("" when none). In PinsLearn a name without a pin is pinned to
// sha and written to the file. A definition that is not approved is
// recorded once in the file's pending section for the CLI; a file that
// cannot be written is logged, and decides nothing.
func (tp *ToolPins) Listed(name, sha string, canonical []byte) (ok bool, pinned string) {
	tp.mu.RLock()
	pinned = tp.approved[name]
	done := tp.recorded[name] == sha
	tp.mu.RUnlock()
	if pinned == sha {
		return true, pinned
	}
	if pinned == "" && tp.mode == PinsLearn {
		tp.mu.Lock()
		if cur := tp.approved[name]; cur != "" {
			tp.mu.Unlock()
			return cur == sha, cur
		}
		tp.approved[name] = sha
		tp.mu.Unlock()
		other := ""
		err := UpdatePinsFile(tp.path, func(pf *PinsFile) (bool, error) {
			if t, ok := pf.Tools[name]; ok {
				other = t.SHA256 // pinned by another writer meanwhile: that pin holds
				return false, nil
			}
			pf.Tools[name] = PinnedTool{SHA256: sha, Definition: canonical}
			delete(pf.Pending, name)
			return true, nil
		})
		switch {
		case err != nil:
			tp.log.Warn("rsmiddleware: learnt pin not written", "file", tp.path, "tool", name, "error", err)
		case other != "" && other != sha:
			tp.mu.Lock()
			tp.approved[name] = other
			delete(tp.recorded, name)
			tp.mu.Unlock()
			return tp.Listed(name, sha, canonical)
		default:
			tp.log.Info("rsmiddleware: tool pinned on first use", "tool", name, "sha256", sha)
		}
		return true, ""
	}
	if !done {
		tp.mu.Lock()
		full := len(tp.recorded) >= MaxPending
		if !full {
			tp.recorded[name] = sha
		}
		tp.mu.Unlock()
		if full {
			tp.log.Warn("rsmiddleware: pending definition not recorded: this instance recorded the most it records", "tool", name, "max", MaxPending)
			return false, pinned
		}
		now := tp.now().UTC().Truncate(time.Second)
		err := UpdatePinsFile(tp.path, func(pf *PinsFile) (bool, error) {
			if p, ok := pf.Pending[name]; ok && p.SHA256 == sha {
				return false, nil
			}
			if pf.Pending == nil {
				pf.Pending = map[string]PinnedTool{}
			}
			if _, ok := pf.Pending[name]; !ok && len(pf.Pending) >= MaxPending {
				return false, errors.New("the file's pending section is full")
			}
			pf.Pending[name] = PinnedTool{SHA256: sha, Definition: canonical, Seen: &now}
			return true, nil
		})
		if err != nil {
			tp.log.Warn("rsmiddleware: pending definition not recorded", "file", tp.path, "tool", name, "error", err)
		}
	}
	return false, pinned
}

// Approve moves the pending definitions of names (all of them when all is
// set) into the approved tools of the pins file at path. It returns the
// names approved; a name without a pending definition is an error.
func Approve(path string, names []string, all bool) ([]string, error) {
	var done []string
	err := UpdatePinsFile(path, func(pf *PinsFile) (bool, error) {
		if all {
			names = Names(pf.Pending)
		}
		for _, n := range names {
			p, ok := pf.Pending[n]
			if !ok {
				return false, fmt.Errorf("%q has no pending definition", n)
			}
			pf.Tools[n] = PinnedTool{SHA256: p.SHA256, Definition: p.Definition}
			delete(pf.Pending, n)
			done = append(done, n)
		}
		return len(done) > 0, nil
	})
	return done, err
}
