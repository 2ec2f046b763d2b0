package s3

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

var (
	_ sink.Sink      = (*S3)(nil)
	_ sink.Inventory = (*S3)(nil)
	_ sink.Limiter   = (*S3)(nil)
	_ sink.Opener    = Open
)

const (
	// DefaultConcurrency is the default of Options.Concurrency.
	DefaultConcurrency = 8
	// DefaultPartSize is the default of Options.PartSize.
	DefaultPartSize = 16 << 20
	// MinPartSize is the smallest part S3 accepts (but for the last).
	MinPartSize = 5 << 20
	// MaxPartSize is the largest part S3 accepts.
	MaxPartSize = 5 << 30

	// defaultEndpoint is Amazon S3's.
	defaultEndpoint = "s3.amazonaws.com"
	// readRetries bounds the attempts minio-go makes of one request the
	// pipeline does not retry itself (the bucket check, Get, Walk). Put and
	// Delete are sent once: the pipeline retries them, reading the entry
	// again, and retries are not nested.
	readRetries = 3
	// openTimeout bounds the checks New makes of the endpoint and bucket.
	openTimeout = 30 * time.Second
	// maxURIMeta is the longest escaped URI stored in metadata.
	maxURIMeta = 1024
	// maxUserMeta is what S3 allows of an object's user metadata in all:
	// each entry's "x-amz-meta-" name and its value.
	maxUserMeta = 2 << 10
)

// The user metadata keys, in the canonical form minio-go reports them in.
const (
	metaURI     = "Rsharvest-Uri"
	metaMD5     = "Rsharvest-Md5"
	metaSHA1    = "Rsharvest-Sha1"
	metaSHA256  = "Rsharvest-Sha256"
	metaLength  = "Rsharvest-Length"
	metaLastmod = "Rsharvest-Lastmod"
	metaSets    = "Rsharvest-Sets"
)

// maxSetsMeta bounds the sets kept in an object's metadata.
const maxSetsMeta = 1024

// Options configure an S3 sink. Endpoint and Bucket are required.
type Options struct {
	// Endpoint is the store's HOST:PORT, without a scheme.
	Endpoint string
	// Region is the bucket's region; "" asks the bucket for it.
	Region string
	// Secure selects HTTPS.
	Secure bool
	// Bucket must exist.
	Bucket string
	// Prefix is prepended to every key; a "/" is appended to it unless it
	// is empty or ends in one, and a leading "/" is dropped.
	Prefix string
	// AccessKey, SecretKey and SessionToken are the credentials; all
	// empty means anonymous requests.
	AccessKey    string
	SecretKey    string
	SessionToken string
	// Concurrency is the number of Put and Delete calls the sink takes at
	// once (see sink.Limiter); 0 means DefaultConcurrency.
	Concurrency int
	// PartSize is the size of a multipart upload's parts, and of the
	// buffer each upload of unknown length holds; 0 means DefaultPartSize.
	PartSize int64
	// Logger receives the sink's warnings and debug notes; nil discards
	// them.
	Logger *slog.Logger
}

// String describes the options without the credentials, which it only
// says are set, so that Options can be printed and logged.
func (o Options) String() string {
	set := func(v string) string {
		if v == "" {
			return "unset"
		}
		return "set"
	}
	return fmt.Sprintf("{Endpoint:%s Region:%s Secure:%t Bucket:%s Prefix:%s AccessKey:%s SecretKey:%s SessionToken:%s Concurrency:%d PartSize:%d}",
		o.Endpoint, o.Region, o.Secure, o.Bucket, o.Prefix, set(o.AccessKey), set(o.SecretKey), set(o.SessionToken), o.Concurrency, o.PartSize)
}

// S3 is a sink that stores each resource as an object in a bucket, under
// the key the package documentation describes. Its methods are safe for
// concurrent use; concurrent writes of one URI take effect in some order.
type S3 struct {
	// client sends Put's and Delete's requests once (the pipeline retries
	// them); reads retries the requests nothing else retries.
	client    *minio.Client
	reads     *minio.Client
	transport *http.Transport
	bucket    string
	prefix    string // "" or ending in "/"
	name      string // s3://bucket/prefix, for messages
	opts      Options
	log       *slog.Logger
	closed    atomic.Bool
}

