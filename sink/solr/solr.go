package solr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

var (
	_ sink.Sink      = (*Solr)(nil)
	_ sink.Inventory = (*Solr)(nil)
	_ sink.Limiter   = (*Solr)(nil)
	_ sink.Retrier   = (*Solr)(nil)
	_ sink.Batcher   = (*Solr)(nil)
	_ sink.Opener    = Open
)

// Defaults of Options.
const (
	DefaultBatchSize      = 200
	DefaultBatchMaxBytes  = 16 << 20
	DefaultCommitWithin   = 10 * time.Second
	DefaultTextMaxBytes   = 1 << 20
	DefaultBodyMaxBytes   = 16 << 20
	DefaultConcurrency    = 4
	DefaultRetries        = 5
	DefaultBackoffInitial = 500 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
	// DefaultTimeout bounds each request of the default HTTP client.
	DefaultTimeout = 2 * time.Minute
)

// Options configure a Solr sink. Only URL is required; a zero value takes
// the default named in its comment.
type Options struct {
	// URL is the core's URL, "http://HOST:PORT/solr/CORE": the endpoints
	// are URL+"/update", URL+"/select" and URL+"/admin/ping". User
	// information in it is sent as basic authentication.
	URL string
	// BatchSize is the number of queued operations (adds and deletes) that
	// makes the queue be sent. Default DefaultBatchSize.
	BatchSize int
	// BatchMaxBytes also makes the queue be sent once its documents take
	// this many bytes of JSON, and bounds one request (a bigger document is
	// sent alone). Default DefaultBatchMaxBytes.
	BatchMaxBytes int
	// CommitWithin is sent as the commitWithin parameter of every update,
	// in milliseconds. Default DefaultCommitWithin; negative leaves it out.
	CommitWithin time.Duration
	// TextMaxBytes caps the text field. Default DefaultTextMaxBytes;
	// negative leaves the text field out.
	TextMaxBytes int
	// StoreBody stores every body, base64, in the body field, so that Get
	// can return it. Off by default.
	StoreBody bool
	// BodyMaxBytes is the largest body StoreBody keeps (in memory, until
	// the batch is sent); Put refuses a bigger one with a permanent error.
	// Default DefaultBodyMaxBytes.
	BodyMaxBytes int64
	// Concurrency is the number of Put and Delete calls the sink takes at
	// once (see sink.Limiter). Default DefaultConcurrency.
	Concurrency int
	// Retries is the number of times a request is repeated after a
	// temporary failure. Default DefaultRetries; negative means none.
	Retries int
	// BackoffInitial and BackoffMax shape the exponential backoff (with
	// jitter) between attempts. Defaults DefaultBackoffInitial and
	// DefaultBackoffMax.
	BackoffInitial, BackoffMax time.Duration
	// HTTPClient sends the requests. Default: a client with
	// DefaultTimeout.
	HTTPClient *http.Client
	// Header is sent with every request (authentication, for instance).
	// It is never logged.
	Header http.Header
	// Logger receives the sink's warnings and, at debug level, one line per
	// request; nil discards them.
	Logger *slog.Logger
}

// Failure is an operation that Put or Delete accepted but that did not
// reach the index.
type Failure struct {
	// URI is the resource's URI, as given to Put or Delete.
	URI string
	// Op is "add" or "delete".
	Op string
	// Err says why; errclass.IsPermanent(Err) tells a document that Solr
	// rejected from one that was part of a batch that could not be sent.
	Err error
}

// maxFailures bounds the failures kept for Failed, and those kept for the
// next Flush; later ones are only counted.
const maxFailures = 100_000

// Solr is the Solr sink. Its methods are safe for concurrent use.
type Solr struct {
	opts     Options
	base     *url.URL // the core's URL, without a trailing slash
	name     string   // the core's URL, redacted, for messages
	client   *http.Client
	ownsHTTP bool
	log      *slog.Logger
	bufs     sync.Pool // *[]byte of copyBufferSize

	// sending serializes everything that sends the queue or commits, so
	// that operations reach Solr in the order they were queued.
	sending sync.Mutex

	mu         sync.Mutex
	queue      []op
	queueBytes int
	queued     uint64  // operations ever queued
	committed  uint64  // queued when the last successful commit started
	pending    []error // batch errors not yet returned by admit, Flush or Close
	fatal      error
	failures   []Failure // for Failed
	unflushed  []Failure // for the next Flush
	dropped    int       // failures not kept
	rejected   int       // permanent failures since the last Flush, all counted
	closed     bool
}

