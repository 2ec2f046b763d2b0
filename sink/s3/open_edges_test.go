package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

// TestPrefixSegmentTooLong: a prefix with a segment longer than S3 servers
// store is refused at open, fatally, not taken for every Put to fail.
func TestPrefixSegmentTooLong(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	s, err := New(t.Context(), srv.options(bucket, "m/"+strings.Repeat("a", 300)))
	if err != nil {
		if !errclass.IsFatal(err) {
			t.Errorf("New = %v, want a fatal error", err)
		}
		return
	}
	defer s.Close(t.Context())
	err = s.Put(t.Context(), &sink.Resource{URI: "http://example.com/x", Length: 1}, strings.NewReader("x"))
	if err != nil {
		t.Errorf("New accepted the prefix, but Put = %v (%v): every resource fails", err, errclass.Of(err))
	}
}

// TestPartSizeForLargeBodies: a body of known length above the part size
// times 10,000 (S3's count of parts) is uploaded with larger parts, not
// refused before a byte is read (the body here fails after its first
// bytes: the upload began).
func TestPartSizeForLargeBodies(t *testing.T) {
	srv := minioFor(t)
	opts := srv.options(srv.newBucket(t), "big")
	opts.PartSize = MinPartSize
	s := open(t, opts)
	length := int64(MinPartSize)*10000 + 1
	err := s.Put(t.Context(), &sink.Resource{URI: "http://example.com/big", Length: length},
		&failingBody{r: genReader(1, length), after: 1 << 20})
	if !errors.Is(err, errBody) {
		t.Errorf("Put of a %d-byte body = %v (%v), want the upload to start (and fail with the body's error)", length, err, errclass.Of(err))
	}
}

// TestSinkPrintsNoSecret: the sink, printed or logged, and its Options
// with %#v, show no secret key.
func TestSinkPrintsNoSecret(t *testing.T) {
	srv := minioFor(t)
	s := open(t, srv.options(srv.newBucket(t), "p"))
	for _, verb := range []string{"%v", "%+v"} {
		if out := fmt.Sprintf(verb, s); strings.Contains(out, rootSecret) {
			t.Errorf("fmt.Sprintf(%q, sink) contains the secret key", verb)
		}
	}
	if out := fmt.Sprintf("%#v", srv.options("b", "p")); strings.Contains(out, rootSecret) {
		t.Errorf("fmt.Sprintf(%%#v, Options) contains the secret key")
	}
}

// TestBucketQuotaIsFatal: a bucket quota exceeded fails every later write
// the same way: fatal, as a full disk is.
func TestBucketQuotaIsFatal(t *testing.T) {
	got := classify(context.Background(), "op", minio.ErrorResponse{StatusCode: 400, Code: "XMinioAdminBucketQuotaExceeded",
		Message: "Bucket quota exceeded"})
	if !errclass.IsFatal(got) {
		t.Errorf("XMinioAdminBucketQuotaExceeded classified %v, want fatal: %v", errclass.Of(got), got)
	}
}
