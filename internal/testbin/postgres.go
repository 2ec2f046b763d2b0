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
	s, err := StartPostgres(ctx)
	if err != nil {
		return "", nil, err
	}
	return s.URL, s.Stop, nil
}

// PostgresServer is a PostgreSQL server StartPostgres started.
type PostgresServer struct {
	// URL is its database "postgres" (user postgres, no password).
	URL     string
	command func(ctx context.Context, name string, args ...string) *exec.Cmd
	db      string // the data directory
	data    string // its parent, removed by Stop
	port    int
	srv     *exec.Cmd
	exited  chan error
}

// StartPostgres starts a server as Postgres does, which the test may also
// restart (Restart).
func StartPostgres(ctx context.Context) (*PostgresServer, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		return nil, errors.New("PostgreSQL is not installed: no /usr/lib/postgresql/*/bin/postgres (Debian's postgresql package, which .ci/run installs)")
	}
	slices.SortFunc(bins, func(a, b string) int { return pgVersion(a) - pgVersion(b) })
	bin := filepath.Dir(bins[len(bins)-1])
	data, err := os.MkdirTemp("", "rsharvest-pg-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { _ = os.RemoveAll(data) }
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("running as root, PostgreSQL needs the user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(data, uid, gid); err != nil {
			cleanup()
			return nil, err
		}
	}
	s := &PostgresServer{data: data, db: filepath.Join(data, "db")}
	s.command = func(ctx context.Context, name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
		return cmd
	}
	if out, err := s.command(ctx, "initdb", "-D", s.db, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		cleanup()
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return nil, err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	if err := s.start(ctx); err != nil {
		cleanup()
		return nil, err
	}
	return s, nil
}

// start starts the server on its data and port, and waits up to a minute
// for it to answer.
func (s *PostgresServer) start(ctx context.Context) error {
	s.srv = s.command(context.WithoutCancel(ctx), "postgres", "-D", s.db, "-p", strconv.Itoa(s.port), "-k", s.data,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=100")
	s.srv.Stdout = os.Stderr
	s.srv.Stderr = os.Stderr
	if err := s.srv.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	s.exited = make(chan error, 1)
	go func(srv *exec.Cmd, exited chan error) { exited <- srv.Wait() }(s.srv, s.exited)
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := pgx.Connect(ctx, s.URL)
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			return fmt.Errorf("postgres exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.halt()
			return fmt.Errorf("postgres did not answer on port %d within a minute: %w", s.port, err)
		}
	}
}

// halt shuts the server down (a fast shutdown: its sessions end at once).
func (s *PostgresServer) halt() {
	_ = s.srv.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.srv.Process.Kill()
		<-s.exited
	}
}

// Restart shuts the server down, every session ending, waits pause, and
// starts it again on the same data and port.
func (s *PostgresServer) Restart(ctx context.Context, pause time.Duration) error {
	s.halt()
	time.Sleep(pause)
	return s.start(ctx)
}

// Stop shuts the server down and removes its data.
func (s *PostgresServer) Stop() {
	s.halt()
	_ = os.RemoveAll(s.data)
}

// pgVersion is N of /usr/lib/postgresql/N/bin/postgres (0 if not a number).
func pgVersion(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bin))))
	return n
}
