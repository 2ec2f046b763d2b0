package unzip

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"
	"github.com/rsharvest/rsharvest/errclass"
)

// Reading an archive by its local headers, as its bytes arrive.
//
// A ZIP's central directory, the archive's authority, is at its end. Before
// it has arrived, the entries can only be found by walking the local file
// headers from the start of the file, and only while each local header
// gives its entry's sizes (no data descriptor, general-purpose flag bit 3):
// otherwise the end of the entry's data, and so the next header, cannot be
// found without inflating. LocalScanner walks them and OpenLocal reads an
// entry so found, with the same checks as Archive and File.Open apply. The
// central directory may still disagree with what the local headers say (an
// entry it does not list, a symlink or device attribute, a duplicate name):
// a caller that acts on local entries before the archive is complete must
// confirm each against Open's Archive once it is.

// ErrDataDescriptor means an entry's local header does not give its sizes
// (general-purpose flag bit 3: they follow the data in a data descriptor),
// so the entries from there on cannot be read before the central directory.
var ErrDataDescriptor = errors.New("unzip: sizes follow the data (data descriptor)")

// ZIP record signatures.
const (
	locSigLocal        = 0x04034b50
	locSigCentral      = 0x02014b50
	locSigEnd          = 0x06054b50
	locSigEnd64        = 0x06064b50
	locSigDigital      = 0x05054b50
	locSigArchiveExtra = 0x08064b50
	locHeaderLen       = 30
	locFlagDescriptor  = 0x8
	locFlagEncryption  = 0x1 | 0x40 // traditional or strong encryption
	locZip64ExtraID    = 0x0001
	// locBufSize is the read-ahead on compressed data; the ratio check
	// subtracts what is buffered.
	locBufSize = 32 << 10
)

// localLimits fills lim's zero fields with the defaults, as Open does.
func localLimits(lim Limits) Limits {
	if lim.MaxEntries <= 0 {
		lim.MaxEntries = DefaultMaxEntries
	}
	if lim.MaxEntrySize <= 0 {
		lim.MaxEntrySize = DefaultMaxEntrySize
	}
	if lim.MaxTotalSize <= 0 {
		lim.MaxTotalSize = DefaultMaxTotalSize
	}
	if !(lim.MaxRatio > 0) { // also catches NaN
		lim.MaxRatio = DefaultMaxRatio
	}
	return lim
}

// LocalEntry is an entry as its local file header describes it.
type LocalEntry struct {
	Name           string // entry name, as in the archive
	Method         uint16 // zip.Store or zip.Deflate
	Flags          uint16 // general-purpose flags
	CRC32          uint32 // declared CRC-32 (IEEE)
	CompressedSize int64  // declared compressed size
	Size           int64  // declared uncompressed size
	HeaderOffset   int64  // offset of the local header in the archive
	DataOffset     int64  // offset of the entry's data in the archive
}

// IsDir reports whether the entry names a directory (its name ends in "/").
func (e *LocalEntry) IsDir() bool { return len(e.Name) > 0 && e.Name[len(e.Name)-1] == '/' }

// End returns the offset just past the entry's data: where the next local
// header (or the central directory) starts.
func (e *LocalEntry) End() int64 { return e.DataOffset + e.CompressedSize }

// LocalScanner reads the local file headers of a ZIP archive in order, from
// the archive's first byte, without the central directory. It reads its
// io.Reader sequentially (and skips entry data by seeking when the reader
// is an io.Seeker), so the reader may block until the archive's bytes
// arrive. It is for one goroutine.
type LocalScanner struct {
	r     io.Reader
	lim   Limits
	off   int64 // offset in the archive of r's next byte
	next  int64 // offset of the next local header
	count int
	total int64
	err   error // sticky
	hdr   [locHeaderLen]byte
	buf   []byte
}

// NewLocalScanner returns a scanner of the archive whose bytes r yields from
// offset 0. It applies the caps of lim as Open does.
func NewLocalScanner(r io.Reader, lim Limits) *LocalScanner {
	return &LocalScanner{r: r, lim: localLimits(lim)}
}

// Next returns the next entry. It returns io.EOF at the first record that is
// not a local file header but one of the records that follow the entries
// (the central directory, the end records). Directories (names ending in
// "/") are returned like other entries.
//
// An entry that Open would reject by its header — an unsafe name, an
// encrypted entry, a method other than Store and Deflate, a size over
// Limits.MaxEntrySize, a ratio over Limits.MaxRatio, a stored entry whose
// sizes differ — fails with the same permanent error, wrapping the same
// sentinel, and so does an entry that takes the count over
// Limits.MaxEntries (ErrTooManyEntries) or the declared sizes over
// Limits.MaxTotalSize (ErrTotalSize); an entry whose sizes follow its data
// fails with ErrDataDescriptor; with the failing entry as far as it was
// read. Bytes that are not a ZIP record fail with ErrFormat. An error of
// the reader is returned wrapped, keeping its class (io.EOF and
// io.ErrUnexpectedEOF, the archive ending early, become ErrFormat). Every
// error is final: later calls return it again.
func (s *LocalScanner) Next() (LocalEntry, error) {
	if s.err != nil {
		return LocalEntry{}, s.err
	}
	e, err := s.scan()
	if err != nil {
		s.err = err
	}
	return e, err
}

