package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

// shellLines returns the command lines of the sh code blocks of a Markdown
// file, each without a trailing comment ("  # ...") or surrounding spaces.
func shellLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !in && l == "```sh":
			in = true
		case in && l == "```":
			in = false
		case in:
			if i := strings.Index(l, "  #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestTheReadmeCommandsAreTheTestedOnes holds the README's two commands and
// its ten-minute tour to what the tests run: the addresses of the stack
// (TestExampleClient) and of the gateway chain
// (TestExampleClientThroughTheGateway), the files they start from, the demo
// user they sign in as, and the one test command of .ci/run.
func TestTheReadmeCommandsAreTheTestedOnes(t *testing.T) {
	readme := filepath.Join(moduleRoot, "README.md")
	lines := shellLines(t, readme)
	_, tsPort, _ := strings.Cut(tsServerAddr, ":")
	tests := []struct {
		name    string
		command string
		files   []string
	}{
		{"runs the AS on its embedded default storage", "go run ./cmd/authserver serve", nil},
		{"starts the example stack", "go run ./examples/stack", []string{"deploy/authserver.yaml", "deploy/stack.env"}},
		{"calls the Go server's whoami", "go run ./examples/client --server http://" + launch.DefaultMCPAddr + "/mcp --tool whoami", nil},
		{"reads the stack's settings", "set -a; . deploy/stack.env; set +a", []string{"deploy/stack.env"}},
		{"starts the AS of the gateway chain", "go run ./cmd/authserver serve --config deploy/authserver.yaml &", []string{"deploy/authserver.yaml"}},
		{"starts the TypeScript server", "npm ci --prefix e2e/testdata/tsserver && PORT=" + tsPort + " node e2e/testdata/tsserver/server.mjs &",
			[]string{"e2e/testdata/tsserver/package-lock.json", "e2e/testdata/tsserver/server.mjs"}},
		{"starts the gateway", "go run ./cmd/mcpgateway --config deploy/mcpgateway.yaml &", []string{"deploy/mcpgateway.yaml"}},
		{"calls echo through the gateway", "go run ./examples/client --server http://" + gatewayAddr + "/mcp --tool echo --args '{\"text\":\"hi\"}'", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Contains(lines, tc.command) {
				t.Errorf("README.md has no command line %q", tc.command)
			}
			for _, f := range tc.files {
				if _, err := os.Stat(filepath.Join(moduleRoot, f)); err != nil {
					t.Errorf("the command's file: %v", err)
				}
			}
		})
	}

	t.Run("names the demo user the tests sign in as", func(t *testing.T) {
		b, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		if want := "`" + demoUser + "` / `" + demoPassword + "`"; !strings.Contains(string(b), want) {
			t.Errorf("README.md does not name %s", want)
		}
	})

	t.Run(".ci/run runs the README's test command and no other", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(moduleRoot, ".ci", "run"))
		if err != nil {
			t.Fatal(err)
		}
		var tests []string
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "go test") {
				tests = append(tests, l)
			}
		}
		var readmeTests []string
		for _, l := range lines {
			if strings.HasPrefix(l, "go test") {
				readmeTests = append(readmeTests, l)
			}
		}
		if len(readmeTests) != 1 || !slices.Equal(tests, readmeTests) {
			t.Errorf(".ci/run runs %q, the README %q: want one and the same test command", tests, readmeTests)
		}
	})
}

// headingAnchor is the fragment GitHub gives a Markdown heading: lower case,
// every character but letters, digits, spaces, hyphens and underscores
// removed, spaces made hyphens.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	markdownHeading = regexp.MustCompile(`^#{1,6} (.*)`)
	markdownTarget  = regexp.MustCompile(`\]\(([^)\s]*)\)`)
	codeSpan        = regexp.MustCompile("`[^`]*`")
)

// markdownFile is what links need of a Markdown file: its headings'
// anchors, and its links' targets with their line numbers, both outside
// code blocks.
type markdownFile struct {
	anchors map[string]bool
	targets []string
	lines   []int
}

func readMarkdown(t *testing.T, name string) *markdownFile {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	m := &markdownFile{anchors: map[string]bool{}}
	seen := map[string]int{}
	code := false
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			code = !code
		}
		if code {
			continue
		}
		if h := markdownHeading.FindStringSubmatch(l); h != nil {
			a := headingAnchor(h[1])
			if n := seen[a]; n > 0 {
				m.anchors[a+"-"+strconv.Itoa(n)] = true
			} else {
				m.anchors[a] = true
			}
			seen[a]++
		}
		for _, t := range markdownTarget.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, ""), -1) {
			m.targets, m.lines = append(m.targets, t[1]), append(m.lines, i+1)
		}
	}
	return m
}

// TestDocumentationLinksResolve follows every relative link of the
// repository's Markdown files (the README's links to the chapters in docs/
// among them): the file it names exists and, for a Markdown file, so does
// the heading its fragment names.
func TestDocumentationLinksResolve(t *testing.T) {
	var names []string
	err := filepath.WalkDir(moduleRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*markdownFile{}
	read := func(name string) *markdownFile {
		if files[name] == nil {
			files[name] = readMarkdown(t, name)
		}
		return files[name]
	}
	var links int
	for _, name := range names {
		m := read(name)
		for i, target := range m.targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, fragment, _ := strings.Cut(target, "#")
			dest := name
			if path != "" {
				dest = filepath.Join(filepath.Dir(name), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: %s: %v", name, m.lines[i], target, err)
					continue
				}
			}
			if fragment != "" && strings.HasSuffix(dest, ".md") && !read(dest).anchors[fragment] {
				t.Errorf("%s:%d: %s: no heading of %s has the anchor #%s", name, m.lines[i], target, dest, fragment)
			}
		}
	}
	if !slices.Contains(names, filepath.Join(moduleRoot, "README.md")) || links == 0 {
		t.Fatalf("read %d Markdown files with %d relative links: the walk missed the README", len(names), links)
	}
}