// New connects to opts.Endpoint and checks that it answers and that
// opts.Bucket exists. Any failure is a fatal error; none carries the
// credentials.
func New(ctx context.Context, opts Options) (*S3, error) {
	name := "s3://" + opts.Bucket + "/" + strings.TrimLeft(opts.Prefix, "/")
	prefix, err := cleanPrefix(opts.Prefix)
	switch {
	case err != nil:
		return nil, errclass.Fatalf("s3 sink %s: %w", name, err)
	case opts.Bucket == "":
		return nil, errclass.Fatalf("s3 sink %s: no bucket", name)
	case s3utils.CheckValidBucketName(opts.Bucket) != nil:
		return nil, errclass.Fatalf("s3 sink %s: invalid bucket name %q", name, opts.Bucket)
	case opts.Endpoint == "":
		return nil, errclass.Fatalf("s3 sink %s: no endpoint", name)
	case strings.Contains(opts.Endpoint, "@"):
		// Not quoted: what comes before the "@" may be credentials.
		return nil, errclass.Fatalf("s3 sink %s: endpoint: want HOST[:PORT], without credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", name)
	case strings.Contains(opts.Endpoint, "/"):
		return nil, errclass.Fatalf("s3 sink %s: endpoint %q: want HOST[:PORT], without scheme or path", name, opts.Endpoint)
	case opts.Concurrency < 0:
		return nil, errclass.Fatalf("s3 sink %s: negative concurrency %d", name, opts.Concurrency)
	case opts.PartSize != 0 && (opts.PartSize < MinPartSize || opts.PartSize > MaxPartSize):
		return nil, errclass.Fatalf("s3 sink %s: part size %d: want %d to %d bytes", name, opts.PartSize, MinPartSize, MaxPartSize)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.PartSize == 0 {
		opts.PartSize = DefaultPartSize
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tr, err := minio.DefaultTransport(opts.Secure)
	if err != nil {
		return nil, errclass.Fatalf("s3 sink %s: %w", name, err)
	}
	tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, 2*opts.Concurrency)
	newClient := func(attempts int) (*minio.Client, error) {
		c, err := minio.New(opts.Endpoint, &minio.Options{
			Creds:      credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, opts.SessionToken),
			Secure:     opts.Secure,
			Region:     opts.Region,
			Transport:  tr,
			MaxRetries: attempts,
		})
		if err != nil {
			return nil, errclass.Fatalf("s3 sink %s: endpoint %q: %w", name, opts.Endpoint, err)
		}
		return c, nil
	}
	writes, err := newClient(1)
	if err != nil {
		return nil, err
	}
	reads, err := newClient(readRetries)
	if err != nil {
		return nil, err
	}
	s := &S3{
		client:    writes,
		reads:     reads,
		transport: tr,
		bucket:    opts.Bucket,
		prefix:    prefix,
		name:      "s3://" + opts.Bucket + "/" + prefix,
		opts:      opts,
	}
	s.log = logger.With("sink", s.name)
	if err := s.check(ctx); err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	s.mark(ctx)
	return s, nil
}

// mark writes the sink's marker at its prefix (see sinkMarker), so that
// the Walk of a sink at a prefix above it skips its objects. A sink whose
// credentials may not write (an audit's) goes on without it, warned.
func (s *S3) mark(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	const body = "the objects under this prefix are a sink of rsharvest\n"
	_, err := s.client.PutObject(ctx, s.bucket, s.prefix+sinkMarker, strings.NewReader(body), int64(len(body)),
		minio.PutObjectOptions{ContentType: "text/plain; charset=utf-8"})
	if err != nil {
		s.log.Warn("cannot write the sink's marker: a sink at a prefix above this one will list its objects as its own", "key", s.prefix+sinkMarker, "err", err)
	}
}

// check makes sure the endpoint answers and the bucket exists.
func (s *S3) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	ok, err := s.reads.BucketExists(ctx, s.bucket)
	if err != nil {
		var resp minio.ErrorResponse
		if errors.As(err, &resp) && resp.StatusCode != 0 {
			return errclass.Fatalf("s3 sink %s: checking the bucket at %s: %s: %w", s.name, s.opts.Endpoint, describe(resp), err)
		}
		return errclass.Fatalf("s3 sink %s: cannot reach %s: %w", s.name, s.opts.Endpoint, err)
	}
	if !ok {
		return errclass.Fatalf("s3 sink %s: bucket %q does not exist at %s", s.name, s.bucket, s.opts.Endpoint)
	}
	return nil
}

