package authflow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpauth/mcpauth/as/authflow"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// A transaction from validation to the code: the decision at each step
// comes from Next alone, and each step's copy is usable once.
func ExampleNext() {
	ctx := context.Background()
	c, err := authflow.NewCodec([]byte("an example secret of at least 32 bytes"), memory.New(), 0, nil)
	if err != nil {
		panic(err)
	}
	// The authorization endpoint validated the request.
	t := c.New(authflow.Request{ClientID: "app", Resource: "https://mcp.example/mcp", Scopes: []string{"mcp:tools"}, ScopesNamed: true, MaxAge: -1}, authflow.Display{})
	t.Session = "anonymous-1"
	fmt.Println(authflow.Next(authflow.Input{Txn: t, Session: authflow.Session{ID: "anonymous-1"}, Now: time.Now()}).Step)

	// The login step records who signed in, in their new session, and
	// returns the browser to the transaction.
	t.RecordSignIn("alice", "session-2")
	sealed, _ := c.Seal(t)
	t, _ = c.Open(ctx, sealed, "session-2")
	alice := authflow.Session{ID: "session-2", Subject: "alice", AuthTime: time.Now()}
	d := authflow.Next(authflow.Input{Txn: t, Session: alice, Active: true, Now: time.Now()})
	fmt.Println(d.Step, d.Scopes)

	// The consent page asked, the person approved.
	t.RecordAsked("alice", d.Scopes)
	t.RecordAnswer(authflow.Approved)
	sealed, _ = c.Seal(t)
	t, _ = c.Open(ctx, sealed, "session-2")
	d = authflow.Next(authflow.Input{Txn: t, Session: alice, Active: true, Now: time.Now()})
	fmt.Println(d.Step, d.Scopes)

	// The same copy a second time is refused.
	_, err = c.Open(ctx, sealed, "session-2")
	fmt.Println(err)
	// Output:
	// sign_in
	// consent [mcp:tools]
	// issue [mcp:tools]
	// authflow: transaction step already used
}
