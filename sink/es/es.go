package es

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

var (
	_ sink.Sink      = (*ES)(nil)
	_ sink.Inventory = (*ES)(nil)
	_ sink.Limiter   = (*ES)(nil)
	_ sink.Retrier   = (*ES)(nil)
	_ sink.Opener    = Open
)

// Defaults of Options.
const (
	DefaultBatchSize      = 500
	DefaultBatchBytes     = 16 << 20
	DefaultTextMax        = 1 << 20
	DefaultMaxBody        = 64 << 20
	DefaultRetries        = 5
	DefaultRetryWait      = 200 * time.Millisecond
	DefaultRequestTimeout = 2 * time.Minute
	DefaultVisibleTimeout = 30 * time.Second
)

// Flavor is the kind of server behind the URL.
type Flavor int

// The flavours. FlavorAuto asks New to find out.
const (
	FlavorAuto Flavor = iota
	FlavorElasticsearch
	FlavorZinc
)

// String returns the flavour's name.
func (f Flavor) String() string {
	switch f {
	case FlavorElasticsearch:
		return "elasticsearch"
	case FlavorZinc:
		return "zincsearch"
	default:
		return "auto"
	}
}

// Options configure an ES sink. URL and Index are required; every other
// field has a default.
type Options struct {
	// URL is the server's base URL: "http://127.0.0.1:9200", or
	// "http://127.0.0.1:4080/es" for ZincSearch. User information in it is
	// used as credentials when Username is empty.
	URL string
	// Index is the resource index; ChangesIndex the change index (default
	// Index + "-changes"). Both are created, with the package's mappings,
	// when they do not exist.
	Index        string
	ChangesIndex string
	// Username and Password, when Username is set, are sent as HTTP basic
	// authentication.
	Username string
	Password string
	// BatchSize is the number of actions (each Put and Delete makes two)
	// that makes a bulk request; BatchBytes the size of their NDJSON that
	// does. Defaults: DefaultBatchSize, DefaultBatchBytes.
	BatchSize  int
	BatchBytes int
	// StoreBody keeps each body, base64, in the non-indexed "body" field so
	// that Get can return it. Bodies are then held in memory until sent,
	// and one larger than MaxBody (default DefaultMaxBody) fails its Put.
	StoreBody bool
	MaxBody   int64
	// TextMax is the largest text body (text/*, XML, JSON, JavaScript)
	// indexed as full text in the "text" field; 0 means DefaultTextMax and
	// a negative value turns full text off.
	TextMax int64
	// ResourceSet, when set, is written as every document's resource_set.
	ResourceSet string
	// Concurrency is the number of Put and Delete calls the sink takes at
	// once (see sink.Limiter); 0 means GOMAXPROCS.
	Concurrency int
	// Retries bounds the retries of one bulk request (default
	// DefaultRetries; negative means none), waiting RetryWait (default
	// DefaultRetryWait) and then exponentially longer, or as long as a 429's
	// Retry-After asks.
	Retries   int
	RetryWait time.Duration
	// RequestTimeout bounds each HTTP request (default
	// DefaultRequestTimeout).
	RequestTimeout time.Duration
	// VisibleTimeout bounds the wait, on ZincSearch, for a bulk request's
	// writes to become visible (default DefaultVisibleTimeout).
	VisibleTimeout time.Duration
	// Flavor is the server's kind; FlavorAuto (the zero value) detects it.
	Flavor Flavor
	// HTTPClient sends the requests; nil means a client of its own.
	HTTPClient *http.Client
	// Logger receives the sink's warnings; nil discards them.
	Logger *slog.Logger
}

// Failure is an action the sink queued but could not apply.
type Failure struct {
	// URI is the resource's URI.
	URI string
	// Op is "put" or "delete" for the resource document, "change" for the
	// change document.
	Op string
	// Err says why; it is classified permanent (rejected by the server),
	// retryable (retries ran out) or fatal (credentials refused).
	Err error
	// deleted: the change document recorded a delete.
	deleted bool
}

