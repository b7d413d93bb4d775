package scaletest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// pgCluster is a private PostgreSQL cluster in a temporary directory, for
// tests that stop and start the database (the shared server is used by
// other tests at the same time).
type pgCluster struct {
	bin  string // directory of initdb, pg_ctl
	data string
	port int
	cred *syscall.Credential // run as this user when the test runs as root
}

// postgresBin finds the PostgreSQL server binaries, newest version first.
func postgresBin() string {
	if d := os.Getenv("SCALETEST_PG_BIN"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

// privatePostgres creates and starts a cluster on a free port on 127.0.0.1
// with trust authentication; it is stopped and removed when tb ends. Without
// the binaries the test is skipped, or fails when CI is set.
func privatePostgres(tb testing.TB) *pgCluster {
	tb.Helper()
	bin := postgresBin()
	if bin == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb; or set SCALETEST_PG_BIN) but CI is set")
		}
		tb.Skip("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb); set SCALETEST_PG_BIN to run this test")
	}
	c := &pgCluster{bin: bin}
	dir := tb.TempDir()
	c.data = filepath.Join(dir, "data")
	if err := os.Mkdir(c.data, 0o700); err != nil {
		tb.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: hand the directory to the
		// postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Skipf("running as root and there is no postgres user to run a private cluster: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		for _, d := range []string{filepath.Dir(dir), dir} {
			if err := os.Chmod(d, 0o711); err != nil {
				tb.Fatal(err)
			}
		}
		if err := os.Chown(c.data, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	if out, err := c.run("initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	port, _ := strconv.Atoi(freeAddr(tb)[len("127.0.0.1:"):])
	c.port = port
	c.start(tb)
	tb.Cleanup(func() {
		c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop")
	})
	return c
}

func (c *pgCluster) run(tool string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bin, tool), args...)
	cmd.Dir = c.data
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dsn is a URL for the cluster's postgres database.
func (c *pgCluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", c.port)
}

func (c *pgCluster) start(tb testing.TB) {
	tb.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=100", c.port, c.data)
	if out, err := c.run("pg_ctl", "-D", c.data, "-o", opts, "-l", filepath.Join(c.data, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.data, "server.log"))
		tb.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// stop shuts the cluster down the way an operator restarting it would:
// fast mode, open sessions are terminated.
func (c *pgCluster) stop(tb testing.TB) {
	tb.Helper()
	if out, err := c.run("pg_ctl", "-D", c.data, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		tb.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}
