//go:build unix

package testbin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres starts a PostgreSQL server from Debian's packages
// (/usr/lib/postgresql/N/bin, the newest N) on 127.0.0.1 at a free port,
// its data in a new directory, and returns the URL of its database
// "postgres" (user postgres, no password) and a function that stops it and
// removes the data. Run as root, the server runs as user postgres, which
// the package makes (PostgreSQL refuses to run as root). An error when the
// package is absent says so: the tests that need it fail, never skip.
func Postgres(ctx context.Context) (url string, stop func(), err error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		return "", nil, errors.New("PostgreSQL is not installed: no /usr/lib/postgresql/*/bin/postgres (Debian's postgresql package, which .ci/run installs)")
	}
	slices.SortFunc(bins, func(a, b string) int { return pgVersion(a) - pgVersion(b) })
	bin := filepath.Dir(bins[len(bins)-1])
	data, err := os.MkdirTemp("", "rsharvest-pg-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(data) }
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			cleanup()
			return "", nil, fmt.Errorf("running as root, PostgreSQL needs the user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(data, uid, gid); err != nil {
			cleanup()
			return "", nil, err
		}
	}
	command := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
		return cmd
	}
	db := filepath.Join(data, "db")
	if out, err := command(ctx, "initdb", "-D", db, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := command(context.WithoutCancel(ctx), "postgres", "-D", db, "-p", strconv.Itoa(port), "-k", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=100")
	srv.Stdout = os.Stderr
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	stop = func() {
		_ = srv.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = srv.Process.Kill()
			<-exited
		}
		cleanup()
	}
	url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			_ = conn.Close(ctx)
			return url, stop, nil
		}
		select {
		case err := <-exited:
			exited <- err
			stop()
			return "", nil, fmt.Errorf("postgres exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("postgres did not answer on port %d within a minute: %w", port, err)
		}
	}
}

// pgVersion is N of /usr/lib/postgresql/N/bin/postgres (0 if not a number).
func pgVersion(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bin))))
	return n
}
