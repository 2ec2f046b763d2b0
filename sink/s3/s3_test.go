package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

func TestConformance(t *testing.T) {
	srv := minioFor(t)
	t.Run("bucket root", func(t *testing.T) {
		sinktest.Run(t, func(t *testing.T) sink.Sink {
			return open(t, srv.options(srv.newBucket(t), ""))
		})
	})
	// Under a prefix, with the smallest parts, so that sinktest's
	// several-MB bodies go up in multipart uploads.
	t.Run("prefix, multipart", func(t *testing.T) {
		bucket := srv.newBucket(t)
		var n atomic.Int64
		sinktest.Run(t, func(t *testing.T) sink.Sink {
			prefix := fmt.Sprintf("mirror/run %d", n.Add(1))
			opts := srv.options(bucket, prefix)
			opts.PartSize = MinPartSize
			opts.Concurrency = 16
			t.Cleanup(func() {
				if left := srv.incompleteUploads(t, bucket, prefix); len(left) > 0 {
					t.Errorf("incomplete uploads left behind: %q", left)
				}
			})
			return open(t, opts)
		})
	})
}

// genReader returns size deterministic pseudo-random bytes for seed.
func genReader(seed byte, size int64) io.Reader {
	var key [32]byte
	key[0] = seed
	return io.LimitReader(rand.NewChaCha8(key), size)
}

func digest(t *testing.T, r io.Reader) [sha256.Size]byte {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatalf("reading: %v", err)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

var errBody = errors.New("test: body failed")

// failingBody passes on the first after bytes of r and then returns
// errBody: with the last of those bytes when withLast, as a verifying
// reader does on a digest mismatch, or instead of io.EOF otherwise.
type failingBody struct {
	r        io.Reader
	after    int64
	withLast bool
}

func (f *failingBody) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errBody
	}
	p = p[:min(int64(len(p)), f.after)]
	n, err := io.ReadFull(f.r, p)
	f.after -= int64(n)
	if err != nil {
		return n, err
	}
	if f.after == 0 && f.withLast {
		return n, errBody
	}
	return n, nil
}

// TestAtomicUpload checks that no object (or the previous one) is visible,
// and no multipart upload left, after a body that fails midway, a fixity
// error on the last Read, or a ctx cancelled at the very end, for bodies of
// known and unknown length, sent in one PUT or in parts.
func TestAtomicUpload(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	s := open(t, srv.options(bucket, "atomic"))
	const part = DefaultPartSize
	tests := []struct {
		name string
		size int64
		// body returns the body and the error Put must wrap.
		body func(cancel context.CancelFunc) (io.Reader, error)
	}{
		{"multipart, fails after 20 MiB", 40 << 20, func(context.CancelFunc) (io.Reader, error) {
			return &failingBody{r: genReader(1, 40<<20), after: 20 << 20}, errBody
		}},
		{"multipart, fixity error with the last data", 2 * part, func(context.CancelFunc) (io.Reader, error) {
			return &failingBody{r: genReader(2, 2*part), after: 2 * part, withLast: true}, errBody
		}},
		{"multipart, fixity error instead of EOF", 2*part + 3, func(context.CancelFunc) (io.Reader, error) {
			return &failingBody{r: genReader(3, 2*part+3), after: 2*part + 3}, errBody
		}},
		{"multipart, ctx cancelled at the end", part + 1, func(cancel context.CancelFunc) (io.Reader, error) {
			return &cancelAtEnd{r: genReader(4, part+1), cancel: cancel}, context.Canceled
		}},
		{"single PUT, fixity error with the last data", 1 << 20, func(context.CancelFunc) (io.Reader, error) {
			return &failingBody{r: genReader(5, 1<<20), after: 1 << 20, withLast: true}, errBody
		}},
		{"single PUT, fixity error instead of EOF", 1 << 20, func(context.CancelFunc) (io.Reader, error) {
			return &failingBody{r: genReader(6, 1<<20), after: 1 << 20}, errBody
		}},
		{"single PUT, one byte, fixity error with it", 1, func(context.CancelFunc) (io.Reader, error) {
			return &failingBody{r: genReader(7, 1), after: 1, withLast: true}, errBody
		}},
		{"single PUT, ctx cancelled at the end", 1 << 20, func(cancel context.CancelFunc) (io.Reader, error) {
			return &cancelAtEnd{r: genReader(8, 1<<20), cancel: cancel}, context.Canceled
		}},
		{"empty, fixity error instead of EOF", 0, func(context.CancelFunc) (io.Reader, error) {
			return &failingBody{r: genReader(9, 0), after: 0}, errBody
		}},
	}
	for i, tt := range tests {
		for _, length := range []int64{tt.size, -1} {
			for _, previous := range []bool{false, true} {
				name := fmt.Sprintf("%s/length %d/previous %t", tt.name, length, previous)
				t.Run(name, func(t *testing.T) {
					uri := fmt.Sprintf("http://example.com/atomic/%d/%d/%t", i, length, previous)
					key := s.Key(uri)
					if previous {
						put(t, s, uri, "previous version")
					}
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					body, wantErr := tt.body(cancel)
					err := s.Put(ctx, &sink.Resource{URI: uri, Length: length}, body)
					if !errors.Is(err, wantErr) {
						t.Fatalf("Put = %v, want an error wrapping %v", err, wantErr)
					}
					got, ok := get(t, s, uri)
					switch {
					case previous && got != "previous version":
						t.Errorf("Get after the failed Put = %d bytes, ok %t; want the previous version", len(got), ok)
					case !previous && ok:
						t.Errorf("Get after the failed Put = %d bytes, want no object", len(got))
					}
					if left := srv.incompleteUploads(t, bucket, key); len(left) > 0 {
						t.Errorf("incomplete uploads left behind: %q", left)
					}
				})
			}
		}
	}
}