// Open is the sink.Opener for "s3://BUCKET/PREFIX?options"; arg is what
// follows "s3:". The options and the environment variables it reads the
// credentials from are described in the package documentation. Errors are
// fatal.
func Open(ctx context.Context, arg string) (sink.Sink, error) {
	opts, err := parseSpec(arg)
	if err != nil {
		return nil, errclass.NewFatal(err)
	}
	opts.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
	opts.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	opts.SessionToken = os.Getenv("AWS_SESSION_TOKEN")
	if opts.AccessKey == "" || opts.SecretKey == "" {
		return nil, errclass.Fatalf("s3 sink s3://%s: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", opts.Bucket)
	}
	return New(ctx, opts)
}

// parseSpec parses the argument of Open into Options, without credentials.
func parseSpec(arg string) (Options, error) {
	var opts Options
	if !strings.HasPrefix(arg, "//") {
		return opts, errors.New("s3 sink: want s3://BUCKET/PREFIX?options")
	}
	u, err := url.Parse("s3:" + arg)
	if err != nil {
		// url's errors quote the input, which may hold user information.
		return opts, errors.New("s3 sink: not a valid s3://BUCKET/PREFIX?options URL")
	}
	if u.User != nil {
		return opts, errors.New("s3 sink: credentials in the spec are not supported; " +
			"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	opts.Bucket, opts.Prefix = u.Host, u.Path
	name := "s3://" + u.Host + u.EscapedPath()
	if opts.Bucket == "" {
		return opts, fmt.Errorf("s3 sink %s: no bucket", name)
	}
	if u.Fragment != "" {
		return opts, fmt.Errorf("s3 sink %s: unexpected fragment", name)
	}
	values, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return opts, fmt.Errorf("s3 sink %s: options: %w", name, err)
	}
	opts.Endpoint, opts.Secure = defaultEndpoint, true
	for key, vals := range values {
		val := vals[len(vals)-1]
		switch key {
		case "endpoint":
			opts.Endpoint = val
		case "region":
			opts.Region = val
		case "secure":
			if opts.Secure, err = strconv.ParseBool(val); err != nil {
				return opts, fmt.Errorf("s3 sink %s: secure=%q: want true or false", name, val)
			}
		case "concurrency":
			if opts.Concurrency, err = strconv.Atoi(val); err != nil || opts.Concurrency < 1 {
				return opts, fmt.Errorf("s3 sink %s: concurrency=%q: want a positive integer", name, val)
			}
		case "partsize":
			if opts.PartSize, err = parseSize(val); err != nil {
				return opts, fmt.Errorf("s3 sink %s: partsize=%q: %w", name, val, err)
			}
		default:
			return opts, fmt.Errorf("s3 sink %s: unknown option %q (want endpoint, region, secure, concurrency, partsize)", name, key)
		}
	}
	return opts, nil
}

// parseSize parses a byte count with an optional KiB, MiB or GiB suffix.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = num, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > MaxPartSize/mult {
		return 0, errors.New("want a positive number of bytes, optionally with a KiB, MiB or GiB suffix")
	}
	return n * mult, nil
}

// Concurrency returns Options.Concurrency (by default 8).
func (s *S3) Concurrency() int { return s.opts.Concurrency }

// Key returns the object key uri maps to, whether or not the sink holds it.
func (s *S3) Key(uri string) string {
	key, _ := objectKey(s.prefix, uri)
	return key
}

// Put uploads body as the object of r.URI, replacing any earlier one. The
// object appears only once body has ended with io.EOF (and r.Length bytes,
// when known), whole; after a body error, a ctx that ends or a failed
// request, the previous object (or none) is left. A body error is returned
// wrapped; other errors are classified as the package documentation says.
func (s *S3) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if r == nil {
		return errclass.Permanentf("s3 sink %s: put: nil resource", s.name)
	}
	what := s.name + ": put " + short(r.URI)
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("%s: %w", what, err)
	}
	key, hashed := objectKey(s.prefix, r.URI)
	if hashed {
		if err := s.putURI(ctx, key, r.URI); err != nil {
			return err
		}
	}
	b := newBodyReader(ctx, body, r.Length)
	var src io.Reader = b
	if r.Length == 0 {
		// minio-go does not read an empty body; end it here.
		if err := b.drain(); err != nil {
			return s.bodyError(what, err)
		}
		src = bytes.NewReader(nil)
	}
	start := time.Now()
	_, err := s.client.PutObject(ctx, s.bucket, key, src, r.Length, s.putOptions(r))
	if b.err != nil {
		return s.bodyError(what, b.err)
	}
	if err != nil {
		return classify(ctx, what, err)
	}
	if !b.ended {
		// The held-back byte makes this impossible; say so should it happen.
		return errclass.Fatalf("%s: internal error: the upload completed before the body ended", what)
	}
	s.log.Debug("put", "uri", short(r.URI), "key", key, "bytes", b.n, "took", time.Since(start))
	return nil
}

