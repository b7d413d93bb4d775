package rsmiddleware

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func entryOf(t testing.TB, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestToolDefinitionDigest(t *testing.T) {
	base := `{"name":"w","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"number"}}}}`
	_, want, err := ToolDefinition(entryOf(t, base))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, entry string
		same        bool
	}{
		{"ignores member order and white space", `{ "inputSchema" : {"properties":{"a":{"type":"number"}},"type":"object"}, "description":"d", "name":"w" }`, true},
		{"ignores members outside the definition", `{"name":"w","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"number"}}},"_meta":{"x":1},"icons":[]}`, true},
		{"reads escapes as their characters", `{"name":"w","description":"\u0064","inputSchema":{"type":"object","properties":{"a":{"type":"number"}}}}`, true},
		{"changes with the description", `{"name":"w","description":"d.","inputSchema":{"type":"object","properties":{"a":{"type":"number"}}}}`, false},
		{"changes with a schema", `{"name":"w","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`, false},
		{"changes with annotations", `{"name":"w","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"number"}}},"annotations":{"destructiveHint":true}}`, false},
		{"changes with a title", `{"name":"w","title":"W","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"number"}}}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, got, err := ToolDefinition(entryOf(t, c.entry))
			if err != nil {
				t.Fatal(err)
			}
			if (got == want) != c.same {
				t.Errorf("digest %s, base %s, same=%v wanted", got, want, c.same)
			}
		})
	}
}

func pinnedJSON(t testing.TB, def string) string {
	t.Helper()
	c, sha, err := ToolDefinition(entryOf(t, def))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"sha256":%q,"definition":%s}`, sha, c)
}

func TestParsePinsFile(t *testing.T) {
	good := pinnedJSON(t, `{"name":"w","description":"d"}`)
	sha := strings.Split(good, `"`)[3]
	for _, c := range []struct {
		name, file, err string
	}{
		{"reads an empty file as no pins", "", ""},
		{"reads a pinned definition", `{"tools":{"w":` + good + `}}`, ""},
		{"reads a digest without its definition", `{"tools":{"w":{"sha256":"` + sha + `"}}}`, ""},
		{"reads pending definitions", `{"tools":{},"pending":{"w":` + good + `}}`, ""},
		{"refuses unknown members", `{"tools":{},"extra":1}`, "unknown field"},
		{"refuses a digest that is not hex", `{"tools":{"w":{"sha256":"` + strings.ToUpper(sha) + `"}}}`, "64 lowercase hex"},
		{"refuses a short digest", `{"tools":{"w":{"sha256":"ab"}}}`, "64 lowercase hex"},
		{"refuses a definition of another digest", `{"tools":{"w":{"sha256":"` + strings.Repeat("0", 64) + `","definition":{"name":"w","description":"d"}}}}`, "not the entry's"},
		{"refuses a definition of another name", `{"tools":{"v":` + good + `}}`, "its name is not the entry's"},
		{"refuses data after the object", `{"tools":{}} {}`, "data after"},
		{"refuses an array", `[]`, "pins file"},
		{"refuses an empty name", `{"tools":{"":{"sha256":"` + sha + `"}}}`, "empty tool name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePinsFile([]byte(c.file))
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("ParsePinsFile: %v, want %q", err, c.err)
			}
		})
	}
}

func TestUpdatePinsFileConcurrentWritersLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins.json")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("tool%d", i)
			c, sha, _ := ToolDefinition(entryOf(t, `{"name":"`+name+`"}`))
			err := UpdatePinsFile(path, func(pf *PinsFile) (bool, error) {
				pf.Tools[name] = PinnedTool{SHA256: sha, Definition: c}
				return true, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	pf, err := ReadPinsFile(path)
	if err != nil || len(pf.Tools) != 16 {
		t.Fatalf("after 16 concurrent writers: %d tools, %v", len(pf.Tools), err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".pins.json.*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestPinsLearnKeepsAnotherWritersPin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins.json")
	a, _ := NewToolPins(ToolPinsConfig{File: path, Mode: PinsLearn})
	b, _ := NewToolPins(ToolPinsConfig{File: path, Mode: PinsLearn})
	ca, sa, _ := ToolDefinition(entryOf(t, `{"name":"w","description":"a"}`))
	cb, sb, _ := ToolDefinition(entryOf(t, `{"name":"w","description":"b"}`))
	if ok, _ := a.Listed("w", sa, ca); !ok {
		t.Fatal("first definition not learnt")
	}
	if ok, pinned := b.Listed("w", sb, cb); ok || pinned != sa {
		t.Fatalf("a second instance learnt another definition: ok=%v pinned=%s", ok, pinned)
	}
	pf, _ := ReadPinsFile(path)
	if pf.Tools["w"].SHA256 != sa || pf.Pending["w"].SHA256 != sb {
		t.Errorf("file %+v: want a's pin and b's definition pending", pf)
	}
}

func FuzzParsePinsFile(f *testing.F) {
	c, sha, _ := ToolDefinition(map[string]json.RawMessage{"name": json.RawMessage(`"w"`), "description": json.RawMessage(`"d"`)})
	f.Add([]byte(`{"tools":{"w":{"sha256":"` + sha + `","definition":` + string(c) + `}}}`))
	f.Add([]byte(`{"tools":{},"pending":{"w":{"sha256":"` + sha + `","seen":"2026-01-01T00:00:00Z"}}}`))
	f.Add([]byte(`{"tools":null}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := ParsePinsFile(data)
		if err != nil {
			return
		}
		out, err := pf.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed file: %v", err)
		}
		again, err := ParsePinsFile(out)
		if err != nil {
			t.Fatalf("the written file does not parse: %v\n%s", err, out)
		}
		out2, _ := again.Marshal()
		if string(out) != string(out2) {
			t.Fatalf("written form not stable:\n%s\n%s", out, out2)
		}
	})
}

func TestNewToolPinsRefusesAnUnreadableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins.json")
	if err := os.WriteFile(path, []byte(`{"tools":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewToolPins(ToolPinsConfig{File: path}); err == nil || !strings.Contains(err.Error(), "pins.file") {
		t.Errorf("NewToolPins of a broken file: %v", err)
	}
	if _, err := NewToolPins(ToolPinsConfig{File: path + ".absent", Mode: "trust"}); err == nil || !strings.Contains(err.Error(), "pins.mode") {
		t.Errorf("NewToolPins with mode trust: %v", err)
	}
}