// ES is the Elasticsearch sink. Its methods are safe for concurrent use.
type ES struct {
	opts   Options
	base   string // scheme://host[/prefix], no user information, no trailing slash
	flavor Flavor
	client *http.Client
	log    *slog.Logger
	// instance prefixes the revs of this sink's writes; seq numbers them.
	instance string
	seq      atomic.Uint64

	// flushMu is held while a batch is taken and sent, so that batches
	// reach the server one at a time and in order.
	flushMu sync.Mutex

	mu       sync.Mutex // guards the fields below
	pending  batch
	failures []Failure
	reported int   // failures already returned by Flush
	deferred error // a flush failure not yet returned by Put or Delete
	fatal    error // a fatal flush failure: returned by every later call
	closed   bool
}

// Open is the sink.Opener for "es:URL" (see the package documentation for
// the URL and its options). Credentials in the URL, or else in ES_USERNAME
// and ES_PASSWORD, are used for basic authentication. Errors are fatal and
// never include the credentials.
func Open(ctx context.Context, arg string) (sink.Sink, error) {
	opts, err := parseSpec(arg)
	if err != nil {
		return nil, err
	}
	if opts.Username == "" {
		opts.Username, opts.Password = os.Getenv("ES_USERNAME"), os.Getenv("ES_PASSWORD")
	}
	return New(ctx, opts)
}

// parseSpec turns an Open argument into Options.
func parseSpec(arg string) (Options, error) {
	var opts Options
	// The parser's message would quote the URL, or the part it could not
	// read (a password with a character to escape, say). Without "//",
	// USER:PASSWORD@HOST reads as a scheme and an opaque rest; an "@" in
	// the path is a password's "/" unescaped.
	u, err := url.Parse(arg)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Contains(u.Path, "@") {
		return opts, errclass.Fatalf("es sink: invalid URL, want http://[USER:PASSWORD@]HOST:PORT[/PREFIX]/INDEX (a password's characters such as / and @ percent-encoded)")
	}
	if u.User != nil {
		opts.Username = u.User.Username()
		opts.Password, _ = u.User.Password()
		u.User = nil
	}
	query := u.Query()
	u.RawQuery, u.Fragment = "", ""
	path := strings.TrimSuffix(u.Path, "/")
	prefix, index, _ := cutLast(path, "/")
	if index == "" {
		return opts, errclass.Fatalf("es sink %s: no index in the URL, want http://HOST:PORT[/PREFIX]/INDEX", u.Redacted())
	}
	u.Path, u.RawPath = prefix, ""
	opts.URL, opts.Index = u.String(), index
	for key, vals := range query {
		val := vals[len(vals)-1]
		bad := func(want string) error {
			return errclass.Fatalf("es sink %s: option %s=%q: want %s", opts.URL+"/"+index, key, val, want)
		}
		switch key {
		case "changes":
			opts.ChangesIndex = val
		case "resource_set":
			opts.ResourceSet = val
		case "store_body":
			if opts.StoreBody, err = strconv.ParseBool(val); err != nil {
				return opts, bad("a boolean")
			}
		case "batch", "batch_bytes", "concurrency", "retries", "text_max":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || (n == 0 && key != "retries" && key != "text_max") {
				return opts, bad("a positive integer")
			}
			switch key {
			case "batch":
				opts.BatchSize = n
			case "batch_bytes":
				opts.BatchBytes = n
			case "concurrency":
				opts.Concurrency = n
			case "retries":
				opts.Retries = n
				if n == 0 {
					opts.Retries = -1
				}
			case "text_max":
				opts.TextMax = int64(n)
				if n == 0 {
					opts.TextMax = -1
				}
			}
		default:
			return opts, errclass.Fatalf("es sink %s: unknown option %q (want changes, batch, batch_bytes, store_body, text_max, resource_set, concurrency, retries)",
				opts.URL+"/"+index, key)
		}
	}
	return opts, nil
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return "", s, false
}

