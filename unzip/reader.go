package unzip

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"
	"github.com/rsharvest/rsharvest/errclass"
)

// sourceReaderAt wraps the caller's ReaderAt so that its own errors (I/O
// failures, possibly retryable) can be told apart from what the ZIP code
// makes of the bytes. It also keeps reads within [0, size), whatever offsets
// a hostile archive leads to: a negative offset is a format error, and past
// the end it answers io.EOF itself, as the ZIP code expects, without asking
// the caller's ReaderAt. io.EOF passes through unchanged. While an archive's
// size is not known yet (LocalOpener), size is math.MaxInt64 and only the
// errors are marked.
type sourceReaderAt struct {
	ra   io.ReaderAt
	size int64
}

// errOffset reports an offset before the start of the archive.
var errOffset = errors.New("unzip: offset before the start of the archive")

func (s *sourceReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errOffset
	}
	if off >= s.size {
		return 0, io.EOF
	}
	short := false
	if int64(len(p)) > s.size-off {
		p = p[:s.size-off]
		short = true
	}
	n, err := s.ra.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, &sourceError{err: err}
	}
	if short && n == len(p) {
		err = io.EOF
	}
	return n, err
}

// errReadAfterClose is the error of a read from a closed entry reader.
var errReadAfterClose = errors.New("unzip: read after close")

// sourceError marks an error returned by the caller's ReaderAt.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// inflaterBufSize is the read-ahead on compressed data. Large enough to keep
// ReadAt calls few; the ratio check subtracts what is buffered.
const inflaterBufSize = 32 << 10

// inflater is a reusable DEFLATE decoder with its input buffer.
type inflater struct {
	br *bufio.Reader
	fr io.ReadCloser // implements flate.Resetter
}

// inflaterPool keeps inflaters for reuse. The zero value is ready for use;
// it is safe for concurrent use.
type inflaterPool struct {
	pool sync.Pool // of *inflater
	bufs bufPool   // entries' bytes for the fast inflater
	//lint:ignore U1000 used in the libdeflate build.
	fast decompressors // the fast inflater's state
}

// get returns an inflater reading the compressed bytes of src.
func (p *inflaterPool) get(src io.Reader) *inflater {
	if in, ok := p.pool.Get().(*inflater); ok {
		in.br.Reset(src)
		if err := in.fr.(flate.Resetter).Reset(in.br, nil); err == nil {
			return in
		}
	}
	br := bufio.NewReaderSize(src, inflaterBufSize)
	return &inflater{br: br, fr: flate.NewReader(br)}
}

// put gives in back for reuse.
func (p *inflaterPool) put(in *inflater) {
	in.br.Reset(nil)
	p.pool.Put(in)
}

// Open streams the entry's bytes, inflated. The reader fails with a
// permanent error wrapping ErrSizeMismatch as soon as the data would run past
// the declared size (it never yields more than Size bytes), or at the end if
// it is shorter; with ErrRatio as soon as, past RatioExemptSize bytes, the
// bytes yielded exceed MaxRatio times the compressed bytes consumed; with
// ErrChecksum at the end if the CRC-32 differs; with ErrCorrupt if the
// compressed data is corrupt or truncated. io.EOF is returned only after
// every check has passed. Errors from the archive's ReaderAt are passed on
// wrapped, keeping their class.
//
// Open itself fails (permanently, wrapping ErrFormat) when the entry's local
// header is missing or its data extends past the end of the archive.
//
// Several Files of one Archive, or one File several times, may be open and
// read concurrently; each reader is for one goroutine. Close releases the
// reader's buffers; it is safe to call more than once.
func (f *File) Open() (io.ReadCloser, error) {
	a := f.a
	off, err := f.DataOffset()
	if err != nil {
		return nil, err
	}
	sr := io.NewSectionReader(a.ra, off, f.CompressedSize)
	return openEntry(f.Name, f.Method, f.Size, f.CRC32, sr, nil, a.lim.MaxRatio, &a.pool), nil
}

// DataOffset reads the entry's local header, which must name the entry,
// and returns where its data starts in the archive. It fails as Open does
// when the header is missing or names another entry or the data extends
// past the end of the archive, and with ErrOverlap
// when the header's name and extra field carry the data into the next
// entry's local header or the central directory.
func (f *File) DataOffset() (int64, error) {
	if f.header < 0 || f.header > f.a.size-lenLocal {
		return 0, errclass.Permanentf("unzip: entry %q: %w: local header offset out of range", f.Name, ErrFormat)
	}
	off, err := localDataOffset(f.a.ra, f.header, f.Name)
	if err != nil {
		var se *sourceError
		if errors.As(err, &se) {
			return 0, fmt.Errorf("unzip: entry %q: reading local header: %w", f.Name, se.err)
		}
		return 0, errclass.Permanentf("unzip: entry %q: local header: %w", f.Name, err)
	}
	if off > f.a.size || f.CompressedSize > f.a.size-off {
		return 0, errclass.Permanentf("unzip: entry %q: %w: data extends past the end of the archive", f.Name, ErrFormat)
	}
	if next := f.a.next(f.header); f.CompressedSize > next-off {
		return 0, errclass.Permanentf("unzip: entry %q: %w: its data, at offset %d, runs past offset %d, where the next entry or the central directory starts",
			f.Name, ErrOverlap, off, next)
	}
	return off, nil
}

