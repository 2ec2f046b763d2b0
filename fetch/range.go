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

// ErrNoRange is wrapped (in a retryable error) when a server answers a
// Range request made by a RangeReader with the whole representation (200)
// although the representation did not change: the server does not honour
// Range for it.
var ErrNoRange = errors.New("server does not honour Range")

// Read-ahead of a RangeReader.
const (
	// RangeBlock is the least number of bytes a RangeReader requests: a
	// smaller read is extended to RangeBlock bytes (within the
	// representation) and the rest is kept for the next reads.
	RangeBlock = 64 << 10
	// rangeMaxBlock caps the read-ahead, which doubles while reads are
	// sequential.
	rangeMaxBlock = 1 << 20
	// rangeSpans is the number of fetched spans a RangeReader keeps.
	rangeSpans = 16
)

// RangeReader is an io.ReaderAt over a remote representation, read with
// HTTP Range requests ("Range: bytes=a-b", with "If-Range" when a validator
// is known). It is made by Client.ReaderAt.
//
// Every response must be a 206 for exactly the bytes asked, of a
// representation of the announced size and, when a validator was given,
// carrying it (a strong ETag, or a Last-Modified date): a changed validator,
// length or Content-Range fails the read with a retryable error wrapping
// ErrChanged, and a 200 for an unchanged representation with one wrapping
// ErrNoRange. Bytes of different versions are never spliced. Temporary
// failures are retried as for Open (rate limit, backoff, Retry-After).
//
// A read smaller than RangeBlock is extended to RangeBlock bytes, and the
// extension doubles (up to 1 MiB) while reads continue where the previous
// span ended; the last 16 spans are kept, so that the many small reads of a
// ZIP reader (central directory, local headers) cost few requests.
//
// ReadAt is safe for concurrent use. The context given to Client.ReaderAt
// governs every request: once it ends, ReadAt returns ctx.Err().
type RangeReader struct {
	c         *Client
	ctx       context.Context
	url       string
	host      string
	size      int64
	validator string

	bytes atomic.Int64 // body bytes received

	mu    sync.Mutex
	spans []*span // most recently used last
	err   error   // first failure of a fetch, for Err
}

var _ io.ReaderAt = (*RangeReader)(nil)

// span is a fetched (or being fetched) run of bytes.
type span struct {
	off  int64
	n    int64         // bytes asked for
	done chan struct{} // closed when data or err is set
	data []byte
	err  error
}

// ReaderAt returns a RangeReader over rawURL, a representation of size
// bytes, guarded by validator (a strong ETag or a Last-Modified date, as
// Probe returns; "" for none, in which case only the length and
// Content-Range are checked). Nothing is sent until the first ReadAt.
func (c *Client) ReaderAt(ctx context.Context, rawURL string, size int64, validator string) *RangeReader {
	host := ""
	if u, err := url.Parse(rawURL); err == nil {
		host = u.Host
	}
	return &RangeReader{c: c, ctx: ctx, url: rawURL, host: host, size: size, validator: validator}
}

// Size is the size of the representation given to Client.ReaderAt.
func (r *RangeReader) Size() int64 { return r.size }

// Bytes returns the number of body bytes r has received so far (they are
// counted in the client's Stats too).
func (r *RangeReader) Bytes() int64 { return r.bytes.Load() }