// New opens the sink described by opts: it checks that the server answers
// (and how: Elasticsearch or ZincSearch), that the credentials are
// accepted, and creates the two indexes when they do not exist. Any failure
// is fatal.
func New(ctx context.Context, opts Options) (*ES, error) {
	s, err := newES("es sink", opts)
	if err != nil {
		return nil, err
	}
	s.log = s.log.With("sink", "es:"+s.base+"/"+s.opts.Index)
	var token [6]byte
	_, _ = rand.Read(token[:])
	s.instance = strconv.FormatInt(time.Now().Unix(), 36) + hex.EncodeToString(token[:])
	s.pending.reset()
	if s.flavor == FlavorAuto {
		if s.flavor, err = s.detect(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.ensureIndex(ctx, s.opts.Index, resourceMapping); err != nil {
		return nil, err
	}
	if err := s.ensureIndex(ctx, s.opts.ChangesIndex, changeMapping); err != nil {
		return nil, err
	}
	return s, nil
}

// newES checks opts — the URL (credentials in it taken as the username
// and password), the index names, the other options — and returns an ES for
// them, not yet in touch with the server. what names the caller in errors.
func newES(what string, opts Options) (*ES, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errclass.Fatalf("%s: URL must be http(s)://HOST:PORT[/PREFIX]", what)
	}
	if u.User != nil {
		if opts.Username == "" {
			opts.Username = u.User.Username()
			opts.Password, _ = u.User.Password()
		}
		u.User = nil
	}
	u.RawQuery, u.Fragment = "", ""
	base := strings.TrimSuffix(u.String(), "/")
	if opts.ChangesIndex == "" {
		opts.ChangesIndex = opts.Index + "-changes"
	}
	for _, name := range []string{opts.Index, opts.ChangesIndex} {
		if err := checkIndexName(name); err != nil {
			return nil, errclass.Fatalf("%s %s: %w", what, base, err)
		}
	}
	if opts.Index == opts.ChangesIndex {
		return nil, errclass.Fatalf("%s %s: the change index must differ from the resource index", what, base)
	}
	if err := setDefaults(&opts); err != nil {
		return nil, errclass.Fatalf("%s %s/%s: %w", what, base, opts.Index, err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	return &ES{opts: opts, base: base, flavor: opts.Flavor, client: client, log: logger}, nil
}

func setDefaults(o *Options) error {
	switch {
	case o.BatchSize < 0, o.BatchBytes < 0, o.MaxBody < 0, o.Concurrency < 0,
		o.RetryWait < 0, o.RequestTimeout < 0, o.VisibleTimeout < 0:
		return errors.New("negative option")
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.TextMax == 0 {
		o.TextMax = DefaultTextMax
	}
	if o.Concurrency == 0 {
		o.Concurrency = runtime.GOMAXPROCS(0)
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.RetryWait == 0 {
		o.RetryWait = DefaultRetryWait
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.VisibleTimeout == 0 {
		o.VisibleTimeout = DefaultVisibleTimeout
	}
	return nil
}

// checkIndexName applies Elasticsearch's rules for index names.
func checkIndexName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 {
		return fmt.Errorf("invalid index name %q", name)
	}
	if strings.ContainsAny(name[:1], "-_+") {
		return fmt.Errorf("index name %q must not start with -, _ or +", name)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.+", c) || c > 127
		if !ok {
			return fmt.Errorf("index name %q: want lower-case letters, digits, -, _, . and +", name)
		}
	}
	return nil
}

// Concurrency returns Options.Concurrency (by default GOMAXPROCS).
func (s *ES) Concurrency() int { return s.opts.Concurrency }

// RetriesRequests reports whether the sink retries its requests' temporary
// failures itself (Options.Retries): then its caller does not (see
// sink.Retrier).
func (s *ES) RetriesRequests() bool { return s.opts.Retries > 0 }

// Flavor returns the kind of server the sink writes to.
func (s *ES) Flavor() Flavor { return s.flavor }

// Failed returns the actions that could not be applied so far, in the order
// they failed.
func (s *ES) Failed() []Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Failure(nil), s.failures...)
}

// Flush sends what is queued and returns the actions that failed since the
// previous Flush (sink.Batcher): a failed change document as a failure of
// its resource's Put or Delete, so that the pipeline writes both again.
// What it returns is not returned again by the next Put or Delete.
func (s *ES) Flush(ctx context.Context) []sink.Failed {
	s.flush(ctx, false)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sink.Failed
	seen := map[string]bool{}
	for _, f := range s.failures[s.reported:] {
		if !seen[f.URI] { // a resource's document and its change: one failure
			seen[f.URI] = true
			out = append(out, sink.Failed{URI: f.URI, Delete: f.Op == "delete" || f.deleted, Err: f.Err})
		}
	}
	s.reported = len(s.failures)
	s.deferred = nil // reported here (a fatal error stays)
	return out
}

var _ sink.Batcher = (*ES)(nil)

// Put reads body to io.EOF and queues r's resource document and an
// "updated" change document (see the package documentation for batching).
// When a Read fails, or ctx ends, nothing is queued and the previous state
// stays. A body error is returned wrapped; a ctx error is retryable; a
// body larger than Options.MaxBody, with Options.StoreBody, is permanent.
func (s *ES) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if r == nil {
		return errclass.Permanentf("es: put: nil resource")
	}
	if err := s.takeError(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("es: put %s: %w", short(r.URI), err)
	}
	b, err := s.readBody(ctx, r, body)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("es: put %s: %w", short(r.URI), err)
	}
	rev := s.nextRev()
	now := time.Now().UTC()
	res, err := s.resourceAction(r, b, rev, now)
	if err != nil {
		return err
	}
	change, err := s.changeAction(r.URI, "updated", r.Lastmod, rev, now)
	if err != nil {
		return err
	}
	return s.enqueue(ctx, res, change)
}

// Delete queues the deletion of uri's resource document and a "deleted"
// change document. Deleting a URI the index does not hold is not an error.
func (s *ES) Delete(ctx context.Context, uri string) error {
	if err := s.takeError(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("es: delete %s: %w", short(uri), err)
	}
	rev := s.nextRev()
	change, err := s.changeAction(uri, "deleted", time.Time{}, rev, time.Now().UTC())
	if err != nil {
		return err
	}
	return s.enqueue(ctx, deleteAction(s.opts.Index, uri), change)
}

// Close sends what is queued, waiting at most as long as ctx allows, and
// releases the sink's connections. It returns an error when any action of
// the sink's life failed (see Failed). No other method may be called after
// Close.
func (s *ES) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errclass.Permanentf("es sink: closed twice")
	}
	s.mu.Unlock()
	s.flush(ctx, false)
	s.mu.Lock()
	s.closed = true
	failures := append([]Failure(nil), s.failures...)
	s.mu.Unlock()
	s.client.CloseIdleConnections()
	return summarize(failures)
}

