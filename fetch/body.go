package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/retry"
)

var (
	errHeaderTimeout = errors.New("response headers timed out")
	errStalled       = errors.New("body stalled")
	// errInterrupted marks a transfer that ended early; Read resumes it.
	errInterrupted = errors.New("transfer interrupted")
	// errClosed is returned by Read after Close.
	errClosed = errors.New("read on closed body")
)

// maxEmptyReads bounds consecutive (0, nil) reads from a transport.
const maxEmptyReads = 100

// Body is the body of a GET opened by Client.Open: an io.ReadCloser whose
// Read transparently resumes interrupted transfers.
//
// On a reset, an unexpected EOF, a body shorter than its Content-Length or a
// stall, Read re-requests the rest with "Range: bytes=N-" and, when the
// first response carried a strong ETag (preferred) or a Last-Modified date,
// "If-Range" with it. Without either validator, Range is used only when the
// first response said "Accept-Ranges: bytes", and the resumed part is
// checked by its Content-Range alone; otherwise the whole representation is
// requested again. When the server answers a resume with the whole
// representation (200) and its validator is unchanged (or there is none
// before and after), the first N bytes are discarded and reading continues
// seamlessly. A changed validator or length, or a 206 whose Content-Range
// does not start at N, makes Read fail with a retryable error wrapping
// ErrChanged: the bytes already returned are stale. A body longer than its
// Content-Length is a permanent error.
//
// Resumes re-request the URL given to Open, not the redirect target, so that
// expiring signed redirects are renewed.
//
// Read is not safe for concurrent use; Close may be called concurrently with
// Read to abort it. The Open context governs the whole life of the Body:
// cancelling it makes Read return ctx.Err().
type Body struct {
	// URL is the final URL of the first response, after redirects.
	URL string
	// ContentType is the Content-Type of the first response.
	ContentType string
	// ContentLength is the length of the representation announced by the
	// first response, -1 when unknown.
	ContentLength int64
	// ETag and LastModified are the validators of the first response, ""
	// when absent.
	ETag, LastModified string
	// Header is a copy of the header of the first response, for what the
	// fields above do not cover (an HTTP Link header, for instance).
	Header http.Header

	c      *Client
	reqURL string
	host   string
	ctx    context.Context // the caller's
	bctx   context.Context // ctx, also cancelled by Close
	cancel context.CancelFunc
	closed atomic.Bool

	mu      sync.Mutex // held by Read and by Close after cancelling
	started bool       // the first response was accepted
	// ifNoneMatch and ifModifiedSince make the first request conditional.
	ifNoneMatch, ifModifiedSince string
	// form, when not empty, is POSTed (see OpenForm).
	form string
	// strict: bytes returned are never continued from another response
	// without a strong validator (an ETag not weak, or a Last-Modified
	// date) that shows one representation: a download that lists no
	// digest to catch a splice (see Client.Download).
	strict    bool
	validator string   // If-Range value, "" for none
	ranges    bool     // resume with Range requests
	total     int64    // expected representation length, -1 unknown
	off       int64    // bytes returned so far
	cur       *attempt // the response being read, nil between attempts
	interrupt error    // why the last attempt ended early
	err       error    // sticky final result of Read (io.EOF included)
	// attemptStart is b.off when the current (or last) attempt began.
	attemptStart int64
	// budget counts the consecutive attempts without progress and paces
	// them; it is spent across reconnections.
	budget *retry.Budget

	attempts, resumes, restarts int
	// max, when above 0, is the most bytes Read may return (see Limit).
	max int64
}

var _ io.ReadCloser = (*Body)(nil)

// attempt is one response being read.
type attempt struct {
	resp     *http.Response
	ctx      context.Context
	cancel   context.CancelCauseFunc
	watchdog *time.Timer
	skip     int64 // leading bytes to discard
	speed    *lowSpeed
}

func (a *attempt) close() {
	a.watchdog.Stop()
	a.resp.Body.Close()
	a.cancel(nil)
}