// New checks opts, pings the core (GET URL/admin/ping?wt=json) and
// returns the sink. A bad URL, an unreachable Solr, a missing core or
// refused credentials are fatal errors. ctx bounds the ping only.
func New(ctx context.Context, opts Options) (*Solr, error) {
	u, err := url.Parse(strings.TrimRight(opts.URL, "/"))
	if err != nil {
		// url.Parse's error quotes the URL, password and all.
		return nil, errclass.Fatalf("solr sink: not a valid http(s) URL")
	}
	name := u.Redacted()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errclass.Fatalf("solr sink %q: want an http or https URL", name)
	case u.Host == "":
		return nil, errclass.Fatalf("solr sink %q: no host", name)
	case strings.Trim(u.Path, "/") == "":
		return nil, errclass.Fatalf("solr sink %q: no core: want http://HOST:PORT/solr/CORE", name)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errclass.Fatalf("solr sink %q: the core URL takes no query or fragment", name)
	}
	if err := setDefaults(&opts); err != nil {
		return nil, errclass.Fatalf("solr sink %q: %w", name, err)
	}
	s := &Solr{opts: opts, base: u, name: name, client: opts.HTTPClient}
	if s.client == nil {
		s.client = &http.Client{Timeout: DefaultTimeout}
		s.ownsHTTP = true
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s.log = logger.With("sink", "solr:"+name)
	s.bufs.New = func() any {
		b := make([]byte, copyBufferSize)
		return &b
	}
	if err := s.ping(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func setDefaults(o *Options) error {
	switch {
	case o.BatchSize < 0:
		return fmt.Errorf("negative batch size %d", o.BatchSize)
	case o.BatchMaxBytes < 0:
		return fmt.Errorf("negative batch byte limit %d", o.BatchMaxBytes)
	case o.BodyMaxBytes < 0:
		return fmt.Errorf("negative body limit %d", o.BodyMaxBytes)
	case o.Concurrency < 0:
		return fmt.Errorf("negative concurrency %d", o.Concurrency)
	case o.BackoffInitial < 0 || o.BackoffMax < 0:
		return fmt.Errorf("negative backoff")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.BatchSize, DefaultBatchSize)
	def(&o.BatchMaxBytes, DefaultBatchMaxBytes)
	def(&o.TextMaxBytes, DefaultTextMaxBytes)
	def(&o.Concurrency, DefaultConcurrency)
	def(&o.Retries, DefaultRetries)
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.CommitWithin == 0 {
		o.CommitWithin = DefaultCommitWithin
	}
	if o.BodyMaxBytes == 0 {
		o.BodyMaxBytes = DefaultBodyMaxBytes
	}
	if o.BackoffInitial == 0 {
		o.BackoffInitial = DefaultBackoffInitial
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	return nil
}

// Open is the sink.Opener for "solr:URL". The argument is the core's URL,
// optionally followed by options as query parameters:
//
//	batch=N          Options.BatchSize
//	batchBytes=N     Options.BatchMaxBytes
//	commitWithin=MS  Options.CommitWithin in milliseconds; 0 or less: not sent
//	textMax=BYTES    Options.TextMaxBytes; 0 or less: no text field
//	storeBody=BOOL   Options.StoreBody
//	bodyMax=BYTES    Options.BodyMaxBytes
//	concurrency=N    Options.Concurrency
//	retries=N        Options.Retries; 0: none
//
// Other parameters are refused. Errors are fatal.
func Open(ctx context.Context, arg string) (sink.Sink, error) {
	u, err := url.Parse(arg)
	if err != nil {
		// url.Parse's error quotes the URL, password and all.
		return nil, errclass.Fatalf("solr sink: not a valid http(s) URL")
	}
	values, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errclass.Fatalf("solr sink %q: options: %w", u.Redacted(), err)
	}
	u.RawQuery, u.ForceQuery = "", false
	opts := Options{URL: u.String()}
	for key, vals := range values {
		val := vals[len(vals)-1]
		n, numErr := strconv.ParseInt(val, 10, 64)
		positive := func(dst *int) error {
			if numErr != nil || n < 1 || n > 1<<31 {
				return fmt.Errorf("%s=%q: want a positive integer", key, val)
			}
			*dst = int(n)
			return nil
		}
		switch key {
		case "batch":
			err = positive(&opts.BatchSize)
		case "batchBytes":
			err = positive(&opts.BatchMaxBytes)
		case "concurrency":
			err = positive(&opts.Concurrency)
		case "bodyMax":
			var v int
			if err = positive(&v); err == nil {
				opts.BodyMaxBytes = int64(v)
			}
		case "commitWithin", "textMax", "retries":
			if numErr != nil || n > 1<<31 {
				err = fmt.Errorf("%s=%q: want an integer", key, val)
				break
			}
			switch {
			case key == "commitWithin" && n > 0:
				opts.CommitWithin = time.Duration(n) * time.Millisecond
			case key == "commitWithin":
				opts.CommitWithin = -1
			case key == "textMax" && n > 0:
				opts.TextMaxBytes = int(n)
			case key == "textMax":
				opts.TextMaxBytes = -1
			case n > 0:
				opts.Retries = int(n)
			default:
				opts.Retries = -1
			}
		case "storeBody":
			opts.StoreBody, err = strconv.ParseBool(val)
		default:
			err = fmt.Errorf("unknown option %q (want batch, batchBytes, commitWithin, textMax, storeBody, bodyMax, concurrency, retries)", key)
		}
		if err != nil {
			return nil, errclass.Fatalf("solr sink %q: %w", u.Redacted(), err)
		}
	}
	return New(ctx, opts)
}

// Concurrency returns Options.Concurrency (by default DefaultConcurrency).
func (s *Solr) Concurrency() int { return s.opts.Concurrency }

// RetriesRequests reports whether the sink retries its requests' temporary
// failures itself (Options.Retries): then its caller does not (see
// sink.Retrier).
func (s *Solr) RetriesRequests() bool { return s.opts.Retries > 0 }

// URL returns the core's URL, with any password redacted.
func (s *Solr) URL() string { return s.name }

// Put reads body to io.EOF and queues r's document (see the package
// documentation for its fields); it returns nil once the document is
// queued. The document may be sent before Put returns, when it fills the
// queue, or by a later call. Put returns, without doing anything else, an
// error of an earlier batch that was not returned yet, or the sink's fatal
// error. A body error is returned wrapped; a ctx that ends is retryable; a
// URI too long for an id or a body over Options.BodyMaxBytes (with
// StoreBody) is permanent. On any error nothing is queued.
func (s *Solr) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if r == nil {
		return errclass.Permanentf("solr: put: nil resource")
	}
	if err := s.admit(ctx, "put", r.URI); err != nil {
		return err
	}
	o, err := s.readDocument(ctx, r, body)
	if err != nil {
		return err
	}
	s.enqueue(ctx, o)
	return nil
}

// Delete queues the deletion of uri's document and returns nil once it is
// queued; deleting a URI that is not indexed is not an error. Like Put, it
// first returns an earlier batch's error or the sink's fatal error.
func (s *Solr) Delete(ctx context.Context, uri string) error {
	if err := s.admit(ctx, "delete", uri); err != nil {
		return err
	}
	id := docID(uri)
	if len(id) > maxTermBytes {
		// Never indexed: Put refuses such a URI.
		return nil
	}
	s.enqueue(ctx, op{del: true, id: id, uri: uri})
	return nil
}

// admit returns the error a Put or Delete must return instead of doing
// anything: the sink is closed or failed, an earlier batch failed, or ctx
// has ended.
func (s *Solr) admit(ctx context.Context, what, uri string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errclass.Fatalf("solr: %s %s: the sink is closed", what, short(uri))
	case s.fatal != nil:
		return fmt.Errorf("solr: %s %s: %w", what, short(uri), s.fatal)
	case len(s.pending) > 0:
		err := errors.Join(s.pending...)
		s.pending = nil
		return fmt.Errorf("solr: %s %s: not done, because an earlier batch failed: %w", what, short(uri), err)
	}
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("solr: %s %s: %w", what, short(uri), err)
	}
	return nil
}