func (s *LocalScanner) scan() (LocalEntry, error) {
	if err := s.skipTo(s.next); err != nil {
		return LocalEntry{}, err
	}
	e := LocalEntry{HeaderOffset: s.off}
	if err := s.read(s.hdr[:4]); err != nil {
		return e, err
	}
	switch sig := binary.LittleEndian.Uint32(s.hdr[:4]); sig {
	case locSigLocal:
	case locSigCentral, locSigEnd, locSigEnd64, locSigDigital, locSigArchiveExtra:
		return e, io.EOF
	default:
		return e, errclass.Permanentf("%w: no local file header at offset %d (signature %08x)", ErrFormat, e.HeaderOffset, sig)
	}
	if err := s.read(s.hdr[4:]); err != nil {
		return e, err
	}
	h := s.hdr[:]
	e.Flags = binary.LittleEndian.Uint16(h[6:])
	e.Method = binary.LittleEndian.Uint16(h[8:])
	e.CRC32 = binary.LittleEndian.Uint32(h[14:])
	csize := uint64(binary.LittleEndian.Uint32(h[18:]))
	usize := uint64(binary.LittleEndian.Uint32(h[22:]))
	nameLen := int(binary.LittleEndian.Uint16(h[26:]))
	extraLen := int(binary.LittleEndian.Uint16(h[28:]))
	if cap(s.buf) < nameLen+extraLen {
		s.buf = make([]byte, nameLen+extraLen)
	}
	b := s.buf[:nameLen+extraLen]
	if err := s.read(b); err != nil {
		return e, err
	}
	e.Name = string(b[:nameLen])
	e.DataOffset = s.off
	if e.Flags&locFlagDescriptor != 0 {
		return e, errclass.Permanentf("unzip: entry %q: %w", e.Name, ErrDataDescriptor)
	}
	if csize == math.MaxUint32 || usize == math.MaxUint32 {
		var ok bool
		if usize, csize, ok = localZip64Sizes(b[nameLen:]); !ok {
			return e, errclass.Permanentf("unzip: entry %q: %w: zip64 sizes without a zip64 extra field", e.Name, ErrFormat)
		}
	}
	if err := checkLocal(e.Name, e.Flags, e.Method, usize, csize, s.lim); err != nil {
		return e, err
	}
	e.CompressedSize, e.Size = int64(csize), int64(usize)
	s.count++
	if s.count > s.lim.MaxEntries {
		return e, errclass.Permanentf("%w: more than %d", ErrTooManyEntries, s.lim.MaxEntries)
	}
	if e.Size > s.lim.MaxTotalSize-s.total {
		return e, errclass.Permanentf("%w: over %d bytes", ErrTotalSize, s.lim.MaxTotalSize)
	}
	s.total += e.Size
	if e.CompressedSize > math.MaxInt64-e.DataOffset {
		return e, errclass.Permanentf("unzip: entry %q: %w: compressed size %d", e.Name, ErrFormat, e.CompressedSize)
	}
	s.next = e.End()
	return e, nil
}

// localZip64Sizes finds the sizes in a local header's zip64 extra field, which
// holds both (uncompressed first).
func localZip64Sizes(extra []byte) (usize, csize uint64, ok bool) {
	for len(extra) >= 4 {
		id := binary.LittleEndian.Uint16(extra)
		n := int(binary.LittleEndian.Uint16(extra[2:]))
		extra = extra[4:]
		if n > len(extra) {
			return 0, 0, false
		}
		if id == locZip64ExtraID && n >= 16 {
			return binary.LittleEndian.Uint64(extra), binary.LittleEndian.Uint64(extra[8:]), true
		}
		extra = extra[n:]
	}
	return 0, 0, false
}

// read fills p from the reader, counting the offset.
func (s *LocalScanner) read(p []byte) error {
	n, err := io.ReadFull(s.r, p)
	s.off += int64(n)
	return s.readError(err)
}

