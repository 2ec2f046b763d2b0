// Package s3test runs a real MinIO server on 127.0.0.1 for the tests of
// other packages (the crash tests of cli, the sink-fault tests of
// pipeline): it finds the MinIO binary that scripts/servers.sh builds and
// caches, starts it on free loopback ports with a fresh data directory,
// and can kill it (SIGKILL, data kept) and start it again on the same
// address, as a store that goes away and comes back.
//
// It holds no package-level state: each Server is one process, owned by
// the test that started it. Tests using it never skip: when MinIO cannot
// be had, ForTest fails the test, naming the command that builds it.
package s3test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

// The root credentials every Server is started with. They exist only in
// the test's own MinIO, which listens on loopback.
const (
	AccessKey = "rsharvest-root"
	SecretKey = "rsharvest-root-secret-Zq8w"
)

const (
	minioModule = "github.com/minio/minio"
	// liveTimeout bounds how long a starting server may take to answer.
	liveTimeout = 60 * time.Second
	// startAttempts is how often Start tries other ports when the server
	// exits at once (a port taken between choosing and binding it).
	startAttempts = 3
)

// Server is a MinIO server process on 127.0.0.1. Its methods are safe for
// concurrent use (a test may kill it from a sink's goroutine).
type Server struct {
	bin     string
	dir     string
	addr    string // 127.0.0.1:PORT, kept across restarts
	console string
	admin   *minio.Client
	buckets atomic.Int64

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	output *syncBuffer
}

// Options configure a Server.
type Options struct {
	// Memory keeps the server's data in /dev/shm, when that is a
	// directory, rather than in the system's temporary directory: MinIO
	// syncs every object it writes, which on a shared disk makes it
	// several times slower (1,000 small PUTs: ≈ 3 s on disk, ≈ 0.7 s on
	// tmpfs). The data still outlive a Kill of the server.
	Memory bool
}

// ForTest starts a Server for t and stops it (removing its data) when t
// ends. It fails t when MinIO cannot be built or started: the tests that
// use it never skip.
func ForTest(t testing.TB, opts Options) *Server {
	t.Helper()
	srv, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("no MinIO server: %v\n(build it with scripts/servers.sh minio, or point RSHARVEST_MINIO at a minio binary)", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// Start finds (or builds) the MinIO binary and starts it on free loopback
// ports with an empty data directory. The caller must Stop it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	parent := ""
	if fi, err := os.Stat("/dev/shm"); opts.Memory && err == nil && fi.IsDir() {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "rsharvest-minio-")
	if err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	for attempt := 1; ; attempt++ {
		srv, err := tryStart(ctx, bin, dir)
		if err == nil {
			return srv, nil
		}
		if attempt == startAttempts || ctx.Err() != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

func tryStart(ctx context.Context, bin, dir string) (*Server, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	console, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	srv := &Server{bin: bin, dir: dir, addr: addr, console: console}
	if err := srv.launch(ctx); err != nil {
		return nil, err
	}
	srv.admin, err = minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, "")})
	if err != nil {
		srv.Stop()
		return nil, fmt.Errorf("s3test: client: %w", err)
	}
	return srv, nil
}

// launch starts the process on srv.addr and waits until it is ready.
func (srv *Server) launch(ctx context.Context) error {
	cmd := exec.Command(srv.bin, "server", filepath.Join(srv.dir, "data"),
		"--address", srv.addr, "--console-address", srv.console, "--quiet")
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+AccessKey,
		"MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stopWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3test: start %s: %w", srv.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	srv.mu.Lock()
	srv.cmd, srv.exited, srv.output = cmd, exited, out
	srv.mu.Unlock()
	if err := waitReady(ctx, srv.addr, exited, liveTimeout); err != nil {
		srv.Kill()
		return fmt.Errorf("s3test: %w; its output:\n%s", err, out.String())
	}
	return nil
}

// Endpoint returns the server's HOST:PORT. It stays the same across Kill
// and Restart.
func (srv *Server) Endpoint() string { return srv.addr }

// Client returns a client with the root credentials.
func (srv *Server) Client() *minio.Client { return srv.admin }

// Output returns what the current (or last) process wrote, up to 64 KiB.
func (srv *Server) Output() string {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.output.String()
}

// NewBucket creates an empty bucket with a name not used before on this
// server.
func (srv *Server) NewBucket(ctx context.Context) (string, error) {
	name := fmt.Sprintf("rsharvest-%d", srv.buckets.Add(1))
	if err := srv.admin.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		return "", fmt.Errorf("s3test: make bucket %s: %w", name, err)
	}
	return name, nil
}

// Running reports whether the server process is alive.
func (srv *Server) Running() bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.exited == nil {
		return false
	}
	select {
	case <-srv.exited:
		return false
	default:
		return true
	}
}

// Kill ends the server with SIGKILL, as a crash or a lost machine would,
// and waits until it has exited. Its data stay for Restart. Killing a
// server that is not running does nothing.
func (srv *Server) Kill() {
	srv.mu.Lock()
	cmd, exited := srv.cmd, srv.exited
	srv.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Restart starts the server again, on the same address and over the same
// data, after Kill. The address may have been taken meanwhile; it is then
// tried again for a few seconds.
func (srv *Server) Restart(ctx context.Context) error {
	if srv.Running() {
		return errors.New("s3test: restart: the server is running")
	}
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = srv.launch(ctx); err == nil {
			return srv.waitServing(ctx)
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return err
}

// Stop ends the server, gently first, and removes its data.
func (srv *Server) Stop() {
	srv.mu.Lock()
	cmd, exited := srv.cmd, srv.exited
	srv.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	_ = os.RemoveAll(srv.dir)
}

// waitServing waits until the server answers S3 requests: restarted over
// its data, MinIO says it is live and even ready while it still answers
// 503 XMinioServerNotInitialized for a while.
func (srv *Server) waitServing(ctx context.Context) error {
	deadline := time.Now().Add(liveTimeout)
	for {
		_, err := srv.admin.ListBuckets(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("s3test: minio at %s not serving after %v: %w", srv.addr, liveTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitReady polls the readiness endpoint until it answers 200.
func waitReady(ctx context.Context, addr string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	url := "http://" + addr + "/minio/health/ready"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("minio exited before it was ready at %s", addr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("minio not ready at %s after %v", url, timeout)
		}
	}
}

// Binary returns the path of the MinIO binary: $RSHARVEST_MINIO, or the one
// scripts/servers.sh builds and caches (see testbin.Path) at the version
// tools/minio/go.mod pins.
func Binary(ctx context.Context) (string, error) {
	root, err := testbin.Root()
	if err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	version, err := requiredVersion(filepath.Join(root, "tools", "minio", "go.mod"), minioModule)
	if err != nil {
		return "", err
	}
	return testbin.Path(ctx, "RSHARVEST_MINIO", "minio", version)
}

// requiredVersion reads the version of module from the require lines of
// a go.mod file.
func requiredVersion(gomod, module string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module {
			return fields[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("s3test: %s: %w", gomod, err)
	}
	return "", fmt.Errorf("s3test: %s does not require %s", gomod, module)
}

// FreeAddr returns a loopback address (127.0.0.1:PORT) with a port that
// was free a moment ago: nothing listens there unless another process has
// taken it since.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// syncBuffer collects a process's output, keeping the first 64 KiB.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 64<<10 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