// Failed returns the operations accepted by Put or Delete that did not
// reach the index, in the order they failed (at most 100000; Close's error
// gives the full count of rejections).
func (s *Solr) Failed() []Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Failure(nil), s.failures...)
}

// Close sends what is queued, asks for a hard commit (unless nothing was
// queued since the last commit), and releases the sink's idle connections.
// It returns the errors of that, the errors of earlier batches not
// returned yet, and a permanent error counting the documents Solr rejected
// since the last Flush (listed by Failed). Operations still queued when ctx
// ends are lost (and listed by Failed). Calling it again is a no-op.
func (s *Solr) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.ownsHTTP {
		defer s.client.CloseIdleConnections()
	}

	s.sending.Lock()
	defer s.sending.Unlock()
	var errs []error
	if err := s.sendQueue(ctx, true); err != nil {
		errs = append(errs, err)
	}
	s.mu.Lock()
	fatal, changed := s.fatal, s.queued != s.committed
	s.mu.Unlock()
	if fatal == nil && changed {
		if err := s.commit(ctx); err != nil {
			errs = append(errs, err)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		lost := errclass.Retryablef("solr: closed before it was sent")
		for _, o := range s.queue {
			s.failLocked(o, lost)
		}
		errs = append(errs, errclass.Retryablef("solr %s: close: %d operations were not sent", s.name, len(s.queue)))
		s.queue, s.queueBytes = nil, 0
	}
	errs = append(errs, s.pending...)
	s.pending = nil
	if s.rejected > 0 {
		errs = append(errs, errclass.Permanentf("solr %s: %d documents were rejected (see Failed)%s", s.name, s.rejected, s.firstRejectedLocked()))
		s.rejected = 0
	}
	if s.dropped > 0 {
		s.log.Warn("more operations failed than Failed lists", "unlisted", s.dropped)
	}
	s.unflushed = nil
	return errors.Join(errs...)
}

