package s3

import (
	"bufio"
	"bytes"
	"context"
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
)

// The MinIO server the tests of this package run against: one per package
// run, started by the first test that needs it and stopped by TestMain.
// This is the package's only shared state, and it exists for tests only.
var testServer struct {
	once sync.Once
	srv  *minioServer
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testServer.srv != nil {
		testServer.srv.stop()
	}
	os.Exit(code)
}

// minioFor returns the package's MinIO server, starting it on first use
// (and building MinIO first, when it is not cached). It fails t when the
// server cannot be had: these tests never skip.
func minioFor(t testing.TB) *minioServer {
	t.Helper()
	testServer.once.Do(func() {
		testServer.srv, testServer.err = startMinio()
	})
	if testServer.err != nil {
		t.Fatalf("no MinIO server for the sink/s3 tests: %v\n"+
			"(build it with scripts/servers.sh minio, or point RSHARVEST_MINIO at a minio binary)", testServer.err)
	}
	return testServer.srv
}

const (
	minioModule = "github.com/minio/minio"
	rootUser    = "rsharvest-root"
	rootSecret  = "rsharvest-root-secret-Zq8w"
)

// minioServer is a running MinIO server on 127.0.0.1.
type minioServer struct {
	endpoint string // 127.0.0.1:PORT
	admin    *minio.Client
	cmd      *exec.Cmd
	exited   chan struct{}
	dir      string
	output   *syncBuffer
	buckets  atomic.Int64
}

// minioBinary returns the path of the MinIO binary: $RSHARVEST_MINIO, or
// the one scripts/servers.sh caches, which it runs to build it when it is
// absent.
func minioBinary() (string, error) {
	if p := os.Getenv("RSHARVEST_MINIO"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("RSHARVEST_MINIO: %w", err)
		}
		return p, nil
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	version, err := requiredVersion(filepath.Join(root, "tools", "minio", "go.mod"), minioModule)
	if err != nil {
		return "", err
	}
	cache := os.Getenv("RSHARVEST_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache", "rsharvest")
	}
	bin := filepath.Join(cache, "minio-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	fmt.Fprintf(os.Stderr, "sink/s3 tests: %s is absent; building it with scripts/servers.sh minio (minutes)\n", bin)
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "servers.sh"), "minio")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/servers.sh minio: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin = lines[len(lines)-1]
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("scripts/servers.sh minio printed %q: %w", bin, err)
	}
	return bin, nil
}

// requiredVersion reads the version of module from the require lines of
// a go.mod file.
func requiredVersion(gomod, module string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
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
		return "", err
	}
	return "", fmt.Errorf("%s does not require %s", gomod, module)
}

// startMinio starts MinIO on free loopback ports and waits until it is
// live. A port taken between choosing and binding it makes the server exit;
// it is then tried again on other ports.
func startMinio() (*minioServer, error) {
	bin, err := minioBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rsharvest-minio-")
	if err != nil {
		return nil, err
	}
	const attempts = 3
	for attempt := 1; ; attempt++ {
		srv, err := tryStartMinio(bin, dir)
		if err == nil {
			return srv, nil
		}
		if attempt == attempts {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

func tryStartMinio(bin, dir string) (*minioServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	consoleAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv := &minioServer{endpoint: addr, dir: dir, exited: make(chan struct{}), output: &syncBuffer{}}
	srv.cmd = exec.Command(bin, "server", filepath.Join(dir, "data"),
		"--address", addr, "--console-address", consoleAddr, "--quiet")
	srv.cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+rootUser,
		"MINIO_ROOT_PASSWORD="+rootSecret,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	srv.cmd.Stdout, srv.cmd.Stderr = srv.output, srv.output
	stopWithParent(srv.cmd)
	start := time.Now()
	if err := srv.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = srv.cmd.Wait()
		close(srv.exited)
	}()
	if err := srv.waitLive(60 * time.Second); err != nil {
		srv.stop()
		return nil, fmt.Errorf("%w; its output:\n%s", err, srv.output.String())
	}
	fmt.Fprintf(os.Stderr, "sink/s3 tests: MinIO live at %s after %v\n", addr, time.Since(start).Round(time.Millisecond))
	srv.admin, err = minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(rootUser, rootSecret, "")})
	if err != nil {
		srv.stop()
		return nil, err
	}
	return srv, nil
}

// waitLive polls the liveness endpoint until it answers 200.
func (srv *minioServer) waitLive(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	url := "http://" + srv.endpoint + "/minio/health/live"
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-srv.exited:
			return fmt.Errorf("minio exited before it was live (%v)", srv.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("minio not live at %s after %v", url, timeout)
		}
	}
}

// stop ends the server, gently first, and removes its data.
func (srv *minioServer) stop() {
	_ = srv.cmd.Process.Signal(os.Interrupt)
	select {
	case <-srv.exited:
	case <-time.After(10 * time.Second):
		_ = srv.cmd.Process.Kill()
		<-srv.exited
	}
	_ = os.RemoveAll(srv.dir)
}

// newBucket creates an empty bucket with a new name.
func (srv *minioServer) newBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("rsharvest-%d", srv.buckets.Add(1))
	if err := srv.admin.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("MakeBucket(%s): %v", name, err)
	}
	return name
}

// options returns Options for bucket on this server, with the root
// credentials.
func (srv *minioServer) options(bucket, prefix string) Options {
	return Options{
		Endpoint:  srv.endpoint,
		Bucket:    bucket,
		Prefix:    prefix,
		AccessKey: rootUser,
		SecretKey: rootSecret,
	}
}

// open opens a sink with opts and closes it when t ends.
func open(t testing.TB, opts Options) *S3 {
	t.Helper()
	s, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// incompleteUploads lists the multipart uploads in progress under prefix.
func (srv *minioServer) incompleteUploads(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for u := range srv.admin.ListIncompleteUploads(context.Background(), bucket, prefix, true) {
		if u.Err != nil {
			t.Fatalf("ListIncompleteUploads: %v", u.Err)
		}
		keys = append(keys, u.Key)
	}
	return keys
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
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
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
