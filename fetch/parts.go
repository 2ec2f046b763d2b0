package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/internal/retry"
)

// errOneStream is returned by downloadParts when the representation is not
// to be fetched in parts (too small, no Range, no validator, or the probe
// failed); nothing has been written then.
var errOneStream = errors.New("download in one stream")

// part is one contiguous run [start, end) of a download in parts.
type part struct {
	start, end int64
	// off is the next byte to write: bytes [start, off) are in dst.
	off atomic.Int64
	// Touched only by the part's goroutine; read after it ends.
	attempts, resumes                                int
	contentType, etag, lastModified, contentEncoding string
}

// partProgress reports the contiguous prefix of dst written by the parts.
type partProgress struct {
	mu    sync.Mutex
	parts []*part
	last  int64
	fn    Progress
}

// update tells fn the new prefix when it grew. Calls are serialized.
func (pp *partProgress) update() {
	if pp.fn == nil {
		return
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var n int64
	for _, p := range pp.parts {
		if n = p.off.Load(); n < p.end {
			break
		}
	}
	if n > pp.last {
		pp.last = n
		pp.fn(n)
	}
}

// prefix returns the last prefix reported.
func (pp *partProgress) prefix() int64 {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.last
}

// downloadParts makes one pass of Download in Options.RangeParts parts. It
// returns errOneStream when the representation is not suitable, an error
// wrapping ErrChanged or ErrNoRange when a part found it changed or not
// served by Range (the caller starts over in one stream), the probe's own
// error when the server asked to be left alone (429, 503, a Retry-After;
// its retries spent), and otherwise
// what downloadOnce would: nil once dst holds the verified representation.
func (c *Client) downloadParts(ctx context.Context, rawURL string, dst *os.File, want fixity.Expect, buf []byte, res *Result, progress Progress) error {
	size, validator, ranges, err := c.Probe(ctx, rawURL)
	res.Attempts++
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var se *StatusError
		if errors.As(err, &se) && (se.StatusCode == http.StatusTooManyRequests || se.StatusCode == http.StatusServiceUnavailable || se.RetryAfter > 0) {
			// The server asks to be left alone for now (its retries
			// spent, or a long Retry-After): one stream would be asked
			// the same, with its own retries on top.
			return err
		}
		// Another failure may be the Range request's own (a server whose
		// Range handling breaks): one stream may well succeed.
		c.log.Debug("range probe failed; downloading in one stream", "url", rawURL, "err", err)
		return errOneStream
	}
	if !ranges || validator == "" || size < 2*c.opts.RangePartMin {
		return errOneStream
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return errOneStream // cannot happen: Probe parsed it
	}
	if want.Length >= 0 && size != want.Length {
		return errclass.Permanentf("download %s: %w: length %d, expected %d", rawURL, fixity.ErrMismatch, size, want.Length)
	}
	if want.Length < 0 && want.Max > 0 && size > want.Max {
		return errclass.Permanentf("download %s: %w: more than %d bytes", rawURL, ErrTooLarge, want.Max)
	}
	if progress != nil {
		progress(0) // before the file empties: a reader behind it knows first
	}
	if err := dst.Truncate(0); err != nil {
		return errclass.Fatalf("download %s: truncate %s: %w", rawURL, dst.Name(), err)
	}
	n := int64(c.opts.RangeParts)
	per := (size + n - 1) / n
	var parts []*part
	for off := int64(0); off < size; off += per {
		p := &part{start: off, end: min(off+per, size)}
		p.off.Store(off)
		parts = append(parts, p)
	}
	pp := &partProgress{parts: parts, fn: progress}
	g, gctx := errgroup.WithContext(ctx)
	for i, p := range parts {
		pbuf := buf
		if i > 0 {
			pbuf = make([]byte, len(buf))
		}
		g.Go(func() error {
			return c.fetchPart(gctx, rawURL, u.Host, dst, size, validator, p, pbuf, pp)
		})
	}
	err = g.Wait()
	for _, p := range parts {
		res.Attempts += p.attempts
		res.Resumes += p.resumes
	}
	if err != nil {
		res.Bytes, res.Hashes = pp.prefix(), fixity.Hashes{}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return err
	}
	res.ContentType, res.ETag = parts[0].contentType, parts[0].etag
	res.LastModified, res.ContentEncoding = parts[0].lastModified, parts[0].contentEncoding
	// The digests, from the bytes just written (still in the page cache).
	v := fixity.NewVerifier(want, c.opts.Compute)
	_, err = io.CopyBuffer(v, io.NewSectionReader(dst, 0, size), buf)
	res.Bytes, res.Hashes = v.N(), v.Sum()
	if err != nil {
		return errclass.Fatalf("download %s: read back %s: %w", rawURL, dst.Name(), err)
	}
	if err := v.Check(); err != nil {
		return errclass.Permanentf("download %s: %w", rawURL, err)
	}
	return nil
}