// firstRejectedLocked describes the first rejection, for Close's error.
func (s *Solr) firstRejectedLocked() string {
	for _, f := range s.unflushed {
		if errclass.IsPermanent(f.Err) {
			return fmt.Sprintf("; the first: %v", f.Err)
		}
	}
	return ""
}

// failLocked records a failed operation.
func (s *Solr) failLocked(o op, err error) {
	if errclass.IsPermanent(err) {
		s.rejected++
	}
	what := "add"
	if o.del {
		what = "delete"
	}
	f := Failure{URI: o.uri, Op: what, Err: err}
	if len(s.unflushed) < maxFailures {
		s.unflushed = append(s.unflushed, f)
	} else {
		s.dropped++
	}
	if len(s.failures) < maxFailures {
		s.failures = append(s.failures, f)
	}
}

// Flush sends everything queued, waits for Solr's answers (it does not
// commit), and returns the operations that failed since the previous Flush:
// rejected documents (permanent), operations of batches that could not be
// sent (retryable, or fatal when the sink failed). When ctx ends first,
// what is still queued is dropped and returned as failed (retryable). The
// failures it returns are not reported again: the next Put, Delete or Close
// does not return their batches' errors, nor does Close count them.
func (s *Solr) Flush(ctx context.Context) []sink.Failed {
	s.sending.Lock()
	defer s.sending.Unlock()
	err := s.sendQueue(ctx, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && len(s.queue) > 0 {
		if !errclass.IsFatal(err) {
			err = errclass.Retryablef("solr: not sent before Flush gave up: %w", err)
		}
		for _, o := range s.queue {
			s.failLocked(o, err)
		}
		s.queue, s.queueBytes = nil, 0
	}
	out := make([]sink.Failed, 0, len(s.unflushed))
	for _, f := range s.unflushed {
		out = append(out, sink.Failed{URI: f.URI, Delete: f.Op == "delete", Err: f.Err})
	}
	if s.dropped > 0 {
		s.log.Warn("more operations failed than Flush can list", "unlisted", s.dropped)
		s.dropped = 0
	}
	s.unflushed, s.pending, s.rejected = nil, nil, 0
	return out
}

// short quotes a URI for messages, cut to a readable length.
func short(uri string) string {
	const shown = 200
	if len(uri) > shown {
		return strconv.Quote(uri[:shown]) + "…"
	}
	return strconv.Quote(uri)
}
