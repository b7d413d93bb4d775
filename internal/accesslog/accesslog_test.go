package accesslog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/internal/metrics"
)

type line struct {
	Msg      string `json:"msg"`
	Method   string `json:"method"`
	Path     string `json:"path"`
	Status   int    `json:"status"`
	ClientID string `json:"client_id"`
	Error    string `json:"error"`
	Addr     string `json:"addr"`
	Duration int64  `json:"duration"`
}

func serve(t *testing.T, h http.HandlerFunc, req *http.Request) (line, string) {
	t.Helper()
	var buf bytes.Buffer
	w := Wrap(h, Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Metrics: metrics.New()})
	w.ServeHTTP(httptest.NewRecorder(), req)
	var l line
	if err := json.Unmarshal(buf.Bytes(), &l); err != nil {
		t.Fatalf("access line is not one JSON object: %v %q", err, buf.String())
	}
	return l, buf.String()
}

func TestOneLinePerRequest(t *testing.T) {
	jsonError := func(status int, code string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			r.ParseForm()
			w.Header().Set("Content-Type", "application/json;charset=UTF-8")
			w.WriteHeader(status)
			w.Write([]byte(`{"error":"` + code + `","error_description":"The code is wrong."}`))
		}
	}
	form := func(v url.Values) *http.Request {
		r := httptest.NewRequest("POST", "/token?x=secret-in-query", strings.NewReader(v.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}
	basic := form(url.Values{"grant_type": {"client_credentials"}})
	basic.SetBasicAuth(url.QueryEscape("bot:1"), "the-basic-password")
	cases := []struct {
		name       string
		h          http.HandlerFunc
		req        *http.Request
		want       line
		neverShows []string
	}{
		{"logs a token error with the form's client and the error code",
			jsonError(400, "invalid_grant"),
			form(url.Values{"client_id": {"app"}, "code": {"the-code-value"}, "code_verifier": {"the-verifier"}}),
			line{Method: "POST", Path: "/token", Status: 400, ClientID: "app", Error: "invalid_grant"},
			[]string{"the-code-value", "the-verifier", "secret-in-query"}},
		{"takes the client from HTTP Basic, never the password",
			jsonError(401, "invalid_client"), basic,
			line{Method: "POST", Path: "/token", Status: 401, ClientID: "bot:1", Error: "invalid_client"},
			[]string{"the-basic-password"}},
		{"reads the error of a redirect, not the redirect",
			func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "https://app.example/cb?error=access_denied&state=st4te-value", http.StatusSeeOther)
			},
			httptest.NewRequest("GET", "/authorize?client_id=app&state=st4te-value&code_challenge=chal", nil),
			line{Method: "GET", Path: "/authorize", Status: 303, ClientID: "app", Error: "access_denied"},
			[]string{"st4te-value", "chal", "app.example"}},
		{"does not log the code of a successful redirect",
			func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "https://app.example/cb?code=the-code-value", http.StatusSeeOther)
			},
			httptest.NewRequest("GET", "/authorize?client_id=app", nil),
			line{Method: "GET", Path: "/authorize", Status: 303, ClientID: "app"},
			[]string{"the-code-value"}},
		{"reads the error of a Bearer challenge",
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="x", error="invalid_token", error_description="bad"`)
				w.WriteHeader(401)
			},
			func() *http.Request {
				r := httptest.NewRequest("GET", "/admin/v1/keys", nil)
				r.Header.Set("Authorization", "Bearer the-access-token")
				return r
			}(),
			line{Method: "GET", Path: "/admin/v1/keys", Status: 401, Error: "invalid_token"},
			[]string{"the-access-token"}},
		{"takes a client a handler set",
			func(w http.ResponseWriter, r *http.Request) {
				SetClientID(r.Context(), "ops-bot")
				w.Write([]byte("{}"))
			},
			httptest.NewRequest("GET", "/admin/v1/keys", nil),
			line{Method: "GET", Path: "/admin/v1/keys", Status: 200, ClientID: "ops-bot"}, nil},
		{"drops an error code with characters RFC 6749 forbids",
			jsonError(400, `bad code`), form(nil),
			line{Method: "POST", Path: "/token", Status: 400}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, raw := serve(t, tc.h, tc.req)
			if got.Msg != "access" || got.Addr == "" {
				t.Errorf("msg %q addr %q", got.Msg, got.Addr)
			}
			got.Msg, got.Addr, got.Duration = "", "", 0
			if got != tc.want {
				t.Errorf("line = %+v, want %+v", got, tc.want)
			}
			for _, s := range tc.neverShows {
				if strings.Contains(raw, s) {
					t.Errorf("the line shows %q: %s", s, raw)
				}
			}
		})
	}
}

func TestClassifiedRequestsAreCounted(t *testing.T) {
	m := metrics.New()
	w := Wrap(http.NotFoundHandler(), Config{Metrics: m, Classify: func(string) metrics.Endpoint { return metrics.Token }})
	w.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `mcpauth_http_requests_total{code="404",endpoint="token"} 1`) {
		t.Fatalf("request not counted:\n%s", rec.Body.String())
	}
}

// FuzzErrorCode: whatever a response says, the code read from it is empty
// or made of RFC 6749 §5.2 error characters, and nothing panics.
func FuzzErrorCode(f *testing.F) {
	f.Add([]byte(`{"error":"invalid_grant"}`), `Bearer error="invalid_token"`, "https://a/cb?error=access_denied")
	f.Add([]byte(`{"error" : "x`), `error="`, "https://a/cb#error=x")
	f.Add([]byte(`"error""error":1`), `Bearer ,error="a b"`, "%zz")
	f.Fuzz(func(t *testing.T, body []byte, challenge, location string) {
		for _, c := range []string{validCode(jsonErrorMember(body)), validCode(challengeError(challenge))} {
			if len(c) > 64 || strings.ContainsAny(c, " \"\\\n") {
				t.Fatalf("code %q", c)
			}
		}
		rw := &recorder{ResponseWriter: httptest.NewRecorder(), status: 302}
		rw.Header().Set("Location", location)
		if c := rw.errorCode(); len(c) > 64 || strings.ContainsAny(c, " \"\\\n") {
			t.Fatalf("redirect code %q", c)
		}
	})
}

// A 103 Early Hints before the answer is not the request's status: the line
// and the error code are the final answer's.
func TestInformationalAnswerIsNotTheStatus(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"invalid_request"}`))
	}
	l, raw := serve(t, h, httptest.NewRequest("GET", "/authorize", nil))
	if l.Status != http.StatusBadRequest || l.Error != "invalid_request" {
		t.Fatalf("line %s, want status 400 with error invalid_request", raw)
	}
}

// Observe is told of every answer: its status and the OAuth error code the
// line names, also without a Logger.
func TestObserveSeesStatusAndErrorCode(t *testing.T) {
	type seen struct {
		path   string
		status int
		code   string
	}
	var got []seen
	w := Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/token":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"invalid_grant"}`))
		case "/authorize":
			http.Redirect(w, r, "https://app.example/cb?error=access_denied&state=s", http.StatusSeeOther)
		default:
			w.Write([]byte("ok"))
		}
	}), Config{Observe: func(r *http.Request, status int, code string) { got = append(got, seen{r.URL.Path, status, code}) }})
	for _, p := range []string{"/token", "/authorize", "/jwks.json"} {
		w.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	want := []seen{{"/token", 400, "invalid_grant"}, {"/authorize", 303, "access_denied"}, {"/jwks.json", 200, ""}}
	if len(got) != len(want) {
		t.Fatalf("observed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("observed %v, want %v", got, want)
		}
	}
}