// fetchPart writes part p of the representation (size bytes, guarded by
// validator) into dst, resuming from where it got to after an interruption,
// within the client's budgets. It returns nil once the part is written.
func (c *Client) fetchPart(ctx context.Context, rawURL, host string, dst *os.File, size int64, validator string, p *part, buf []byte, pp *partProgress) error {
	pol := c.policy(rawURL)
	notify := pol.Notify
	pol.Notify = func(r retry.Retry) {
		if r.Progressed {
			c.log.Debug("resuming part", "url", rawURL, "offset", p.off.Load(), "end", p.end, "wait", r.Wait, "err", r.Err)
			return
		}
		notify(r)
	}
	budget := pol.Start()
	err := budget.Do(ctx, func() error {
		from := p.off.Load()
		if from >= p.end {
			return nil // written whole: never asked for again
		}
		err := c.partOnce(ctx, rawURL, host, dst, size, validator, p, buf, pp)
		if errors.Is(err, ErrTooSlow) {
			return retry.Stop(err) // too slow is not resumed (Options.LowSpeedLimit)
		}
		if err == nil || p.off.Load() == from || !pol.Retryable(err) {
			return err
		}
		// Progress: the count of retries starts again, and the resume is
		// counted against its own budget.
		budget.Progress()
		if p.resumes >= c.maxResumes {
			return retry.Stop(errclass.Retryablef("giving up after %d resumes: %w", p.resumes, err))
		}
		p.resumes++
		c.resumes.Add(1)
		return err
	})
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// partOnce sends one Range request for the rest of part p and writes what
// arrives into dst at its offset, advancing p.off and reporting progress.
func (c *Client) partOnce(ctx context.Context, rawURL, host string, dst *os.File, size int64, validator string, p *part, buf []byte, pp *partProgress) error {
	if err := c.wait(ctx, host); err != nil {
		return err
	}
	off := p.off.Load()
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(p.end-1, 10)
	p.attempts++
	resp, actx, cancel, err := c.send(ctx, rawURL, func(h http.Header) {
		h.Set("Range", rng)
		h.Set("If-Range", validator)
	})
	if err != nil {
		return err
	}
	defer cancel(nil)
	defer resp.Body.Close()
	final := resp.Request.URL.String()
	if err := checkRanged(resp, final, rng, off, p.end-off, size, validator); err != nil {
		return err
	}
	p.contentType, p.etag = resp.Header.Get("Content-Type"), resp.Header.Get("ETag")
	p.lastModified, p.contentEncoding = resp.Header.Get("Last-Modified"), resp.Header.Get("Content-Encoding")
	for off < p.end {
		got, rerr := c.readFull(actx, cancel, resp.Body, buf[:min(int64(len(buf)), p.end-off)])
		if got > 0 {
			if _, err := dst.WriteAt(buf[:got], off); err != nil {
				return errclass.Fatalf("download %s: write %s: %w", rawURL, dst.Name(), err)
			}
			off += int64(got)
			p.off.Store(off)
			pp.update()
		}
		if rerr != nil && off < p.end {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			return errclass.Retryablef("GET %s (%s): %w at byte %d", final, rng, rerr, off)
		}
	}
	return nil
}
