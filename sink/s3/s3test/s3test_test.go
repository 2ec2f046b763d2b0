package s3test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

// TestKillRestart: a killed server refuses connections, and once restarted
// on the same address serves the objects it held, its data on disk or in
// memory.
func TestKillRestart(t *testing.T) {
	for _, memory := range []bool{false, true} {
		t.Run(fmt.Sprintf("memory=%v", memory), func(t *testing.T) {
			killRestart(t, Options{Memory: memory})
		})
	}
}

func killRestart(t *testing.T, opts Options) {
	ctx := t.Context()
	srv := ForTest(t, opts)
	if !strings.HasPrefix(srv.Endpoint(), "127.0.0.1:") {
		t.Fatalf("endpoint %q is not on loopback", srv.Endpoint())
	}
	bucket, err := srv.NewBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const body = "kept across a crash"
	c := srv.Client()
	if _, err := c.PutObject(ctx, bucket, "k", strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if srv.Running() {
		t.Fatal("running after Kill")
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := c.StatObject(short, bucket, "k", minio.StatObjectOptions{}); err == nil {
		t.Fatal("a killed server answered")
	}
	start := time.Now()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %v", time.Since(start).Round(time.Millisecond))
	obj, err := c.GetObject(ctx, bucket, "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil || string(b) != body {
		t.Fatalf("after restart: %q, %v", b, err)
	}
	if err := srv.Restart(ctx); err == nil {
		t.Fatal("Restart of a running server succeeded")
	}
}

func TestRequiredVersion(t *testing.T) {
	root, err := testbin.Root()
	if err != nil {
		t.Fatal(err)
	}
	v, err := requiredVersion(root+"/tools/minio/go.mod", minioModule)
	if err != nil || !strings.HasPrefix(v, "v") {
		t.Fatalf("version %q, %v", v, err)
	}
	if _, err := requiredVersion(root+"/go.mod", minioModule); err == nil {
		t.Fatal("the main module does not require the MinIO server")
	}
}