// cancelAtEnd passes r on, and calls cancel as it returns r's last bytes.
type cancelAtEnd struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c *cancelAtEnd) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF || n < len(p) {
		c.cancel()
	}
	return n, err
}

func put(t testing.TB, s *S3, uri, body string) {
	t.Helper()
	if err := s.Put(t.Context(), &sink.Resource{URI: uri, Length: int64(len(body))}, strings.NewReader(body)); err != nil {
		t.Fatalf("Put(%s): %v", short(uri), err)
	}
}

func get(t testing.TB, s *S3, uri string) (string, bool) {
	t.Helper()
	rc, err := s.Get(t.Context(), uri)
	if errors.Is(err, iofs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatalf("Get(%s): %v", short(uri), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%s): %v", short(uri), err)
	}
	return string(b), true
}

func walk(t testing.TB, s *S3) []string {
	t.Helper()
	var uris []string
	if err := s.Walk(t.Context(), func(uri string) error {
		uris = append(uris, uri)
		return nil
	}); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	slices.Sort(uris)
	return uris
}

// TestLargeRoundTrip puts a multipart object of known and unknown length.
func TestLargeRoundTrip(t *testing.T) {
	srv := minioFor(t)
	s := open(t, srv.options(srv.newBucket(t), ""))
	const size = 2*DefaultPartSize + 12345
	for _, length := range []int64{size, -1} {
		uri := fmt.Sprintf("http://example.com/large/%d", length)
		if err := s.Put(t.Context(), &sink.Resource{URI: uri, Length: length}, genReader(10, size)); err != nil {
			t.Fatalf("Put: %v", err)
		}
		rc, err := s.Get(t.Context(), uri)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		got := digest(t, rc)
		rc.Close()
		if want := digest(t, genReader(10, size)); got != want {
			t.Errorf("length %d: the object differs from the body", length)
		}
	}
}

func TestMetadata(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	s := open(t, srv.options(bucket, "meta"))
	body := "hello, metadata"
	md5sum := md5.Sum([]byte(body))
	shasum := sha256.Sum256([]byte(body))
	lastmod := time.Date(2013, 1, 2, 13, 0, 0, 500_000_000, time.FixedZone("", 3600))
	tests := []struct {
		name string
		r    sink.Resource
		want map[string]string
		ct   string
	}{
		{
			name: "everything",
			r: sink.Resource{URI: "http://example.com/sub dir/café.txt?q=%41", Length: int64(len(body)),
				Hashes: fixity.Hashes{MD5: md5sum[:], SHA256: shasum[:]},
				Type:   "text/plain; charset=utf-8", Lastmod: lastmod, Sets: []string{"physics", "math:algebra"}, About: []string{"<provenance/>"}},
			want: map[string]string{
				metaURI:     "http://example.com/sub%20dir/caf%C3%A9.txt?q=%2541",
				metaMD5:     fmt.Sprintf("%x", md5sum),
				metaSHA256:  fmt.Sprintf("%x", shasum),
				metaLength:  fmt.Sprint(len(body)),
				metaLastmod: "2013-01-02T12:00:00.5Z",
				metaSets:    "physics math:algebra",
			},
			ct: "text/plain; charset=utf-8",
		},
		{
			name: "unknown length, no type or hashes",
			r:    sink.Resource{URI: "urn:x:y", Length: -1},
			want: map[string]string{metaURI: "urn:x:y"},
			ct:   "application/octet-stream",
		},
		{
			name: "invalid type",
			r:    sink.Resource{URI: "urn:x:z", Length: int64(len(body)), Type: "text/plain\r\nX-Evil: 1"},
			want: map[string]string{metaURI: "urn:x:z", metaLength: fmt.Sprint(len(body))},
			ct:   "application/octet-stream",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Put(t.Context(), &tt.r, strings.NewReader(body)); err != nil {
				t.Fatalf("Put: %v", err)
			}
			info, err := srv.admin.StatObject(t.Context(), bucket, s.Key(tt.r.URI), minio.StatObjectOptions{})
			if err != nil {
				t.Fatalf("StatObject: %v", err)
			}
			got := map[string]string{}
			for k, v := range info.UserMetadata {
				got[k] = v
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("user metadata\n got %v\nwant %v", got, tt.want)
			}
			if uri, err := unescapeMeta(got[metaURI]); uri != tt.r.URI || err != nil {
				t.Errorf("metadata URI decodes to %q, %v", uri, err)
			}
			if info.ContentType != tt.ct {
				t.Errorf("Content-Type %q, want %q", info.ContentType, tt.ct)
			}
			if info.Size != int64(len(body)) {
				t.Errorf("size %d, want %d", info.Size, len(body))
			}
		})
	}
}