// bodyError wraps the error that stopped reading a body: retryable when ctx
// ended, with the body's own class otherwise.
func (s *S3) bodyError(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errclass.Retryablef("%s: %w", what, err)
	}
	return fmt.Errorf("%s: reading body: %w", what, err)
}

// putURI stores uri as the body of the URI object of the hashed key.
func (s *S3) putURI(ctx context.Context, key, uri string) error {
	_, err := s.client.PutObject(ctx, s.bucket, key+uriSuffix, strings.NewReader(uri), int64(len(uri)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return classify(ctx, s.name+": put "+short(uri)+": storing the URI", err)
	}
	return nil
}

// maxParts is the most parts S3 takes in one multipart upload.
const maxParts = 10000

// partSize is the part size for a body of the given length (-1: unknown):
// the sink's, or, for a body that would need more than maxParts of them,
// the least whole number of MiB that fits it in maxParts (at most
// MaxPartSize: S3's 5 TiB objects).
func partSize(size, length int64) int64 {
	if length <= size*maxParts {
		return size
	}
	need := (length + maxParts - 1) / maxParts
	need = (need + 1<<20 - 1) &^ (1<<20 - 1)
	return min(need, MaxPartSize)
}

// String names the sink (its spec, without credentials), so that a sink
// printed or logged shows no secret.
func (s *S3) String() string { return s.name }

// GoString is String, for %#v: Options holds the credentials.
func (o Options) GoString() string { return o.String() }

// putOptions returns the upload options for r: content type, metadata and
// part size. The metadata keeps within what S3 allows of it in all
// (maxUserMeta): the digests, length and lastmod first, then the URI (the
// key names the object already) and the sets, each only if it fits.
func (s *S3) putOptions(r *sink.Resource) minio.PutObjectOptions {
	meta := map[string]string{}
	if r.Hashes.MD5 != nil {
		meta[metaMD5] = hex.EncodeToString(r.Hashes.MD5)
	}
	if r.Hashes.SHA1 != nil {
		meta[metaSHA1] = hex.EncodeToString(r.Hashes.SHA1)
	}
	if r.Hashes.SHA256 != nil {
		meta[metaSHA256] = hex.EncodeToString(r.Hashes.SHA256)
	}
	if r.Length >= 0 {
		meta[metaLength] = strconv.FormatInt(r.Length, 10)
	}
	if !r.Lastmod.IsZero() {
		meta[metaLastmod] = r.Lastmod.UTC().Format(time.RFC3339Nano)
	}
	size := 0
	for k, v := range meta {
		size += metaSize(k, v)
	}
	if u := escapeMeta(r.URI); len(u) <= maxURIMeta && size+metaSize(metaURI, u) <= maxUserMeta {
		meta[metaURI] = u
		size += metaSize(metaURI, u)
	}
	if sets := strings.Join(r.Sets, " "); sets != "" && len(sets) <= maxSetsMeta && validHeaderValue(sets) && size+metaSize(metaSets, sets) <= maxUserMeta {
		meta[metaSets] = sets // setSpecs hold no spaces
	}
	opts := minio.PutObjectOptions{
		UserMetadata: meta,
		PartSize:     uint64(partSize(s.opts.PartSize, r.Length)),
	}
	if validHeaderValue(r.Type) {
		opts.ContentType = r.Type
	} else {
		s.log.Warn("not a valid Content-Type, storing without", "uri", short(r.URI), "type", strconv.Quote(r.Type))
	}
	return opts
}

// metaSize is what a user metadata entry counts against maxUserMeta.
func metaSize(key, value string) int { return len("x-amz-meta-") + len(key) + len(value) }

// validHeaderValue reports whether v can be sent as a header value as it
// is: printable ASCII and tabs, no surrounding white space.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return strings.TrimSpace(v) == v
}

