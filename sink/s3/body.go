package s3

import (
	"context"
	"io"

	"github.com/rsharvest/rsharvest/errclass"
)

// maxEmptyReads bounds the consecutive Reads of a body that return neither
// data nor an error.
const maxEmptyReads = 100

// bodyReader passes a Put's body on to the upload, holding back its last
// byte until the body has ended with io.EOF, its length matched the
// expected one, and ctx was still live. An upload therefore cannot send its
// last byte, and so cannot complete, before the body is known to be whole:
// a single PUT whose body then fails goes out short and is rejected, and a
// multipart upload is aborted. The first error is kept in err and returned
// by every later Read; no data is returned with it.
type bodyReader struct {
	ctx   context.Context
	r     io.Reader
	want  int64 // expected length, or -1 when unknown
	n     int64 // bytes read from r
	ended bool  // r returned io.EOF and every check passed
	err   error // the first error

	held    byte // the byte held back, when hasHeld
	hasHeld bool
	spare   [1]byte // reads into when p has room for the held byte only
}

func newBodyReader(ctx context.Context, r io.Reader, length int64) *bodyReader {
	return &bodyReader{ctx: ctx, r: r, want: length}
}

// Read implements io.Reader.
func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.ended {
		if !b.hasHeld {
			return 0, io.EOF
		}
		p[0], b.hasHeld = b.held, false
		return 1, nil
	}
	for range maxEmptyReads {
		if err := b.ctx.Err(); err != nil {
			return 0, b.fail(err)
		}
		// Read after the held byte, which goes out first.
		start := 0
		if b.hasHeld {
			start = 1
		}
		if start == len(p) {
			n, err := b.r.Read(b.spare[:])
			if err := b.account(n, err); err != nil {
				return 0, b.fail(err)
			}
			if n == 0 && !b.ended {
				continue
			}
			p[0] = b.held
			if n == 1 {
				b.held = b.spare[0]
			} else {
				b.hasHeld = false
			}
			return 1, nil
		}
		n, err := b.r.Read(p[start:])
		if err := b.account(n, err); err != nil {
			return 0, b.fail(err)
		}
		if b.hasHeld {
			p[0] = b.held
		}
		total := start + n
		if b.ended {
			b.hasHeld = false
			if total == 0 {
				return 0, io.EOF
			}
			return total, nil
		}
		if n == 0 {
			continue
		}
		// Hold back the last byte read.
		b.held, b.hasHeld = p[total-1], true
		if total > 1 {
			return total - 1, nil
		}
	}
	return 0, b.fail(io.ErrNoProgress)
}

// account counts n more bytes read from the body, with err the error of
// that Read, and returns the error that ends the upload, if any.
func (b *bodyReader) account(n int, err error) error {
	b.n += int64(n)
	if b.want >= 0 && b.n > b.want {
		return errclass.Permanentf("body is longer than its length %d", b.want)
	}
	switch {
	case err == nil:
		return nil
	case err != io.EOF:
		return err
	case b.want >= 0 && b.n < b.want:
		return errclass.Permanentf("body is %d bytes, shorter than its length %d", b.n, b.want)
	}
	if err := b.ctx.Err(); err != nil {
		return err
	}
	b.ended = true
	return nil
}

func (b *bodyReader) fail(err error) error {
	b.err = err
	b.hasHeld = false
	return err
}

// drain reads the body to its end, discarding it, and returns the error
// that stopped it, if any. It is used for empty bodies, which the upload
// does not read.
func (b *bodyReader) drain() error {
	_, err := io.Copy(io.Discard, b)
	return err
}
