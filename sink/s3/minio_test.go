package s3

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/rsharvest/rsharvest/sink/s3/s3test"
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
		testServer.srv.Stop()
	}
	os.Exit(code)
}

// minioFor returns the package's MinIO server, starting it on first use
// (and building MinIO first, when it is not cached). It fails t when the
// server cannot be had: these tests never skip.
func minioFor(t testing.TB) *minioServer {
	t.Helper()
	testServer.once.Do(func() {
		// The server outlives the test that starts it: not t's context.
		srv, err := s3test.Start(context.Background(), s3test.Options{})
		if err != nil {
			testServer.err = err
			return
		}
		testServer.srv = &minioServer{Server: srv, endpoint: srv.Endpoint(), admin: srv.Client()}
	})
	if testServer.err != nil {
		t.Fatalf("no MinIO server for the sink/s3 tests: %v\n"+
			"(build it with scripts/servers.sh minio, or point RSHARVEST_MINIO at a minio binary)", testServer.err)
	}
	return testServer.srv
}

// The root credentials of the test server.
const (
	rootUser   = s3test.AccessKey
	rootSecret = s3test.SecretKey
)

// freeAddr returns a loopback address with a port that was free a moment
// ago.
var freeAddr = s3test.FreeAddr

// minioServer is the package's running MinIO server on 127.0.0.1, with the
// helpers the tests use.
type minioServer struct {
	*s3test.Server
	endpoint string        // 127.0.0.1:PORT
	admin    *minio.Client // with the root credentials
}

// newBucket creates an empty bucket with a new name.
func (srv *minioServer) newBucket(t testing.TB) string {
	t.Helper()
	name, err := srv.NewBucket(context.Background())
	if err != nil {
		t.Fatal(err)
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
