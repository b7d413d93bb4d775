package rsmiddleware

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Actions of Screening (ScreeningConfig.Action).
const (
	// ScreenHide leaves a tool whose definition matches a pattern out of
	// tools/list and refuses its calls.
	ScreenHide = "hide"
	// ScreenAudit only records tool.suspicious.
	ScreenAudit = "audit"
)

// ScreeningPattern is one pattern of the built-in list: its name (what the
// audit records) and its regular expression (RE2 syntax).
type ScreeningPattern struct {
	Name, Expr string
	// Triggers: every match of Expr holds one of them (in lower case), so
	// a text without any is not matched against Expr.
	Triggers []string
}

// BuiltinScreeningPatterns are the instruction patterns every Screening
// matches, in English and Chinese (docs/TOOLS.md lists what each covers
// and what none does). Texts are matched after zero-width and format
// characters are removed and runs of white space made one space, without
// regard to case.
var BuiltinScreeningPatterns = []ScreeningPattern{
	{"ignore-instructions", `\b(ignore|disregard|forget|override|bypass)\b.{0,40}\b(previous|prior|above|earlier|preceding|all|any|other|system|your)\b.{0,30}\b(instructions?|prompts?|rules|directions|directives|guidelines|messages?)\b` +
		`|(忽略|无视|忘记|忘掉|不要理会|绕过).{0,10}(之前|以前|先前|以上|上面|前面|所有|全部|系统|其他).{0,10}(指令|指示|提示|规则|要求|说明)`, []string{"ignore", "disregard", "forget", "override", "bypass", "忽略", "无视", "忘记", "忘掉", "不要理会", "绕过"}},
	{"secret-files", `(~|\$home|/home/[^/\s]+|/root)?/?\.ssh\b|\bid_(rsa|dsa|ecdsa|ed25519)\b|(^|[\s/'"\x60(])\.env\b|\.aws/credentials|\.netrc\b|\.npmrc\b|\.pgpass\b|\.kube/config|\.docker/config\.json|\bprivate[ _-]?keys?\b|/etc/(passwd|shadow)\b|\bmcp\.json\b|(私钥|密钥文件|凭据文件|凭证文件|环境变量文件)`, []string{".ssh", "id_", ".env", ".aws/", ".netrc", ".npmrc", ".pgpass", ".kube/", ".docker/", "private", "/etc/", "mcp.json", "私钥", "密钥文件", "凭据文件", "凭证文件", "环境变量文件"}},
	{"conceal-from-user", `\b(do not|don't|dont|never|must not|without)\b.{0,30}\b(tell|telling|inform|informing|notify|notifying|show|showing|mention|mentioning|reveal|revealing|alert|alerting)\b.{0,30}\b(the )?users?\b` +
		`|\b(hide|conceal|keep)\b.{0,20}\b(this|it|these)\b.{0,20}\bfrom the user|\bsecretly\b` +
		`|(不要|别|切勿|请勿|不得|无需|不必)(向用户|对用户|让用户)?.{0,6}(告诉|告知|通知|提醒|透露|提及|显示|展示)|对用户(隐瞒|保密)|(悄悄|偷偷)地`, []string{"user", "secretly", "告诉", "告知", "通知", "提醒", "透露", "提及", "显示", "展示", "对用户", "悄悄", "偷偷"}},
	{"call-other-tools-first", `\b(before|prior to)\b.{0,40}\b(using|calling|invoking|running|executing)\b.{0,60}\b(must|first|always|need to|required to)\b` +
		`|\b(must|always|first)\b.{0,20}\b(call|invoke|run|use|execute)\b.{0,40}\b(tool|function)\b` +
		`|(调用|使用|运行|执行).{0,20}(之前|以前|前).{0,20}(必须|务必|先|一定要)|(必须|务必|总是|一定要)先.{0,10}(调用|使用|运行|执行)`, []string{"before", "prior to", "must", "always", "first", "调用", "使用", "运行", "执行"}},
	{"send-data-to-url", `\b(send|post|upload|forward|transmit|exfiltrate|submit|report|leak|copy|pass)\b.{0,80}\b(https?|ftp|wss?)://` +
		`|\b(https?|wss?)://[^\s]*(\{|%7b|<)` +
		`|(发送|上传|提交|转发|传送|传给|发给|发到|上报).{0,40}(https?|wss?)://`, []string{"://"}},
	{"instruction-tags", `<\s*/?\s*(important|system|instructions?|secret|hidden|admin)\s*>`, []string{"<"}},
}