// summarize turns failures into Close's error.
func summarize(failures []Failure) error {
	if len(failures) == 0 {
		return nil
	}
	class := errclass.Permanent
	for _, f := range failures {
		switch c := errclass.Of(f.Err); {
		case c == errclass.Fatal:
			class = errclass.Fatal
		case c == errclass.Retryable && class != errclass.Fatal:
			class = errclass.Retryable
		}
	}
	first := failures[0]
	err := fmt.Errorf("es sink: %d actions failed (see Failed); first: %s %s: %w", len(failures), first.Op, short(first.URI), first.Err)
	return &errclass.Error{Class: class, Err: err}
}

// takeError returns the error a call must return before doing anything: a
// closed sink, a fatal failure, or a flush failure not yet reported (which
// it clears).
func (s *ES) takeError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errclass.Fatalf("es sink: used after Close")
	case s.fatal != nil:
		return s.fatal
	}
	err := s.deferred
	s.deferred = nil
	return err
}

func (s *ES) nextRev() string {
	return s.instance + "-" + strconv.FormatUint(s.seq.Add(1), 10)
}

// short quotes a URI for messages, cut to a readable length.
func short(uri string) string {
	const shown = 200
	if len(uri) > shown {
		return strconv.Quote(uri[:shown]) + "…"
	}
	return strconv.Quote(uri)
}