// entryReader enforces the declared size, the ratio cap and the CRC-32 on an
// entry's data: of a File, or of a LocalEntry.
type entryReader struct {
	name     string  // entry name, for errors
	size     int64   // declared uncompressed size
	crc32    uint32  // declared CRC-32
	maxRatio float64 // Limits.MaxRatio

	section *io.SectionReader // compressed bytes
	pool    *inflaterPool     // where in goes back on Close
	in      *inflater         // nil for stored entries
	src     io.Reader         // uncompressed bytes
	n       int64             // bytes yielded
	crc     uint32
	err     error // sticky: io.EOF after success, or the failure
	closed  bool
}

// openEntry returns the reader of the entry name's data, whose compressed
// bytes are section (and data, when not nil: section's bytes in memory,
// which the fast reader inflates in place), checked against the declared
// size and crc and against maxRatio. A deflated entry takes its decoder
// from pool, and gives it back on Close. A method other than Store and
// Deflate fails with ErrMethod.
func openEntry(name string, method uint16, size int64, crc uint32, section *io.SectionReader, data []byte, maxRatio float64, pool *inflaterPool) io.ReadCloser {
	if fastEligible(method, size, section.Size()) {
		return &fastReader{method: method, section: section, data: data, size: size, crc32: crc, pool: pool, open: func() io.ReadCloser {
			return openStream(name, method, size, crc, io.NewSectionReader(section, 0, section.Size()), maxRatio, pool)
		}}
	}
	return openStream(name, method, size, crc, section, maxRatio, pool)
}

// openStream returns the streaming reader of openEntry, for a deflated or
// stored entry.
func openStream(name string, method uint16, size int64, crc uint32, section *io.SectionReader, maxRatio float64, pool *inflaterPool) io.ReadCloser {
	r := &entryReader{name: name, size: size, crc32: crc, maxRatio: maxRatio, section: section}
	switch method {
	case zip.Store:
		r.src = section
	case zip.Deflate:
		r.pool, r.in = pool, pool.get(section)
		r.src = r.in.fr
	default: // unreachable: such entries are rejected before they are opened
		r.err = errclass.Permanentf("unzip: entry %q: %w: method %d", name, ErrMethod, method)
	}
	return r
}

func (r *entryReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	remaining := r.size - r.n
	if remaining == 0 {
		r.err = r.finish()
		return 0, r.err
	}
	if int64(len(p)) > remaining {
		p = p[:remaining]
	}
	n, err := r.src.Read(p)
	r.n += int64(n)
	r.crc = crc32.Update(r.crc, crc32.IEEETable, p[:n])
	if rerr := r.checkRatio(); rerr != nil {
		r.err = rerr
		return n, r.err
	}
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		if r.n < r.size {
			r.err = errclass.Permanentf("unzip: entry %q: %w: %d bytes, %d declared", r.name, ErrSizeMismatch, r.n, r.size)
		} else {
			r.err = r.verify()
		}
	default:
		r.err = r.dataError(err)
	}
	return n, r.err
}

// finish is called once the declared size has been yielded: the data must
// end here, and its CRC-32 must match.
func (r *entryReader) finish() error {
	var b [1]byte
	for range 100 {
		n, err := r.src.Read(b[:])
		if n > 0 {
			return errclass.Permanentf("unzip: entry %q: %w: more than the %d bytes declared", r.name, ErrSizeMismatch, r.size)
		}
		if err == io.EOF {
			return r.verify()
		}
		if err != nil {
			return r.dataError(err)
		}
	}
	return errclass.Permanentf("unzip: entry %q: %w: decoder makes no progress", r.name, ErrCorrupt)
}

func (r *entryReader) verify() error {
	if r.crc != r.crc32 {
		return errclass.Permanentf("unzip: entry %q: %w: got %08x, declared %08x", r.name, ErrChecksum, r.crc, r.crc32)
	}
	return io.EOF
}

// checkRatio fails once the bytes yielded, past RatioExemptSize, exceed
// MaxRatio times the compressed bytes the decoder has consumed.
func (r *entryReader) checkRatio() error {
	if r.in == nil || r.n < RatioExemptSize {
		return nil
	}
	pos, _ := r.section.Seek(0, io.SeekCurrent)
	consumed := pos - int64(r.in.br.Buffered())
	limit := r.maxRatio
	if float64(r.n) > limit*float64(consumed) {
		return errclass.Permanentf("unzip: entry %q: %w: %d bytes from %d while inflating, limit %g",
			r.name, ErrRatio, r.n, consumed, limit)
	}
	return nil
}

// dataError classifies an error from the decoder or the section reader.
func (r *entryReader) dataError(err error) error {
	var se *sourceError
	if errors.As(err, &se) {
		return fmt.Errorf("unzip: entry %q: reading archive: %w", r.name, se.err)
	}
	if err == io.ErrUnexpectedEOF {
		return errclass.Permanentf("unzip: entry %q: %w: compressed data truncated", r.name, ErrCorrupt)
	}
	return errclass.Permanentf("unzip: entry %q: %w: %w", r.name, ErrCorrupt, err)
}

// Close releases the reader. It does not report a failed read: callers must
// look at Read's errors.
func (r *entryReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.err == nil {
		r.err = errReadAfterClose
	}
	if r.in != nil {
		r.pool.put(r.in)
		r.in = nil
		r.src = nil
	}
	return nil
}
