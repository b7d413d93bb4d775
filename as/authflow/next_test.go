package authflow

import (
	"slices"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	alice := Session{ID: "s1", Subject: "alice", AuthTime: now.Add(-time.Hour)}
	type txn = func(*Transaction)
	for _, tc := range []struct {
		name     string
		txn      txn
		sess     Session
		inactive bool
		cap      Cap
		remember []string
		only     bool
		want     Decision
	}{
		{name: "nobody signed in is asked to sign in", sess: Session{ID: "s0"}, want: Decision{Step: SignIn, MaxAge: -1}},
		{name: "nobody signed in goes to the only provider", sess: Session{ID: "s0"}, only: true, want: Decision{Step: SignInAt, MaxAge: -1}},
		{name: "a person no longer active is asked to sign in", sess: alice, inactive: true, want: Decision{Step: SignIn, MaxAge: -1}},
		{name: "a signed-in person with nothing remembered is asked to consent", sess: alice, want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "prompt=login asks for a new sign-in", sess: alice, txn: func(t *Transaction) { t.Request.ForceLogin = true }, want: Decision{Step: SignIn, MaxAge: 0}},
		{name: "prompt=login at the only provider asks it for a new sign-in", sess: alice, only: true, txn: func(t *Transaction) { t.Request.ForceLogin = true }, want: Decision{Step: SignInAt, MaxAge: 0}},
		{name: "prompt=login is satisfied by a sign-in during the transaction", sess: alice, txn: func(t *Transaction) { t.Request.ForceLogin = true; t.SignedIn = "alice" },
			want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "prompt=login is not satisfied by someone else's sign-in", sess: alice, txn: func(t *Transaction) { t.Request.ForceLogin = true; t.SignedIn = "bob" }, want: Decision{Step: SignIn, MaxAge: 0}},
		{name: "a sign-in older than max_age is asked again", sess: alice, txn: func(t *Transaction) { t.Request.MaxAge = 3599 }, want: Decision{Step: SignIn, MaxAge: 3599}},
		{name: "a sign-in exactly max_age old stands", sess: alice, txn: func(t *Transaction) { t.Request.MaxAge = 3600 }, want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "max_age=0 is satisfied by a sign-in during the transaction", sess: alice, txn: func(t *Transaction) { t.Request.MaxAge = 0; t.SignedIn = "alice" },
			want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "a named scope beyond the cap is not permitted", sess: alice, cap: Cap{Scopes: []string{"mcp:tools"}, Capped: true},
			txn: func(t *Transaction) { t.Request.Scopes = []string{"mcp:tools", "mcp:admin"} }, want: Decision{Step: NotPermitted, NotPermitted: []string{"mcp:admin"}}},
		{name: "default scopes are narrowed to the cap", sess: alice, cap: Cap{Scopes: []string{"mcp:tools"}, Capped: true},
			txn: func(t *Transaction) {
				t.Request.Scopes = []string{"mcp:tools", "mcp:admin"}
				t.Request.ScopesNamed = false
			},
			want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "default scopes none of which the cap allows are not permitted", sess: alice, cap: Cap{Capped: true},
			txn: func(t *Transaction) { t.Request.ScopesNamed = false }, want: Decision{Step: NotPermitted, NotPermitted: []string{"mcp:tools"}}},
		{name: "the cap applies before a remembered consent", sess: alice, cap: Cap{Capped: true}, remember: []string{"mcp:tools"},
			want: Decision{Step: NotPermitted, NotPermitted: []string{"mcp:tools"}}},
		{name: "offline_access is never capped", sess: alice, cap: Cap{Scopes: []string{"mcp:tools"}, Capped: true},
			txn: func(t *Transaction) { t.Request.Scopes = []string{"mcp:tools", "offline_access"} }, want: Decision{Step: Consent, Scopes: []string{"mcp:tools", "offline_access"}}},
		{name: "a denial is answered access_denied", sess: alice, txn: func(t *Transaction) { t.RecordAsked("alice", []string{"mcp:tools"}); t.RecordAnswer(Denied) },
			want: Decision{Step: Deny}},
		{name: "an approval issues what was asked", sess: alice, txn: func(t *Transaction) { t.RecordAsked("alice", []string{"mcp:tools"}); t.RecordAnswer(Approved) },
			want: Decision{Step: Issue, Scopes: []string{"mcp:tools"}}},
		{name: "an approval issues no more than was asked", sess: alice,
			txn: func(t *Transaction) {
				t.Request.Scopes = []string{"mcp:tools", "mcp:admin"}
				t.RecordAsked("alice", []string{"mcp:tools"})
				t.RecordAnswer(Approved)
			},
			want: Decision{Step: Issue, Scopes: []string{"mcp:tools"}}},
		{name: "an approval issues no more than the cap allows now", sess: alice, cap: Cap{Scopes: []string{"mcp:tools"}, Capped: true},
			txn: func(t *Transaction) {
				t.Request.Scopes, t.Request.ScopesNamed = []string{"mcp:tools", "mcp:admin"}, false
				t.RecordAsked("alice", []string{"mcp:tools", "mcp:admin"})
				t.RecordAnswer(Approved)
			},
			want: Decision{Step: Issue, Scopes: []string{"mcp:tools"}}},
		{name: "another person's answer is not this one's", sess: alice, txn: func(t *Transaction) { t.RecordAsked("bob", []string{"mcp:tools"}); t.RecordAnswer(Approved) },
			want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "a sign-in during the transaction forgets an earlier answer", sess: alice, txn: func(t *Transaction) {
			t.RecordAsked("alice", []string{"mcp:tools"})
			t.RecordAnswer(Approved)
			t.RecordSignIn("alice", "s2")
		}, want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "an unanswered page is asked again", sess: alice, txn: func(t *Transaction) { t.RecordAsked("alice", []string{"mcp:tools"}) },
			want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "a remembered consent covering the request issues", sess: alice, remember: []string{"mcp:tools", "mcp:admin"}, want: Decision{Step: Issue, Scopes: []string{"mcp:tools"}}},
		{name: "a remembered consent that may not be used silently asks to confirm", sess: alice, remember: []string{"mcp:tools"},
			txn: func(t *Transaction) { t.Request.ConfirmRemembered = true }, want: Decision{Step: Confirm, Scopes: []string{"mcp:tools"}}},
		{name: "a confirmed remembered consent issues", sess: alice, remember: []string{"mcp:tools"},
			txn: func(t *Transaction) {
				t.Request.ConfirmRemembered = true
				t.RecordAsked("alice", []string{"mcp:tools"})
				t.RecordAnswer(Approved)
			},
			want: Decision{Step: Issue, Scopes: []string{"mcp:tools"}}},
		{name: "prompt=consent asks whatever is remembered", sess: alice, remember: []string{"mcp:tools"},
			txn: func(t *Transaction) { t.Request.ForceConsent = true }, want: Decision{Step: Consent, Scopes: []string{"mcp:tools"}}},
		{name: "prompt=consent answered issues", sess: alice, remember: []string{"mcp:tools"},
			txn: func(t *Transaction) {
				t.Request.ForceConsent = true
				t.RecordAsked("alice", []string{"mcp:tools"})
				t.RecordAnswer(Approved)
			},
			want: Decision{Step: Issue, Scopes: []string{"mcp:tools"}}},
		{name: "a step-up asks about the new scopes with the remembered ones apart", sess: alice, remember: []string{"mcp:tools"},
			txn:  func(t *Transaction) { t.Request.Scopes = []string{"mcp:tools", "mcp:admin"} },
			want: Decision{Step: Consent, Scopes: []string{"mcp:tools", "mcp:admin"}, Approved: []string{"mcp:tools"}}},
		{name: "a remembered consent of no scopes covers a request of none", sess: alice, remember: []string{},
			txn: func(t *Transaction) { t.Request.Scopes = nil }, want: Decision{Step: Issue}},
		{name: "nothing remembered asks even for no scopes", sess: alice, txn: func(t *Transaction) { t.Request.Scopes = nil }, want: Decision{Step: Consent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := &Transaction{ID: "t", Session: tc.sess.ID, Request: Request{ClientID: "app", Scopes: []string{"mcp:tools"}, ScopesNamed: true, MaxAge: -1}}
			if tc.txn != nil {
				tc.txn(tx)
			}
			got := Next(Input{Txn: tx, Session: tc.sess, Active: !tc.inactive, Cap: tc.cap, Remembered: tc.remember, OnlyProvider: tc.only, Now: now})
			if got.Step != tc.want.Step || !slices.Equal(got.Scopes, tc.want.Scopes) || !slices.Equal(got.Approved, tc.want.Approved) ||
				!slices.Equal(got.NotPermitted, tc.want.NotPermitted) || (isSignIn(got.Step) && got.MaxAge != tc.want.MaxAge) {
				t.Fatalf("Next = %+v (%s), want %+v (%s)", got, got.Step, tc.want, tc.want.Step)
			}
		})
	}
}

func isSignIn(s Step) bool { return s == SignIn || s == SignInAt }

func TestStepNames(t *testing.T) {
	for s, want := range map[Step]string{SignIn: "sign_in", SignInAt: "sign_in_at_provider", NotPermitted: "not_permitted", Consent: "consent",
		Confirm: "confirm", Issue: "issue", Deny: "deny", 0: "unknown", 99: "unknown"} {
		if s.String() != want {
			t.Errorf("Step(%d) = %q, want %q", int(s), s.String(), want)
		}
	}
}
