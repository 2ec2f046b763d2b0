// Package zinctest starts a ZincSearch server on 127.0.0.1 for the tests
// of the es sink and of what reads its indexes (publish/fromes): the binary
// from $RSHARVEST_ZINCSEARCH or the cache scripts/servers.sh fills (see
// internal/testbin), a free port, a data directory of its own.
package zinctest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

// Version must match ZINCSEARCH_VERSION in scripts/servers.sh.
const Version = "v0.4.10"

// The credentials of the server's first administrator, and its
// ZINC_MAX_DOCUMENT_SIZE: the longest bulk line it takes (decimal bytes).
const (
	User     = "admin"
	Password = "Zinc-test-pw1"
	MaxDoc   = 12_000_000
)

// Server is one ZincSearch process.
type Server struct {
	// URL is the base URL of its Elasticsearch API (…/es).
	URL    string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	next   atomic.Int64  // numbers the indexes of the tests
}

// Start starts a server and waits until it answers (at most 30 s). what
// names the caller in the line it prints to stderr once the server is up.
func Start(what string) (*Server, error) {
	bin, err := testbin.Path(context.Background(), "RSHARVEST_ZINCSEARCH", "zincsearch", Version)
	if err != nil {
		return nil, fmt.Errorf("no ZincSearch binary (set RSHARVEST_ZINCSEARCH, or run scripts/servers.sh zincsearch): %w", err)
	}
	dir, err := os.MkdirTemp("", "rsharvest-zinc-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "zincsearch.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	z := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d/es", port), dir: dir, exited: make(chan struct{})}
	z.cmd = exec.Command(bin)
	z.cmd.Dir = dir
	z.cmd.Env = append(os.Environ(),
		"ZINC_SENTRY=false",
		"ZINC_TELEMETRY=false",
		"ZINC_PROFILER=false",
		"ZINC_FIRST_ADMIN_USER="+User,
		"ZINC_FIRST_ADMIN_PASSWORD="+Password,
		"ZINC_DATA_PATH="+filepath.Join(dir, "data"),
		"ZINC_SERVER_ADDRESS=127.0.0.1",
		fmt.Sprintf("ZINC_SERVER_PORT=%d", port),
		"ZINC_WAL_SYNC_INTERVAL=10ms",
		fmt.Sprintf("ZINC_MAX_DOCUMENT_SIZE=%d", MaxDoc),
		"GIN_MODE=release",
	)
	z.cmd.Stdout, z.cmd.Stderr = logFile, logFile
	setPdeathsig(z.cmd)
	start := time.Now()
	if err := z.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	var waitErr error
	go func() {
		waitErr = z.cmd.Wait()
		close(z.exited)
	}()
	failed := func(format string, a ...any) (*Server, error) {
		z.Stop()
		logs, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s: %s; its output:\n%s", bin, fmt.Sprintf(format, a...), logs)
	}
	health := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := client.Get(health); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Fprintf(os.Stderr, "%s: ZincSearch %s up on port %d in %v\n", what, Version, port, time.Since(start).Round(time.Millisecond))
				return z, nil
			}
		}
		select {
		case <-z.exited:
			return failed("exited at start (%v)", waitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(start) > 30*time.Second {
			return failed("no answer on port %d in 30 s", port)
		}
	}
}

// Stop kills the server, waits for it to exit and removes its data.
func (z *Server) Stop() {
	_ = z.cmd.Process.Kill()
	<-z.exited
	os.RemoveAll(z.dir)
}

// NewIndex returns an index name no test of this server used yet.
func (z *Server) NewIndex() string { return fmt.Sprintf("t%d", z.next.Add(1)) }