// Delete removes the object of uri. Deleting a URI the sink does not hold
// is not an error. The URI object of a hashed key is kept (see doc.go).
func (s *S3) Delete(ctx context.Context, uri string) error {
	what := s.name + ": delete " + short(uri)
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("%s: %w", what, err)
	}
	key, _ := objectKey(s.prefix, uri)
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if isNotFound(err) {
			return nil
		}
		return classify(ctx, what, err)
	}
	s.log.Debug("delete", "uri", short(uri), "key", key)
	return nil
}

// Get opens the object of uri. When the sink does not hold uri the error
// satisfies errors.Is(err, fs.ErrNotExist).
func (s *S3) Get(ctx context.Context, uri string) (io.ReadCloser, error) {
	what := s.name + ": get " + short(uri)
	if err := ctx.Err(); err != nil {
		return nil, errclass.Retryablef("%s: %w", what, err)
	}
	key, _ := objectKey(s.prefix, uri)
	obj, err := s.reads.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err == nil {
		// The request is made lazily; Stat makes it now.
		_, err = obj.Stat()
		if err != nil {
			_ = obj.Close()
		}
	}
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("%s: %w", what, iofs.ErrNotExist)
		}
		return nil, classify(ctx, what, err)
	}
	return obj, nil
}

// Walk calls fn with the URI of every object the sink holds, in key order.
// It lists the keys under the prefix,
// decodes plain keys and reads the URI object of each hashed key. The
// objects of another sink at a prefix under this one's (its marker, see
// sinkMarker, met first) are skipped. Objects
// it does not recognise are logged and skipped, as are hashed objects
// whose URI object is missing or does not match. An error from fn stops
// the walk and is returned as it is.
func (s *S3) Walk(ctx context.Context, fn func(uri string) error) error {
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("%s: walk: %w", s.name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing when fn stops the walk
	objects := s.reads.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true})
	nested := "" // the prefix of another sink under this one's, being skipped
	for obj := range objects {
		if obj.Err != nil {
			return classify(ctx, s.name+": walk", obj.Err)
		}
		switch {
		case nested != "" && strings.HasPrefix(obj.Key, nested):
			continue
		case obj.Key == s.prefix+sinkMarker:
			continue
		case strings.HasSuffix(obj.Key, "/"+sinkMarker):
			nested = strings.TrimSuffix(obj.Key, sinkMarker)
			s.log.Info("skipping another sink's objects, at a prefix under this one's", "prefix", nested)
			continue
		}
		kind, uri, err := parseKey(s.prefix, obj.Key)
		switch kind {
		case foreignKey:
			s.log.Warn("skipping an object that is not part of the mirror", "key", obj.Key, "err", err)
			continue
		case hashedURI:
			continue
		case hashedMain:
			var ok bool
			if uri, ok, err = s.hashedURI(ctx, obj.Key); err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		if err := fn(uri); err != nil {
			return err
		}
	}
	return nil
}

// hashedURI reads the URI of a hashed key from its URI object. It reports
// false, with a warning, when that is missing or does not match the key.
func (s *S3) hashedURI(ctx context.Context, key string) (string, bool, error) {
	what := s.name + ": walk: reading the URI of " + key
	obj, err := s.reads.GetObject(ctx, s.bucket, key+uriSuffix, minio.GetObjectOptions{})
	if err != nil {
		return "", false, classify(ctx, what, err)
	}
	defer obj.Close()
	// A URI object is at most a few KiB; a larger one is not ours.
	b, err := io.ReadAll(io.LimitReader(obj, 1<<20))
	if err != nil {
		if isNotFound(err) {
			s.log.Warn("skipping a hashed object without its URI object", "key", key)
			return "", false, nil
		}
		return "", false, classify(ctx, what, err)
	}
	uri := string(b)
	if got, hashed := objectKey(s.prefix, uri); !hashed || got != key {
		s.log.Warn("skipping a hashed object whose URI object does not match", "key", key)
		return "", false, nil
	}
	return uri, true, nil
}

// Close releases the sink's idle connections. Every Put has completed or
// been aborted by the time it returns, so there is nothing to flush.
// Calling it again is a no-op.
func (s *S3) Close(context.Context) error {
	if !s.closed.Swap(true) {
		s.transport.CloseIdleConnections()
	}
	return nil
}

// isNotFound reports whether err says that the object is not there.
func isNotFound(err error) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && (resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound && resp.Code != "NoSuchBucket")
}

// short quotes a URI for messages, cut to a readable length.
func short(uri string) string {
	const shown = 200
	if len(uri) > shown {
		return strconv.Quote(uri[:shown]) + "…"
	}
	return strconv.Quote(uri)
}
