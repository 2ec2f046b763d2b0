package fetch

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// downloadBuffer is the copy buffer size of Download.
const downloadBuffer = 256 << 10

// Result reports what Download did.
type Result struct {
	// Bytes is the number of bytes dst holds: on success the length of
	// the representation.
	Bytes int64
	// Hashes are the digests of those bytes computed in the copy pass:
	// the ones want asks for plus those selected by Options.Compute.
	Hashes fixity.Hashes
	// Attempts counts the requests sent (redirect hops not counted),
	// across restarts.
	Attempts int
	// Resumes counts interrupted transfers continued with a Range request.
	Resumes int
	// Restarts counts transfers begun again from byte 0: after ErrChanged
	// (dst truncated), or when a server answered a resume with the whole
	// representation (its prefix discarded, dst untouched).
	Restarts int
	// ContentType, ContentEncoding, ETag and LastModified are those of the
	// response finally used.
	ContentType, ContentEncoding, ETag, LastModified string
}

// Validators are what a destination keeps of a representation it holds to
// ask, next time, whether it changed: its ETag and Last-Modified date
// (either may be empty).
type Validators struct {
	ETag, LastModified string
}

// IsZero reports whether neither validator is known.
func (v Validators) IsZero() bool { return v.ETag == "" && v.LastModified == "" }

// Download streams url into dst, which must be open for reading and
// writing (and seeking; parts are read back to hash them): dst is
// truncated and written from offset 0, so on success it holds exactly the
// representation. Without a digest in want to catch a splice, an
// interrupted transfer is continued only from a response that a strong
// validator (an ETag not weak, or a Last-Modified date) shows to be the
// same representation; otherwise it starts over. The digests want expects (and those in
// Options.Compute) are computed in the same pass. When the representation
// changes mid-transfer (ErrChanged), dst is truncated and the download
// starts over, at most Retries times; after that the retryable ErrChanged
// error is returned.
//
// At the end the length and hashes are checked against want: a mismatch
// starts the download over once (unless Options.Retries is 0: bytes damaged
// in transit look the same), and a second one is a permanent error wrapping
// fixity.ErrMismatch. A Content-Length that
// contradicts want.Length fails before the body is read, and a body that
// grows past want.Length fails as soon as it does. When want.Length is
// unknown, a Content-Length or body beyond want.Max (when set) fails the same
// way, permanently, wrapping ErrTooLarge (see Body.Limit). Failing to write dst is a
// fatal error. Other errors are those of Open and Body.Read. Download does
// not close or sync dst. The Result describes the work done even on error.
//
// With Options.RangeParts > 1, a representation that a "Range: bytes=0-0"
// probe shows to be at least 2*Options.RangePartMin bytes long, served with
// Range and a strong validator, is fetched as RangeParts contiguous parts
// concurrently (see downloadParts); the digests are then computed by
// reading dst back, and checked as above. When a part finds the
// representation changed, or not served by Range after all, the download
// starts over in one stream (a restart).
func (c *Client) Download(ctx context.Context, url string, dst *os.File, want fixity.Expect) (Result, error) {
	return c.download(ctx, url, dst, fileDest{dst}, want, nil, Validators{})
}

// DownloadIfChanged is Download made conditional on the validators of a
// copy the caller holds (If-None-Match, If-Modified-Since): when the server
// answers 304 Not Modified, it returns an error wrapping ErrNotModified and
// dst is left empty. With zero validators it is Download. A conditional
// download is made in one stream, never in Range parts.
func (c *Client) DownloadIfChanged(ctx context.Context, url string, dst *os.File, want fixity.Expect, held Validators) (Result, error) {
	return c.download(ctx, url, dst, fileDest{dst}, want, nil, held)
}