// Open GETs rawURL and returns its Body once a response with a usable status
// has arrived, retrying temporary failures as Options describe. Errors carry
// the URL; an unusable status is a *StatusError (retryable for 408, 425, 429
// and 5xx, permanent otherwise); a malformed or non-HTTP URL, a certificate
// failure and too many redirects are permanent; when ctx ends first, Open
// returns ctx.Err(). The caller must Close the Body.
func (c *Client) Open(ctx context.Context, rawURL string) (*Body, error) {
	b, err := c.newBody(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if err := b.connect(0); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// OpenForm is Open with a POST of form (application/x-www-form-urlencoded)
// to rawURL, as OAI-PMH allows for a request whose URL would be too long.
// Retries and limits are Open's; a body that breaks is read again from the
// start (never by Range: a POST is not ranged), skipping what was read.
func (c *Client) OpenForm(ctx context.Context, rawURL string, form url.Values) (*Body, error) {
	b, err := c.newBody(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	b.form = form.Encode()
	if err := b.connect(0); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// ErrNotModified is wrapped by OpenIfChanged's error when the server
// answers 304 Not Modified: the caller's copy is current.
var ErrNotModified = errors.New("not modified")

// OpenIfChanged is Open with a conditional GET: If-None-Match with etag and
// If-Modified-Since with lastModified (either may be empty). When the
// server answers 304 it returns an error wrapping ErrNotModified (and
// classified permanent, so it is never retried).
func (c *Client) OpenIfChanged(ctx context.Context, rawURL, etag, lastModified string) (*Body, error) {
	b, err := c.newBody(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	b.ifNoneMatch, b.ifModifiedSince = etag, lastModified
	if err := b.connect(0); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// newBody validates rawURL and prepares a Body without sending anything.
func (c *Client) newBody(ctx context.Context, rawURL string) (*Body, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errclass.Permanentf("GET %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errclass.Permanentf("GET %q: not an absolute http(s) URL", rawURL)
	}
	bctx, cancel := context.WithCancel(ctx)
	return &Body{
		URL:           rawURL,
		ContentLength: -1,
		c:             c,
		reqURL:        rawURL,
		host:          u.Host,
		ctx:           ctx,
		bctx:          bctx,
		cancel:        cancel,
		total:         -1,
		budget:        c.policy(rawURL).Start(),
	}, nil
}

// ErrTooLarge is wrapped by the permanent error of a Body (and of a
// download) that exceeds its limit: see Body.Limit and fixity.Expect.Max.
var ErrTooLarge = errors.New("larger than allowed")

// Limit caps the representation at max bytes (max <= 0: no cap), so that a
// hostile server's endless body is cut off. When the announced
// Content-Length already exceeds max, Limit returns the error at once;
// otherwise Read hands out the first max bytes and then returns it (a
// representation of exactly max bytes ends with io.EOF as usual). The error is permanent and
// wraps ErrTooLarge. Call Limit before the first Read.
func (b *Body) Limit(max int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.max = max
	if max > 0 && b.ContentLength > max {
		b.err = b.tooLarge()
		return b.err
	}
	return nil
}

func (b *Body) tooLarge() error {
	return errclass.Permanentf("GET %s: %w: more than %d bytes", b.URL, ErrTooLarge, b.max)
}

// Read reads the next bytes of the representation; see Body for how
// interruptions are handled. It returns io.EOF at the end, ctx.Err() when
// the Open context ends, the error of Limit past the limit, and otherwise
// classified errors naming the URL.
func (b *Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.read(p)
	if b.max > 0 && b.off > b.max {
		// Hand out the bytes up to the limit, none past it; the next Read
		// fails.
		b.err = b.tooLarge()
		if keep := n - int(b.off-b.max); keep > 0 {
			return keep, nil
		}
		return 0, b.err
	}
	return n, err
}

// read is Read with b.mu held.
func (b *Body) read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.closed.Load() {
		return 0, errClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if b.cur == nil {
			if err := b.resume(); err != nil {
				b.err = err
				return 0, err
			}
		}
		n, err := b.readAttempt(p)
		switch {
		case err == nil:
			return n, nil
		case err == io.EOF:
			b.dropAttempt()
			b.err = io.EOF
			if n > 0 {
				return n, nil
			}
			return 0, io.EOF
		case errors.Is(err, errInterrupted):
			b.dropAttempt()
			b.interrupt = err
			b.c.log.Debug("transfer interrupted", "url", b.reqURL, "offset", b.off, "err", err)
			if n > 0 {
				return n, nil
			}
		default:
			b.dropAttempt()
			b.err = err
			return n, err
		}
	}
}

// Close aborts any transfer in progress and releases the connection. It is
// idempotent and may be called concurrently with Read; Read then fails.
func (b *Body) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropAttempt()
	return nil
}

func (b *Body) dropAttempt() {
	if b.cur != nil {
		b.cur.close()
		b.cur = nil
	}
}

// ctxErr returns ctx.Err() of the Open context, errClosed after Close, or
// nil while the Body is live.
func (b *Body) ctxErr() error {
	if err := b.ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return errClosed
	}
	return nil
}

// resume reconnects after an interrupted attempt, within the budgets.
func (b *Body) resume() error {
	if b.interrupt == nil {
		// Cannot happen: cur is only dropped with interrupt or err set.
		return errclass.Fatalf("GET %s: internal error: no attempt to resume", b.reqURL)
	}
	if b.off > b.attemptStart {
		b.budget.Reset()
	} else if !b.budget.Spend() {
		return errclass.Retryablef("giving up after %d attempts without progress: %w", b.budget.Attempts(), b.interrupt)
	}
	if b.resumes+b.restarts >= b.c.maxResumes {
		return errclass.Retryablef("giving up after %d resumes: %w", b.resumes+b.restarts, b.interrupt)
	}
	wait := b.budget.Backoff(nil)
	switch {
	case b.ranges && b.off > 0:
		b.resumes++
		b.c.resumes.Add(1)
	case b.off == 0:
		// Nothing to resume from: the request is sent again, a retry.
		b.c.retried.Add(1)
		b.c.retrying(b.reqURL, b.budget.Attempts(), wait, b.interrupt)
	}
	b.c.log.Info("resuming transfer", "url", b.reqURL, "offset", b.off, "ranged", b.ranges, "wait", wait)
	return b.connect(wait)
}

// connect waits, then sends requests until one yields a usable response,
// retrying retryable failures within the budget.
func (b *Body) connect(wait time.Duration) error {
	if wait > 0 {
		if err := b.budget.Wait(b.bctx, wait); err != nil {
			if cerr := b.ctxErr(); cerr != nil {
				return cerr
			}
			return err
		}
	}
	err := b.budget.Do(b.bctx, b.try)
	if err != nil {
		if cerr := b.ctxErr(); cerr != nil {
			return cerr
		}
	}
	return err
}

// try sends one request for the bytes from b.off on and, when the response
// is usable, makes it the current attempt.
func (b *Body) try() error {
	if err := b.c.wait(b.bctx, b.host); err != nil {
		return err
	}
	actx, cancel := context.WithCancelCause(b.bctx)
	method, body := http.MethodGet, io.Reader(nil)
	if b.form != "" {
		method, body = http.MethodPost, strings.NewReader(b.form)
	}
	req, err := http.NewRequestWithContext(actx, method, b.reqURL, body)
	if err != nil {
		cancel(nil)
		return errclass.Permanentf("%s %s: %w", method, b.reqURL, err)
	}
	b.c.setHeaders(req)
	if b.form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if !b.started {
		if b.ifNoneMatch != "" {
			req.Header.Set("If-None-Match", b.ifNoneMatch)
		}
		if b.ifModifiedSince != "" {
			req.Header.Set("If-Modified-Since", b.ifModifiedSince)
		}
	}
	ranged := b.off > 0 && b.ranges && b.form == ""
	if ranged {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(b.off, 10)+"-")
		if b.validator != "" {
			req.Header.Set("If-Range", b.validator)
		}
	}
	b.attempts++
	b.c.requests.Add(1)
	timer := time.AfterFunc(b.c.opts.Timeout, func() { cancel(errHeaderTimeout) })
	resp, err := b.c.hc.Do(req)
	timer.Stop()
	if err != nil {
		cancel(nil)
		return b.doError(actx, err)
	}
	skip, err := b.accept(resp, ranged)
	if err != nil {
		// Drain a little so the connection can be reused, then drop it;
		// a body that stalls is given up as any other.
		drain := time.AfterFunc(b.c.opts.StallTimeout, func() { cancel(errStalled) })
		drained, _ := io.CopyN(io.Discard, resp.Body, 64<<10)
		b.c.bytes.Add(drained) // received, discarded
		drain.Stop()
		resp.Body.Close()
		cancel(nil)
		return err
	}
	a := &attempt{resp: resp, ctx: actx, cancel: cancel, skip: skip, speed: b.c.newLowSpeed()}
	a.watchdog = time.AfterFunc(time.Hour, func() { cancel(errStalled) })
	a.watchdog.Stop()
	b.cur = a
	b.attemptStart = b.off
	return nil
}

// doError classifies an error from http.Client.Do.
func (b *Body) doError(actx context.Context, err error) error {
	if cerr := b.ctxErr(); cerr != nil {
		return cerr
	}
	// *url.Error names the hop that failed; name the requested URL too,
	// without repeating it.
	where := b.reqURL
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.URL != b.reqURL {
			where += " (at " + ue.URL + ")"
		}
		err = ue.Err
	}
	switch {
	case errors.Is(context.Cause(actx), errHeaderTimeout):
		return errclass.Retryablef("GET %s: no response within %v: %w", where, b.c.opts.Timeout, errHeaderTimeout)
	case isUnreachable(err):
		return errclass.Permanentf("GET %s: %w (%w)", where, ErrUnreachable, err)
	case errclass.Of(err) == errclass.Permanent, isCertError(err):
		return errclass.Permanentf("GET %s: %w", where, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("GET %s: %w", where, err)
	}
	return errclass.Retryablef("GET %s: %w", where, err)
}

// accept checks a response against the transfer so far. It returns how
// many leading bytes to discard, or a classified error.
func (b *Body) accept(resp *http.Response, ranged bool) (int64, error) {
	h := resp.Header
	final := resp.Request.URL.String()
	switch code := resp.StatusCode; {
	case code == http.StatusPartialContent:
		if !ranged {
			return 0, errclass.Permanentf("GET %s: unsolicited 206 Partial Content", final)
		}
		start, total, err := parseContentRange(h.Get("Content-Range"))
		switch {
		case err != nil:
			return 0, b.changed(final, "%v", err)
		case start != b.off:
			return 0, b.changed(final, "asked for bytes from %d, got %q", b.off, h.Get("Content-Range"))
		case total >= 0 && b.total >= 0 && total != b.total:
			return 0, b.changed(final, "length %d became %d", b.total, total)
		case !b.sameValidator(h, true):
			return 0, b.changed(final, "validator %q became %q", b.validatorOf(), validatorIn(h))
		}
		if b.total < 0 {
			b.total = total
		}
		return 0, nil
	case code >= 200 && code <= 299:
		if !b.started {
			b.first(resp)
			return 0, nil
		}
		switch {
		case b.strict && b.off > 0 && b.validator == "":
			return 0, b.changed(final, "sent again without a strong validator (%q) to show it is the same", validatorIn(h))
		case !b.sameValidator(h, false):
			return 0, b.changed(final, "validator %q became %q", b.validatorOf(), validatorIn(h))
		case resp.ContentLength >= 0 && b.total >= 0 && resp.ContentLength != b.total:
			return 0, b.changed(final, "length %d became %d", b.total, resp.ContentLength)
		}
		if b.off > 0 {
			b.restarts++
			b.c.restarts.Add(1)
			b.c.log.Info("server sent the whole representation again, discarding its prefix", "url", final, "skip", b.off)
		}
		return b.off, nil
	case code == http.StatusNotModified && !b.started && (resp.Request.Header.Get("If-None-Match") != "" || resp.Request.Header.Get("If-Modified-Since") != ""):
		// Asked conditionally by this request (a redirect drops the
		// conditions: see checkRedirect).
		return 0, errclass.NewPermanent(fmt.Errorf("GET %s: %w", final, ErrNotModified))
	case code == http.StatusRequestedRangeNotSatisfiable && ranged:
		return 0, b.changed(final, "range from %d not satisfiable", b.off)
	}
	return 0, statusError(resp, time.Now())
}

// first records the metadata of the first response and decides how to
// resume.
func (b *Body) first(resp *http.Response) {
	h := resp.Header
	b.started = true
	b.URL = resp.Request.URL.String()
	b.ContentType = h.Get("Content-Type")
	b.ContentLength = resp.ContentLength
	b.total = resp.ContentLength
	b.ETag = h.Get("ETag")
	b.LastModified = h.Get("Last-Modified")
	b.Header = h.Clone()
	acceptRanges := strings.ToLower(strings.TrimSpace(h.Get("Accept-Ranges")))
	switch {
	case acceptRanges == "none":
	case b.ETag != "" && !strings.HasPrefix(b.ETag, "W/"):
		b.validator, b.ranges = b.ETag, true
	case b.LastModified != "":
		b.validator, b.ranges = b.LastModified, true
	case acceptRanges == "bytes" && !b.strict:
		b.ranges = true
	}
}

// changed returns the retryable ErrChanged error.
func (b *Body) changed(url, format string, a ...any) error {
	return errclass.Retryablef("GET %s: %w: %s", url, ErrChanged, fmt.Sprintf(format, a...))
}

// sameValidator reports whether h carries the validator of the first
// response. A partial response without any validator is trusted when it
// answered an If-Range (the server compared) or when there was none to
// compare.
func (b *Body) sameValidator(h http.Header, partial bool) bool {
	etag, lm := h.Get("ETag"), h.Get("Last-Modified")
	if partial && etag == "" && lm == "" {
		return true
	}
	if b.ETag != "" || etag != "" {
		return etag == b.ETag
	}
	return lm == b.LastModified
}

func (b *Body) validatorOf() string {
	if b.ETag != "" {
		return b.ETag
	}
	return b.LastModified
}

func validatorIn(h http.Header) string {
	if v := h.Get("ETag"); v != "" {
		return v
	}
	return h.Get("Last-Modified")
}

// readAttempt reads from the current attempt into p, discarding a pending
// prefix first. It returns (n, nil), (n, io.EOF) at a verified end, (n, e)
// with e wrapping errInterrupted when the attempt ended early, or (n, e)
// with a terminal error.
func (b *Body) readAttempt(p []byte) (int, error) {
	a := b.cur
	for empty := 0; ; {
		buf := p
		if a.skip > 0 && int64(len(buf)) > a.skip {
			buf = buf[:a.skip]
		}
		a.watchdog.Reset(b.c.opts.StallTimeout)
		began := time.Now()
		n, err := a.resp.Body.Read(buf)
		a.watchdog.Stop()
		if serr := a.speed.add(n, time.Since(began)); serr != nil && err == nil {
			b.c.bytes.Add(int64(n))
			return 0, errclass.Retryablef("GET %s: %w", b.reqURL, serr)
		}
		if n > 0 {
			b.c.bytes.Add(int64(n))
			if terr := b.c.throttle(b.bctx, n); terr != nil {
				return 0, terr
			}
		}
		skipped := false
		if a.skip > 0 {
			a.skip -= int64(n)
			skipped, n = n > 0, 0
		} else if n > 0 {
			if b.total >= 0 && b.off+int64(n) > b.total {
				return 0, errclass.Permanentf("GET %s: body longer than its Content-Length %d", b.URL, b.total)
			}
			b.off += int64(n)
		}
		switch {
		case err == nil && n > 0:
			return n, nil
		case err == nil && skipped:
			empty = 0 // bytes came, and were discarded: progress
			continue
		case err == nil:
			if empty++; empty > maxEmptyReads {
				return 0, b.interrupted(io.ErrNoProgress)
			}
			continue
		case err == io.EOF:
			if a.skip > 0 {
				return n, b.interrupted(fmt.Errorf("restarted body ended %d bytes before the resume offset: %w", a.skip, io.ErrUnexpectedEOF))
			}
			if b.total >= 0 && b.off < b.total {
				return n, b.interrupted(fmt.Errorf("body ended before its length %d: %w", b.total, io.ErrUnexpectedEOF))
			}
			return n, io.EOF
		}
		if cerr := b.ctxErr(); cerr != nil {
			return n, cerr
		}
		if errors.Is(context.Cause(a.ctx), errStalled) {
			err = fmt.Errorf("no body bytes for %v: %w", b.c.opts.StallTimeout, errStalled)
		}
		return n, b.interrupted(err)
	}
}

// interrupted wraps err as a retryable interruption at the current offset.
func (b *Body) interrupted(err error) error {
	return errclass.Retryablef("GET %s: %w at byte %d: %w", b.reqURL, errInterrupted, b.off, err)
}

// parseContentRange parses "bytes first-last/complete" (complete may be
// "*", returned as -1).
func parseContentRange(v string) (start, total int64, err error) {
	bad := func() (int64, int64, error) {
		return 0, 0, fmt.Errorf("malformed Content-Range %q", v)
	}
	unit, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(unit, "bytes") {
		return bad()
	}
	rng, complete, ok := strings.Cut(strings.TrimSpace(rest), "/")
	if !ok {
		return bad()
	}
	first, last, ok := strings.Cut(rng, "-")
	if !ok {
		return bad()
	}
	f, err1 := strconv.ParseInt(first, 10, 64)
	l, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || f < 0 || l < f {
		return bad()
	}
	total = -1
	if complete != "*" {
		t, err := strconv.ParseInt(complete, 10, 64)
		if err != nil || t <= l {
			return bad()
		}
		total = t
	}
	return f, total, nil
}