// TestHashedKeys checks URIs whose keys are too long or not storable: the
// object goes to _long/<sha-256>, its URI to a separate object, and Walk
// gives the exact URI back.
func TestHashedKeys(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	s := open(t, srv.options(bucket, "p"))
	uris := []string{
		"http://example.com/" + strings.Repeat("é", 700),
		"http://example.com/" + strings.Repeat("seg/", 1500),
		"http://example.com/ ../x",
		"http://example.com/\xff" + strings.Repeat("%", 400),
	}
	for i, uri := range uris {
		key, hashed := objectKey("p/", uri)
		if !hashed {
			t.Fatalf("%s: not hashed", short(uri))
		}
		put(t, s, uri, fmt.Sprint("body ", i))
		if _, err := srv.admin.StatObject(t.Context(), bucket, key, minio.StatObjectOptions{}); err != nil {
			t.Errorf("%s: no object at %s: %v", short(uri), key, err)
		}
	}
	put(t, s, "http://example.com/short", "short")
	want := append(slices.Clone(uris), "http://example.com/short")
	slices.Sort(want)
	if got := walk(t, s); !slices.Equal(got, want) {
		t.Errorf("Walk = %q, want %q", got, want)
	}
	for i, uri := range uris {
		if got, ok := get(t, s, uri); got != fmt.Sprint("body ", i) || !ok {
			t.Errorf("Get(%s) = %q, %t", short(uri), got, ok)
		}
	}
	// Deleting keeps the URI object, which a later Put reuses.
	if err := s.Delete(t.Context(), uris[0]); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, s, uris[0]); ok {
		t.Errorf("Get after Delete found the object")
	}
	if got := walk(t, s); slices.Contains(got, uris[0]) {
		t.Errorf("Walk after Delete reports the URI")
	}
	put(t, s, uris[0], "again")
	if got, _ := get(t, s, uris[0]); got != "again" {
		t.Errorf("Get after a new Put = %q", got)
	}
}

// TestWalkSkipsForeign checks that Walk skips objects it did not write and
// hashed objects without (or with a wrong) URI object.
func TestWalkSkipsForeign(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	s := open(t, srv.options(bucket, "p"))
	put(t, s, "http://example.com/mine", "mine")
	raw := func(key, body string) {
		t.Helper()
		if _, err := srv.admin.PutObject(t.Context(), bucket, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatalf("PutObject(%s): %v", key, err)
		}
	}
	orphan := hashedKey("p/", "http://example.com/orphan")
	wrong := hashedKey("p/", "http://example.com/"+strings.Repeat("w", 2000))
	raw("p/README", "x")
	raw("p/http/example.com/not-a-file-name", "x")
	raw("p/_long/xyz", "x")
	raw(orphan, "no URI object")
	raw(wrong, "wrong URI object")
	raw(wrong+uriSuffix, "http://example.com/something else")
	raw("q/http/example.com/@outside", "outside the prefix")
	if got, want := walk(t, s), []string{"http://example.com/mine"}; !slices.Equal(got, want) {
		t.Errorf("Walk = %q, want %q", got, want)
	}
}