// Err returns the first error a request of r failed with, or nil.
func (r *RangeReader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// ReadAt reads len(p) bytes from offset off. It returns io.EOF when the
// read reaches the end of the representation with fewer bytes than asked.
func (r *RangeReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errclass.Permanentf("range read of %s: negative offset %d", r.url, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := int64(len(p))
	short := false
	if want > r.size-off {
		want = r.size - off
		short = true
	}
	n := int64(0)
	for n < want {
		s, err := r.get(off+n, want-n)
		if err != nil {
			return int(n), err
		}
		k := copy(p[n:want], s.data[off+n-s.off:])
		n += int64(k)
	}
	if short {
		return int(n), io.EOF
	}
	return int(n), nil
}

// get returns a fetched span holding byte off (and as many of the n bytes
// from off as one span may hold), fetching it when no kept span does.
func (r *RangeReader) get(off, n int64) (*span, error) {
	r.mu.Lock()
	var s *span
	for i := len(r.spans) - 1; i >= 0; i-- {
		if c := r.spans[i]; off >= c.off && off < c.off+c.n {
			s = c
			r.spans = append(append(r.spans[:i:i], r.spans[i+1:]...), c)
			break
		}
	}
	if s == nil {
		size := int64(RangeBlock)
		for _, c := range r.spans {
			if c.off+c.n == off {
				size = max(size, min(2*c.n, rangeMaxBlock))
			}
		}
		size = min(max(size, n), r.size-off)
		s = &span{off: off, n: size, done: make(chan struct{})}
		if len(r.spans) >= rangeSpans {
			r.spans = append(r.spans[:0:0], r.spans[1:]...)
		}
		r.spans = append(r.spans, s)
		r.mu.Unlock()
		s.data, s.err = r.fetch(off, size)
		close(s.done)
		if s.err != nil {
			r.mu.Lock()
			for i, c := range r.spans {
				if c == s {
					r.spans = append(r.spans[:i:i], r.spans[i+1:]...)
					break
				}
			}
			if r.err == nil && r.ctx.Err() == nil {
				r.err = s.err
			}
			r.mu.Unlock()
		}
		return s, s.err
	}
	r.mu.Unlock()
	select {
	case <-s.done:
	case <-r.ctx.Done():
		return nil, r.ctx.Err()
	}
	return s, s.err
}

// fetch requests bytes [off, off+n) with retries.
func (r *RangeReader) fetch(off, n int64) ([]byte, error) {
	var data []byte
	err := retry.Do(r.ctx, r.c.policy(r.url), func() (err error) {
		data, err = r.fetchOnce(off, n)
		if errors.Is(err, ErrTooSlow) {
			return retry.Stop(err) // too slow is not asked again (Options.LowSpeedLimit)
		}
		return err
	})
	if cerr := r.ctx.Err(); cerr != nil {
		return nil, cerr
	}
	return data, err
}

// fetchOnce sends one Range request for [off, off+n) and reads its body.
func (r *RangeReader) fetchOnce(off, n int64) ([]byte, error) {
	if err := r.c.wait(r.ctx, r.host); err != nil {
		return nil, err
	}
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10)
	resp, actx, cancel, err := r.c.send(r.ctx, r.url, func(h http.Header) {
		h.Set("Range", rng)
		if r.validator != "" {
			h.Set("If-Range", r.validator)
		}
	})
	if err != nil {
		return nil, err
	}
	defer cancel(nil)
	defer resp.Body.Close()
	final := resp.Request.URL.String()
	if err := checkRanged(resp, final, rng, off, n, r.size, r.validator); err != nil {
		return nil, err
	}
	data := make([]byte, n)
	got, err := r.c.readFull(actx, cancel, resp.Body, data)
	r.bytes.Add(int64(got))
	if err != nil {
		if cerr := r.ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, errclass.Retryablef("GET %s (%s): %w after %d bytes", final, rng, err, got)
	}
	// Anything beyond the asked range means the server did not do as told
	// (a body of n bytes by its Content-Length has nothing more; one
	// whose end does not come within the stall timeout has the bytes
	// asked, and no more).
	if resp.ContentLength != n {
		var extra [1]byte
		stall := time.AfterFunc(r.c.opts.StallTimeout, func() { cancel(errStalled) })
		k, _ := resp.Body.Read(extra[:])
		stall.Stop()
		if k > 0 {
			return nil, errclass.Retryablef("GET %s (%s): %w: body longer than the %d bytes asked", final, rng, ErrChanged, n)
		}
	}
	return data, nil
}

// checkRanged checks the answer to "Range: rng" (n bytes from off) with
// If-Range: validator (none when "") of a representation of size bytes: a
// 206 for exactly that span of the same representation. A 200 of the same
// representation fails with a retryable ErrNoRange; any sign that the
// representation changed, with a retryable ErrChanged; another status, as
// statusError says.
func checkRanged(resp *http.Response, final, rng string, off, n, size int64, validator string) error {
	changed := func(format string, a ...any) error {
		return errclass.Retryablef("GET %s (%s): %w: %s", final, rng, ErrChanged, fmt.Sprintf(format, a...))
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		if v := strongValidator(resp.Header); validator != "" && v != validator {
			return changed("validator %q became %q", validator, v)
		}
		if resp.ContentLength >= 0 && resp.ContentLength != size {
			return changed("length %d became %d", size, resp.ContentLength)
		}
		return errclass.Retryablef("GET %s (%s): %w: answered 200", final, rng, ErrNoRange)
	case http.StatusRequestedRangeNotSatisfiable:
		return changed("range not satisfiable")
	default:
		return statusError(resp, time.Now())
	}
	start, total, err := parseContentRange(resp.Header.Get("Content-Range"))
	switch {
	case err != nil:
		return changed("%v", err)
	case start != off:
		return changed("asked for %s, got %q", rng, resp.Header.Get("Content-Range"))
	case total >= 0 && total != size:
		return changed("length %d became %d", size, total)
	case validator != "" && !hasValidator(resp.Header, validator):
		return changed("validator %q became %q", validator, validatorIn(resp.Header))
	case resp.ContentLength >= 0 && resp.ContentLength != n:
		return changed("asked for %d bytes, got %d", n, resp.ContentLength)
	}
	return nil
}

// hasValidator reports whether a partial response carries validator: as
// its ETag when validator is an entity tag, as its Last-Modified otherwise.
// A response without either is trusted, as it answered the If-Range.
func hasValidator(h http.Header, validator string) bool {
	etag, lm := h.Get("ETag"), h.Get("Last-Modified")
	if etag == "" && lm == "" {
		return true
	}
	if strings.HasPrefix(validator, `"`) || strings.HasPrefix(validator, "W/") {
		return etag == validator
	}
	return lm == validator
}

// strongValidator returns the strong ETag of h, else its Last-Modified
// date, else "".
func strongValidator(h http.Header) string {
	if etag := h.Get("ETag"); etag != "" && !strings.HasPrefix(etag, "W/") {
		return etag
	}
	return h.Get("Last-Modified")
}

// send sends one GET of rawURL with the client's headers, changed by set,
// bounding the wait for the response headers by Options.Timeout. It returns
// the response with the attempt's context and its cancel function, which
// the caller must call once done with the body; errors are classified.
func (c *Client) send(ctx context.Context, rawURL string, set func(http.Header)) (*http.Response, context.Context, context.CancelCauseFunc, error) {
	actx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(actx, http.MethodGet, rawURL, nil)
	if err != nil {
		cancel(nil)
		return nil, nil, nil, errclass.Permanentf("GET %s: %w", rawURL, err)
	}
	c.setHeaders(req)
	if set != nil {
		set(req.Header)
	}
	c.requests.Add(1)
	timer := time.AfterFunc(c.opts.Timeout, func() { cancel(errHeaderTimeout) })
	resp, err := c.hc.Do(req)
	timer.Stop()
	if err != nil {
		cause := context.Cause(actx)
		cancel(nil)
		if cerr := ctx.Err(); cerr != nil {
			return nil, nil, nil, cerr
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		switch {
		case errors.Is(cause, errHeaderTimeout):
			return nil, nil, nil, errclass.Retryablef("GET %s: no response within %v: %w", rawURL, c.opts.Timeout, errHeaderTimeout)
		case isUnreachable(err):
			return nil, nil, nil, errclass.Permanentf("GET %s: %w (%w)", rawURL, ErrUnreachable, err)
		case errclass.Of(err) == errclass.Permanent, isCertError(err):
			return nil, nil, nil, errclass.Permanentf("GET %s: %w", rawURL, err)
		}
		return nil, nil, nil, errclass.Retryablef("GET %s: %w", rawURL, err)
	}
	return resp, actx, cancel, nil
}

// readFull fills p from body, counting the bytes in the client's stats,
// and cancels the attempt (cancel) when a Read receives nothing for
// Options.StallTimeout (its waits for the bandwidth limit not counted).
// Once p is full it returns nil, whatever the last read's speed.
func (c *Client) readFull(actx context.Context, cancel context.CancelCauseFunc, body io.Reader, p []byte) (int, error) {
	watchdog := time.AfterFunc(c.opts.StallTimeout, func() { cancel(errStalled) })
	defer watchdog.Stop()
	speed := c.newLowSpeed()
	n := 0
	for n < len(p) {
		watchdog.Reset(c.opts.StallTimeout)
		began := time.Now()
		k, err := body.Read(p[n:])
		watchdog.Stop() // the client's own wait for its bandwidth is no stall
		n += k
		c.bytes.Add(int64(k))
		// A read too slow, or a wait cut short, does not undo the bytes
		// that filled p.
		if serr := speed.add(k, time.Since(began)); serr != nil && err == nil && n < len(p) {
			return n, serr
		}
		if terr := c.throttle(actx, k); terr != nil && n < len(p) {
			return n, terr
		}
		if n == len(p) {
			break
		}
		if err != nil {
			if errors.Is(context.Cause(actx), errStalled) {
				err = fmt.Errorf("no body bytes for %v: %w", c.opts.StallTimeout, errStalled)
			} else if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// Probe asks whether rawURL can be read by Range, with "Range: bytes=0-0".
// It returns the representation's size (-1 when unknown), its validator
// (the strong ETag, else the Last-Modified date, else "") and whether the
// server honoured the Range (a 206 with a Content-Range giving the size).
// Temporary failures are retried as for Open; an unusable status is a
// *StatusError, classified as for Open.
func (c *Client) Probe(ctx context.Context, rawURL string) (size int64, validator string, ranges bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return -1, "", false, errclass.Permanentf("GET %q: not an absolute http(s) URL", rawURL)
	}
	err = retry.Do(ctx, c.policy(rawURL), func() (err error) {
		size, validator, ranges, err = c.probeOnce(ctx, rawURL, u.Host)
		return err
	})
	if cerr := ctx.Err(); cerr != nil {
		return -1, "", false, cerr
	}
	if err != nil {
		return -1, "", false, err
	}
	return size, validator, ranges, nil
}

func (c *Client) probeOnce(ctx context.Context, rawURL, host string) (int64, string, bool, error) {
	if err := c.wait(ctx, host); err != nil {
		return -1, "", false, err
	}
	resp, _, cancel, err := c.send(ctx, rawURL, func(h http.Header) { h.Set("Range", "bytes=0-0") })
	if err != nil {
		return -1, "", false, err
	}
	// The body is not wanted (one byte, or the whole representation when
	// the Range was ignored): drop the connection rather than read it.
	defer cancel(nil)
	defer resp.Body.Close()
	h := resp.Header
	validator := strongValidator(h)
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, total, err := parseContentRange(h.Get("Content-Range"))
		if err != nil || start != 0 || total < 0 {
			return -1, validator, false, nil
		}
		return total, validator, true, nil
	case http.StatusOK:
		return resp.ContentLength, validator, false, nil
	}
	return -1, "", false, statusError(resp, time.Now())
}