// skipTo advances the reader to offset off.
func (s *LocalScanner) skipTo(off int64) error {
	d := off - s.off
	if d <= 0 {
		return nil
	}
	if sk, ok := s.r.(io.Seeker); ok {
		if _, err := sk.Seek(d, io.SeekCurrent); err != nil {
			return fmt.Errorf("unzip: reading archive: %w", err)
		}
		s.off = off
		return nil
	}
	n, err := io.CopyN(io.Discard, s.r, d)
	s.off += n
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return s.readError(err)
}

func (s *LocalScanner) readError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errclass.Permanentf("%w: archive ends at offset %d, inside an entry", ErrFormat, s.off)
	default:
		return fmt.Errorf("unzip: reading archive: %w", err)
	}
}

// checkLocal returns why an entry must be rejected by what its local header
// says, or nil: the checks Archive applies to the central directory's
// records, except those of the attributes the local header lacks.
func checkLocal(name string, flags, method uint16, usize, csize uint64, lim Limits) error {
	if why := unsafeName(name); why != "" {
		return errclass.Permanentf("unzip: entry %q: %w: %s", name, ErrUnsafePath, why)
	}
	if flags&locFlagEncryption != 0 {
		return errclass.Permanentf("unzip: entry %q: %w", name, ErrEncrypted)
	}
	if method != zip.Store && method != zip.Deflate {
		return errclass.Permanentf("unzip: entry %q: %w: method %d", name, ErrMethod, method)
	}
	if usize > uint64(lim.MaxEntrySize) {
		return errclass.Permanentf("unzip: entry %q: %w: %d bytes declared, limit %d", name, ErrEntrySize, usize, lim.MaxEntrySize)
	}
	if csize > math.MaxInt64 {
		return errclass.Permanentf("unzip: entry %q: %w: compressed size %d", name, ErrFormat, csize)
	}
	if method == zip.Store && usize != csize {
		return errclass.Permanentf("unzip: entry %q: %w: stored entry declares %d bytes compressed, %d uncompressed",
			name, ErrSizeMismatch, csize, usize)
	}
	if usize >= RatioExemptSize && float64(usize) > lim.MaxRatio*float64(csize) {
		return errclass.Permanentf("unzip: entry %q: %w: %d bytes from %d declared, limit %g",
			name, ErrRatio, usize, csize, lim.MaxRatio)
	}
	return nil
}

// LocalOpener reads entries found by a LocalScanner from the archive's
// bytes, reusing its decoders. Its methods are safe for concurrent use.
type LocalOpener struct {
	ra   io.ReaderAt
	lim  Limits
	pool sync.Pool // of *localInflater
}

// localInflater is a reusable DEFLATE decoder with its input buffer.
type localInflater struct {
	br *bufio.Reader
	fr io.ReadCloser // implements flate.Resetter
}

// NewLocalOpener returns an opener of the entries of the archive read
// through ra. ra must allow concurrent ReadAt calls when entries are read
// concurrently.
func NewLocalOpener(ra io.ReaderAt, lim Limits) *LocalOpener {
	return &LocalOpener{ra: ra, lim: localLimits(lim)}
}

// OpenLocal streams the bytes of entry e of the archive read through ra,
// inflated and checked as [File.Open] checks them; see [LocalOpener.Open].
func OpenLocal(ra io.ReaderAt, e LocalEntry, lim Limits) (io.ReadCloser, error) {
	return NewLocalOpener(ra, lim).Open(e)
}

// Open streams the bytes of e, inflated, with the checks of [File.Open]:
// the reader fails with a permanent error wrapping ErrSizeMismatch as soon
// as the data would run past the declared size or at the end when it is
// shorter, with ErrRatio when past RatioExemptSize bytes the output exceeds
// MaxRatio times the compressed input consumed, with ErrChecksum at the end
// when the CRC-32 differs, and with ErrCorrupt when the compressed data is
// corrupt or ends early; io.EOF only after every check passed. Errors of
// the ReaderAt (other than io.EOF) are passed on wrapped, keeping their
// class. Open itself fails, permanently, when e's header fields would be
// rejected (see [LocalScanner.Next]) or its data offset is negative. The
// caller must make sure e's data has arrived: reads past the end of what
// the ReaderAt holds fail as truncated data. Each reader is for one
// goroutine; Close releases its buffers and may be called more than once.
func (o *LocalOpener) Open(e LocalEntry) (io.ReadCloser, error) {
	if e.Size < 0 || e.CompressedSize < 0 {
		return nil, errclass.Permanentf("unzip: entry %q: %w: negative size", e.Name, ErrFormat)
	}
	if err := checkLocal(e.Name, e.Flags, e.Method, uint64(e.Size), uint64(e.CompressedSize), o.lim); err != nil {
		return nil, err
	}
	if e.DataOffset < 0 || e.CompressedSize > math.MaxInt64-e.DataOffset {
		return nil, errclass.Permanentf("unzip: entry %q: %w: data offset %d", e.Name, ErrFormat, e.DataOffset)
	}
	sr := io.NewSectionReader(localSource{o.ra}, e.DataOffset, e.CompressedSize)
	r := &localReader{o: o, e: e, section: sr}
	if e.Method == zip.Deflate {
		r.in = o.getInflater(sr)
		r.src = r.in.fr
	} else {
		r.src = sr
	}
	return r, nil
}