func TestOpen(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	reg := sink.Registry{"s3": Open}
	t.Setenv("AWS_ACCESS_KEY_ID", rootUser)
	t.Setenv("AWS_SECRET_ACCESS_KEY", rootSecret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	spec := "s3://" + bucket + "/a/b?endpoint=" + srv.endpoint + "&secure=false&concurrency=5&partsize=8MiB"
	sk, err := reg.Open(t.Context(), spec)
	if err != nil {
		t.Fatalf("Open(%s): %v", spec, err)
	}
	defer sk.Close(t.Context())
	s := sk.(*S3)
	if s.Concurrency() != 5 || s.opts.PartSize != 8<<20 || s.prefix != "a/b/" {
		t.Errorf("opened with concurrency %d, part size %d, prefix %q", s.Concurrency(), s.opts.PartSize, s.prefix)
	}
	put(t, s, "http://example.com/x", "x")
	if _, err := srv.admin.StatObject(t.Context(), bucket, "a/b/http/example.com/@x", minio.StatObjectOptions{}); err != nil {
		t.Errorf("the object is not at the documented key: %v", err)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if _, err := reg.Open(t.Context(), spec); !errclass.IsFatal(err) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("Open without a secret = %v, want a fatal error naming the variable", err)
	}
}

// TestOpenErrors checks that an endpoint that does not answer, a missing
// bucket and rejected credentials are fatal at once, and that no error
// carries the credentials.
func TestOpenErrors(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	closed, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	const badSecret = "wrong-secret-Xy7p"
	const badKey = "WRONGKEYID12345"
	tests := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"unreachable endpoint", func(o *Options) { o.Endpoint = closed }, "cannot reach"},
		{"missing bucket", func(o *Options) { o.Bucket = "no-such-bucket" }, "does not exist"},
		{"invalid bucket name", func(o *Options) { o.Bucket = "No_Such" }, "No_Such"},
		{"wrong secret", func(o *Options) { o.SecretKey = badSecret }, "SignatureDoesNotMatch"},
		{"unknown access key", func(o *Options) { o.AccessKey, o.SecretKey = badKey, badSecret }, "InvalidAccessKeyId"},
		{"endpoint with a scheme", func(o *Options) { o.Endpoint = "http://" + srv.endpoint }, "without scheme"},
		{"small parts", func(o *Options) { o.PartSize = 1 << 20 }, "part size"},
		{"bad prefix", func(o *Options) { o.Prefix = "a/../b" }, "prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := srv.options(bucket, "p")
			tt.edit(&opts)
			start := time.Now()
			s, err := New(t.Context(), opts)
			if err == nil {
				s.Close(t.Context())
				t.Fatal("New succeeded")
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			if !errclass.IsFatal(err) {
				t.Errorf("error is %v, want fatal", errclass.Of(err))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			for _, secret := range []string{rootSecret, badSecret, badKey} {
				if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
					t.Errorf("error %q contains a credential", err)
				}
			}
		})
	}
}

// TestBucketRemoved checks that a bucket that vanishes under a running sink
// makes Put fail fatally, and that Get and Delete report it too.
func TestBucketRemoved(t *testing.T) {
	srv := minioFor(t)
	bucket := srv.newBucket(t)
	s := open(t, srv.options(bucket, ""))
	if err := srv.admin.RemoveObject(t.Context(), bucket, sinkMarker, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.admin.RemoveBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	err := s.Put(t.Context(), &sink.Resource{URI: "http://example.com/x", Length: 1}, strings.NewReader("x"))
	if !errclass.IsFatal(err) {
		t.Errorf("Put = %v (%v), want a fatal error", err, errclass.Of(err))
	}
	if _, err := s.Get(t.Context(), "http://example.com/x"); err == nil || errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("Get = %v, want an error other than not-exist", err)
	}
	if err := s.Delete(t.Context(), "http://example.com/x"); !errclass.IsFatal(err) {
		t.Errorf("Delete = %v (%v), want a fatal error", err, errclass.Of(err))
	}
}

// BenchmarkPut puts 50 KiB objects, one at a time and Concurrency() at
// once, and reports objects/s.
func BenchmarkPut(b *testing.B) {
	srv := minioFor(b)
	s := open(b, srv.options(srv.newBucket(b), "bench"))
	body := bytes.Repeat([]byte("0123456789abcdef"), 50<<10/16)
	var seq atomic.Int64
	putOne := func() error {
		uri := fmt.Sprintf("http://example.com/bench/%d", seq.Add(1))
		return s.Put(b.Context(), &sink.Resource{URI: uri, Length: int64(len(body))}, bytes.NewReader(body))
	}
	b.Run("serial", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		n := 0
		for b.Loop() {
			if err := putOne(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "objects/s")
	})
	b.Run(fmt.Sprintf("concurrent=%d", s.Concurrency()), func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.SetParallelism(max(1, s.Concurrency()/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := putOne(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
	})
}
