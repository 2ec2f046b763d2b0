package s3

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

// TestWalkNamesMinIOTakesForDirectories: MinIO keeps a directory object
// ("KEY/") under the name KEY__XLDIR__, and lists any stored name ending
// so as a directory. A URI whose key would have a segment ending so is
// kept under a hashed key, so that Walk gives it back (an audit would
// otherwise count it missing, and fetch it again at every repair).
func TestWalkNamesMinIOTakesForDirectories(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	s := open(t, srv.options(bucket, "p"))
	uris := []string{
		"http://example.com/a__XLDIR__",   // key p/http/example.com/@a__XLDIR__
		"http://example.com/d__XLDIR__/b", // key p/http/example.com/d__XLDIR__/@b
		"http://example.com/plain",
	}
	for i, uri := range uris {
		put(t, s, uri, fmt.Sprint("body ", i))
	}
	for i, uri := range uris {
		if got, ok := get(t, s, uri); !ok || got != fmt.Sprint("body ", i) {
			t.Fatalf("Get(%s) = %q, %t", uri, got, ok)
		}
	}
	var listed []string
	for o := range srv.admin.ListObjects(t.Context(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		listed = append(listed, o.Key)
	}
	want := slices.Clone(uris)
	slices.Sort(want)
	if got := walk(t, s); !slices.Equal(got, want) {
		t.Errorf("Walk = %q\nwant %q\n(MinIO lists the keys as %q)", got, want, listed)
	}
}

// TestNestedSinksApart: two sinks in one bucket, one at the bucket's
// root (or at "m") and one at a prefix under it. The outer sink's Walk
// does not take the inner's objects for its own ("site2://http/…"), so an
// audit's repair, which deletes what a sink holds beyond the state, does
// not delete them.
func TestNestedSinksApart(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	for _, outerPrefix := range []string{"", "m"} {
		t.Run("outer "+outerPrefix, func(t *testing.T) {
			innerPrefix := strings.TrimPrefix(outerPrefix+"/site2", "/")
			outer := open(t, srv.options(bucket, outerPrefix))
			inner := open(t, srv.options(bucket, innerPrefix))
			const uri = "http://example.com/x"
			put(t, inner, uri, "inner's body")
			got := walk(t, outer)
			if len(got) > 0 {
				t.Errorf("Walk of the sink at %q, which was given nothing, = %q", outerPrefix, got)
			}
			for _, u := range got {
				if err := outer.Delete(t.Context(), u); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := get(t, inner, uri); !ok {
				t.Errorf("deleting what the sink at %q walked removed %s from the sink at %q", outerPrefix, uri, innerPrefix)
			}
		})
	}
}

// TestExpiredTokenIsFatal: the sink's credentials, read once at open,
// never refresh: once a session token has expired every later request
// fails the same way, so the harvest stops instead of failing each
// resource after its retries.
func TestExpiredTokenIsFatal(t *testing.T) {
	got := classify(context.Background(), "op", minio.ErrorResponse{StatusCode: 400, Code: "ExpiredToken",
		Message: "The provided token has expired."})
	if !errclass.IsFatal(got) {
		t.Errorf("ExpiredToken classified %v, want fatal: %v", errclass.Of(got), got)
	}
}

// TestEndpointCredentialsNotInErrors: a spec whose endpoint carries
// credentials (KEY:SECRET@HOST:PORT, as some S3 tools take) is refused
// without quoting them.
func TestEndpointCredentialsNotInErrors(t *testing.T) {
	const secret = "s3cr3t-Qw9z"
	t.Setenv("AWS_ACCESS_KEY_ID", rootUser)
	t.Setenv("AWS_SECRET_ACCESS_KEY", rootSecret)
	reg := sink.Registry{"s3": Open}
	closed, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	spec := "s3://bucket/p?endpoint=AKIAEXAMPLE:" + secret + "@" + closed + "&secure=false"
	s, err := reg.Open(t.Context(), spec)
	if err == nil {
		s.Close(t.Context())
		t.Fatal("Open succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("Open's error carries the secret: %v", err)
	}
}