func (o *LocalOpener) getInflater(src io.Reader) *localInflater {
	if in, ok := o.pool.Get().(*localInflater); ok {
		in.br.Reset(src)
		if err := in.fr.(flate.Resetter).Reset(in.br, nil); err == nil {
			return in
		}
	}
	br := bufio.NewReaderSize(src, locBufSize)
	return &localInflater{br: br, fr: flate.NewReader(br)}
}

func (o *LocalOpener) putInflater(in *localInflater) {
	in.br.Reset(nil)
	o.pool.Put(in)
}

// localReader enforces the declared size, the ratio cap and the CRC-32 on a
// local entry's data.
type localReader struct {
	o       *LocalOpener
	e       LocalEntry
	section *io.SectionReader // compressed bytes
	in      *localInflater    // nil for stored entries
	src     io.Reader         // uncompressed bytes
	n       int64             // bytes yielded
	crc     uint32
	err     error // sticky: io.EOF after success, or the failure
	closed  bool
}

func (r *localReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	remaining := r.e.Size - r.n
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
		if r.n < r.e.Size {
			r.err = errclass.Permanentf("unzip: entry %q: %w: %d bytes, %d declared", r.e.Name, ErrSizeMismatch, r.n, r.e.Size)
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
func (r *localReader) finish() error {
	var b [1]byte
	for range 100 {
		n, err := r.src.Read(b[:])
		if n > 0 {
			return errclass.Permanentf("unzip: entry %q: %w: more than the %d bytes declared", r.e.Name, ErrSizeMismatch, r.e.Size)
		}
		if err == io.EOF {
			return r.verify()
		}
		if err != nil {
			return r.dataError(err)
		}
	}
	return errclass.Permanentf("unzip: entry %q: %w: decoder makes no progress", r.e.Name, ErrCorrupt)
}

func (r *localReader) verify() error {
	if r.crc != r.e.CRC32 {
		return errclass.Permanentf("unzip: entry %q: %w: got %08x, declared %08x", r.e.Name, ErrChecksum, r.crc, r.e.CRC32)
	}
	return io.EOF
}

// checkRatio fails once the bytes yielded, past RatioExemptSize, exceed
// MaxRatio times the compressed bytes the decoder has consumed.
func (r *localReader) checkRatio() error {
	if r.in == nil || r.n < RatioExemptSize {
		return nil
	}
	pos, _ := r.section.Seek(0, io.SeekCurrent)
	consumed := pos - int64(r.in.br.Buffered())
	if float64(r.n) > r.o.lim.MaxRatio*float64(consumed) {
		return errclass.Permanentf("unzip: entry %q: %w: %d bytes from %d while inflating, limit %g",
			r.e.Name, ErrRatio, r.n, consumed, r.o.lim.MaxRatio)
	}
	return nil
}

// dataError classifies an error from the decoder or the section reader.
func (r *localReader) dataError(err error) error {
	var se *localSourceError
	if errors.As(err, &se) {
		return fmt.Errorf("unzip: entry %q: reading archive: %w", r.e.Name, se.err)
	}
	if err == io.ErrUnexpectedEOF {
		return errclass.Permanentf("unzip: entry %q: %w: compressed data truncated", r.e.Name, ErrCorrupt)
	}
	return errclass.Permanentf("unzip: entry %q: %w: %w", r.e.Name, ErrCorrupt, err)
}

// localSource marks the errors of the caller's ReaderAt (other than
// io.EOF), so they keep their class instead of counting as corrupt data.
type localSource struct{ ra io.ReaderAt }

func (s localSource) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.ra.ReadAt(p, off)
	if err != nil && err != io.EOF {
		err = &localSourceError{err}
	}
	return n, err
}

// localSourceError is an error of the caller's ReaderAt.
type localSourceError struct{ err error }

func (e *localSourceError) Error() string { return e.err.Error() }
func (e *localSourceError) Unwrap() error { return e.err }

// Close releases the reader. It does not report a failed read: callers must
// look at Read's errors.
func (r *localReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.err == nil {
		r.err = errors.New("unzip: read after close")
	}
	if r.in != nil {
		r.o.putInflater(r.in)
		r.in = nil
		r.src = nil
	}
	return nil
}
