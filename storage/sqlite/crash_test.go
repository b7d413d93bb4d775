//go:build unix

package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// crashEnv, when set to a database path, turns this test binary into the
// writer that TestAcknowledgedWritesSurviveSIGKILL kills.
const crashEnv = "MCPAUTH_SQLITE_CRASH_WRITER"

// TestCrashWriter is the helper process: it writes forever and prints one
// line per acknowledged write, after the call returned.
//
//	ack token SIG      CreateToken returned nil
//	ack deact SIG      DeactivateToken returned nil
//	ack txn SIG        a transaction creating token SIG and client SIG committed
func TestCrashWriter(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process for TestAcknowledgedWritesSurviveSIGKILL")
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	if _, err := s.Migrate(ctx); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	// Several writers at once, so that acknowledged writes come from shared
	// (group) commits as well as from transactions.
	var mu sync.Mutex
	ack := func(what, sig string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(os.Stdout, "ack", what, sig) // unbuffered: printed after the write returned
	}
	fail := func(err error) {
		mu.Lock()
		fmt.Fprintln(os.Stdout, "error", err)
		os.Exit(2)
	}
	for w := range 8 {
		go func() {
			for i := 0; ; i++ {
				sig := fmt.Sprintf("w%d-%06d", w, i)
				tok := &storage.Token{Kind: storage.KindRefreshToken, Signature: sig, RequestID: "r", Active: true,
					ExpiresAt: time.Now().Add(time.Hour), Data: []byte(sig)}
				switch i % 3 {
				case 0, 1:
					if err := s.CreateToken(ctx, tok); err != nil {
						fail(err)
					}
					ack("token", sig)
					if i%3 == 1 {
						if err := s.DeactivateToken(ctx, storage.KindRefreshToken, sig); err != nil {
							fail(err)
						}
						ack("deact", sig)
					}
				case 2:
					txCtx, err := s.BeginTX(ctx)
					if err == nil {
						err = s.CreateToken(txCtx, tok)
					}
					if err == nil {
						err = s.CreateClient(txCtx, &storage.Client{ID: sig, Source: "dcr"})
					}
					if err == nil {
						err = s.Commit(txCtx)
					}
					if err != nil {
						fail(err)
					}
					ack("txn", sig)
				}
			}
		}()
	}
	select {}
}

func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("inside the helper")
	}
	path := filepath.Join(t.TempDir(), "authserver.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type ack struct{ what, sig string }
	var acks []ack
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "error") {
			t.Fatalf("helper failed: %s", line)
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "ack" {
			continue // test framework output
		}
		acks = append(acks, ack{f[1], f[2]})
		// Kill in the middle of the write stream, with writes in flight.
		if !killed && len(acks) >= 2000 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
			// Keep reading: lines already written were acknowledged.
		}
	}
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if !killed || !errors.As(err, &exitErr) {
		t.Fatalf("helper was not killed (killed=%v, wait=%v)", killed, err)
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want SIGKILL", err)
	}

	s := openMigrated(t, path)
	ctx := context.Background()
	for _, a := range acks {
		tok, err := s.GetToken(ctx, storage.KindRefreshToken, a.sig)
		if err != nil {
			t.Fatalf("acknowledged %s %s lost after SIGKILL: %v", a.what, a.sig, err)
		}
		switch a.what {
		case "deact":
			if tok.Active {
				t.Fatalf("acknowledged deactivation of %s lost after SIGKILL", a.sig)
			}
		case "txn":
			if _, err := s.GetClient(ctx, a.sig); err != nil {
				t.Fatalf("client of acknowledged transaction %s lost after SIGKILL: %v", a.sig, err)
			}
		}
	}
	t.Logf("%d acknowledged writes, all present after SIGKILL", len(acks))
}