// ScreeningConfig configures Screening.
type ScreeningConfig struct {
	// Action is ScreenHide or ScreenAudit. Zero value: ScreenHide.
	Action string
	// Patterns are regular expressions (RE2 syntax, matched without regard
	// to case) added to BuiltinScreeningPatterns; a match is recorded as
	// "screening.patterns[i]".
	Patterns []string
}

// Screening matches the texts of tool definitions against instruction
// patterns. It never tells that a tool is harmless: a definition that
// matches nothing only matched none of its patterns. It is safe for
// concurrent use.
type Screening struct {
	action   string
	names    []string
	res      []*regexp.Regexp
	triggers [][]string // per pattern; nil: matched on every text
}

// NewScreening compiles the built-in patterns and cfg.Patterns; a pattern
// that does not compile is an error naming screening.patterns[i].
func NewScreening(cfg ScreeningConfig) (*Screening, error) {
	s := &Screening{action: cfg.Action}
	switch s.action {
	case "":
		s.action = ScreenHide
	case ScreenHide, ScreenAudit:
	default:
		return nil, fmt.Errorf("screening.action: %q is not hide or audit", cfg.Action)
	}
	for _, p := range BuiltinScreeningPatterns {
		s.names = append(s.names, p.Name)
		s.res = append(s.res, regexp.MustCompile(`(?is)`+p.Expr))
		s.triggers = append(s.triggers, p.Triggers)
	}
	for i, p := range cfg.Patterns {
		if p == "" {
			return nil, fmt.Errorf("screening.patterns[%d]: empty pattern", i)
		}
		re, err := regexp.Compile(`(?is)` + p)
		if err != nil {
			return nil, fmt.Errorf("screening.patterns[%d]: %v", i, err)
		}
		s.names = append(s.names, fmt.Sprintf("screening.patterns[%d]", i))
		s.res = append(s.res, re)
		s.triggers = append(s.triggers, nil)
	}
	return s, nil
}

// Hides reports whether a matching tool is hidden (ScreenHide).
func (s *Screening) Hides() bool { return s.action == ScreenHide }

// Match returns the name of the first pattern that matches a text of the
// tools/list entry (its title and description, every string of its
// annotations, and every description and title in its inputSchema and
// outputSchema, at any depth), or "" when none matches.
func (s *Screening) Match(entry map[string]json.RawMessage) string {
	var texts []string
	for _, k := range []string{"title", "description"} {
		var t string
		if json.Unmarshal(entry[k], &t) == nil && t != "" {
			texts = append(texts, t)
		}
	}
	if a, ok := entry["annotations"]; ok {
		texts = collectStrings(a, texts, false)
	}
	for _, k := range []string{"inputSchema", "outputSchema"} {
		if v, ok := entry[k]; ok {
			texts = collectStrings(v, texts, true)
		}
	}
	for _, t := range texts {
		if n := s.MatchText(t); n != "" {
			return n
		}
	}
	return ""
}

// MatchText returns the name of the first pattern that matches text after
// normalisation, or "".
func (s *Screening) MatchText(text string) string {
	t := normaliseScreened(text)
	lower := foldForTriggers(t)
	for i, re := range s.res {
		if s.triggers[i] != nil && !containsAny(lower, s.triggers[i]) {
			continue // Go's regexp has no DFA: the words are a cheaper first test
		}
		if re.MatchString(t) {
			return s.names[i]
		}
	}
	return ""
}

// foldForTriggers lowers t as (?i) matching folds it into ASCII: the
// Kelvin sign is k and the long s is s, as in Unicode's simple case
// folding.
func foldForTriggers(t string) string {
	l := strings.ToLower(t)
	if strings.ContainsAny(l, "\u017f\u212a") {
		l = strings.NewReplacer("\u017f", "s", "\u212a", "k").Replace(l)
	}
	return l
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// collectStrings appends the strings of the JSON value raw to out: all of
// them, or with schema set only the values of "description" and "title"
// members of objects at any depth.
func collectStrings(raw json.RawMessage, out []string, schema bool) []string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return out
	}
	var walk func(v any, key string, depth int)
	walk = func(v any, key string, depth int) {
		if depth > 64 {
			return
		}
		switch x := v.(type) {
		case string:
			if !schema || key == "description" || key == "title" {
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e, "", depth+1)
			}
		case map[string]any:
			for k, e := range x {
				walk(e, k, depth+1)
			}
		}
	}
	walk(v, "", 0)
	return out
}

// normaliseScreened removes zero-width and other format characters (which
// could split a word a pattern looks for) and makes runs of white space
// one space.
func normaliseScreened(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case r == '\u200b' || r == '\u200c' || r == '\u200d' || r == '\u2060' || r == '\ufeff' || r == '\u00ad' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069'):
			continue
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' || r == '\u00a0' || r == '\u3000':
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}