// download is Download into dst, telling progress (when not nil) how far
// dst is written (see DownloadProgress), conditional on held (see
// DownloadIfChanged). file is dst's file, which Range parts write at their
// offsets; nil (a stream, see DownloadTo) downloads in one stream.
func (c *Client) download(ctx context.Context, url string, file *os.File, dst Destination, want fixity.Expect, progress Progress, held Validators) (Result, error) {
	var res Result
	buf := make([]byte, downloadBuffer)
	changes, mismatches := 0, 0
	parts := c.InParts() && held.IsZero() && file != nil
	for {
		var err error
		if parts {
			err = c.downloadParts(ctx, url, file, want, buf, &res, progress)
			switch {
			case errors.Is(err, errOneStream):
				parts = false
				continue
			case errors.Is(err, ErrChanged), errors.Is(err, ErrNoRange):
				// The parts may be of different versions: start over in
				// one stream, as without RangeParts.
				parts = false
				c.log.Info("parallel range download failed; downloading again in one stream", "url", url, "err", err)
				if cerr := ctx.Err(); cerr != nil {
					return res, cerr
				}
				res.Restarts++
				c.restarts.Add(1)
				continue
			}
		} else {
			err = c.downloadOnce(ctx, url, dst, want, buf, &res, progress, held)
		}
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, ErrChanged) && changes < c.retries:
			changes++
			c.log.Info("representation changed, downloading again", "url", url, "err", err)
		case errors.Is(err, fixity.ErrMismatch) && mismatches < mismatchRetries && c.retries > 0:
			// A byte flipped in transit or a proxy's wrong length looks
			// exactly like a bad package: only a second mismatch is taken
			// for the package's own.
			mismatches++
			c.log.Warn("download does not match its expected length or hashes; downloading it again", "url", url, "err", err)
		default:
			return res, err
		}
		if cerr := ctx.Err(); cerr != nil {
			return res, cerr
		}
		res.Restarts++
		c.restarts.Add(1)
	}
}

// mismatchRetries is how often a download whose length or hashes do not
// match is started over before the mismatch is reported.
const mismatchRetries = 1

// downloadOnce makes one pass of Download from byte 0.
func (c *Client) downloadOnce(ctx context.Context, url string, dst Destination, want fixity.Expect, buf []byte, res *Result, progress Progress, held Validators) error {
	if progress != nil {
		progress(0) // before the file empties: a reader behind it knows first
	}
	if err := dst.Restart(); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr // a stream's reader gave up with ctx
		}
		return errclass.Fatalf("download %s: %w", url, err)
	}
	b, err := c.newBody(ctx, url)
	if err != nil {
		return err
	}
	b.ifNoneMatch, b.ifModifiedSince = held.ETag, held.LastModified
	// Without a digest to catch a splice, an interrupted transfer is not
	// continued from a response that no strong validator shows to be the
	// same representation: it starts over (ErrChanged).
	b.strict = want.Hashes.IsZero()
	v := fixity.NewVerifier(want, c.opts.Compute)
	defer func() {
		b.Close()
		res.Bytes, res.Hashes = v.N(), v.Sum()
		res.Attempts += b.attempts
		res.Resumes += b.resumes
		res.Restarts += b.restarts
	}()
	if err := b.connect(0); err != nil {
		return err
	}
	res.ContentType, res.ETag, res.LastModified = b.ContentType, b.ETag, b.LastModified
	res.ContentEncoding = b.Header.Get("Content-Encoding")
	if want.Length >= 0 && b.ContentLength >= 0 && b.ContentLength != want.Length {
		return errclass.Permanentf("download %s: %w: Content-Length %d, expected %d", b.URL, fixity.ErrMismatch, b.ContentLength, want.Length)
	}
	if want.Length < 0 {
		if err := b.Limit(want.Max); err != nil {
			return err
		}
	}
	for {
		n, rerr := b.Read(buf)
		if n > 0 {
			if want.Length >= 0 && v.N()+int64(n) > want.Length {
				return errclass.Permanentf("download %s: %w: more than the expected %d bytes", b.URL, fixity.ErrMismatch, want.Length)
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return cerr // a stream's reader gave up with ctx
				}
				return errclass.Fatalf("download %s: %w", url, err)
			}
			v.Write(buf[:n])
			if progress != nil {
				progress(v.N())
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := v.Check(); err != nil {
		return errclass.Permanentf("download %s: %w", b.URL, err)
	}
	return nil
}
