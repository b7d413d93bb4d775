//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/mcpauth/mcpauth/internal/password"
)

// ttySession runs `authserver hash-password` with a pseudo-terminal as stdin
// and stderr (stdout, the hash, goes to a buffer) and answers each prompt in
// turn, once the terminal's echo is off.
func ttySession(t *testing.T, answers ...string) (stdout, screen string, err error) {
	t.Helper()
	ptmx, tty, perr := pty.Open()
	if perr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no pseudo-terminal: %v", perr)
		}
		t.Skipf("no pseudo-terminal: %v", perr)
	}
	defer ptmx.Close()
	cmd := exec.Command(binary(t), "hash-password")
	cmd.Env = baseEnv()
	var out bytes.Buffer
	cmd.Stdin, cmd.Stderr, cmd.Stdout = tty, tty, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Everything the program writes to the terminal.
	var screenBuf syncBuffer
	go func() {
		b := make([]byte, 1024)
		for {
			n, err := ptmx.Read(b)
			screenBuf.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	prompts := []string{"Password: ", "Repeat the password: "}
	for i, a := range answers {
		waitFor(t, func() bool { return strings.Count(screenBuf.String(), prompts[i]) == 1 && echoOff(ptmx) }, "prompt "+prompts[i]+" with echo off", &screenBuf)
		if _, err := ptmx.Write([]byte(a + "\r")); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("hash-password did not finish; terminal shows %q", screenBuf.String())
	}
	time.Sleep(50 * time.Millisecond) // let the reader drain the last bytes
	return out.String(), screenBuf.String(), err
}

func echoOff(f *os.File) bool {
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil && tio.Lflag&unix.ECHO == 0
}

func waitFor(t *testing.T, cond func() bool, what string, screen *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; terminal shows %q", what, screen.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHashPasswordOnATerminal(t *testing.T) {
	const pw = "correct-horse-battery"
	t.Run("asks twice without echo and prints a hash that verifies", func(t *testing.T) {
		out, screen, err := ttySession(t, pw, pw)
		if err != nil {
			t.Fatalf("%v; terminal shows %q", err, screen)
		}
		if strings.Contains(screen, pw) {
			t.Fatalf("the password was echoed: %q", screen)
		}
		if ok, err := password.Check(strings.TrimSpace(out), pw); err != nil || !ok {
			t.Fatalf("hash %q does not verify: %v", out, err)
		}
	})
	t.Run("refuses two different answers", func(t *testing.T) {
		out, screen, err := ttySession(t, pw, pw+"-typo")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(screen, "the two passwords differ") || out != "" {
			t.Fatalf("%v, stdout %q, terminal %q", err, out, screen)
		}
	})
	t.Run("refuses a short password before asking again", func(t *testing.T) {
		out, screen, err := ttySession(t, "short")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(screen, "at least 12 are required") ||
			strings.Contains(screen, "Repeat") || out != "" {
			t.Fatalf("%v, stdout %q, terminal %q", err, out, screen)
		}
	})
}
