package unzip

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

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
// confirm each against Open's Archive once it is. LocalScanner keeps no
// names, so it does not refuse duplicates itself; it names entries by the
// same keys as Archive does (see EntryKey), so a caller that compares the
// names it is given sees "/a" and "a" as the same name.

// ErrDataDescriptor means an entry's local header does not give its sizes
// (general-purpose flag bit 3: they follow the data in a data descriptor),
// so the entries from there on cannot be read before the central directory.
var ErrDataDescriptor = errors.New("unzip: sizes follow the data (data descriptor)")

// LocalEntry is an entry as its local file header describes it.
type LocalEntry struct {
	Name           string // the entry's key (see EntryKey)
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
	hdr   [lenLocal]byte
	buf   []byte
}

// NewLocalScanner returns a scanner of the archive whose bytes r yields from
// offset 0. It applies the caps of lim as Open does.
func NewLocalScanner(r io.Reader, lim Limits) *LocalScanner {
	return &LocalScanner{r: r, lim: lim.withDefaults()}
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
	switch sig := le32(s.hdr[:4]); sig {
	case sigLocal:
	case sigDirHeader, sigEOCD, sigEOCD64, sigDigital, sigArchiveExtra:
		return e, io.EOF
	default:
		return e, errclass.Permanentf("%w: no local file header at offset %d (signature %08x)", ErrFormat, e.HeaderOffset, sig)
	}
	if err := s.read(s.hdr[4:]); err != nil {
		return e, err
	}
	h := s.hdr[:]
	e.Flags = le16(h[6:])
	e.Method = le16(h[8:])
	e.CRC32 = le32(h[14:])
	csize := uint64(le32(h[18:]))
	usize := uint64(le32(h[22:]))
	nameLen := int(le16(h[26:]))
	extraLen := int(le16(h[28:]))
	if cap(s.buf) < nameLen+extraLen {
		s.buf = make([]byte, nameLen+extraLen)
	}
	b := s.buf[:nameLen+extraLen]
	if err := s.read(b); err != nil {
		return e, err
	}
	e.Name = EntryKey(b[:nameLen], e.Flags)
	e.DataOffset = s.off
	if e.Flags&flagDescriptor != 0 {
		return e, errclass.Permanentf("unzip: entry %q: %w", e.Name, ErrDataDescriptor)
	}
	if csize == math.MaxUint32 || usize == math.MaxUint32 {
		var ok bool
		if usize, csize, ok = localZip64Sizes(b[nameLen:]); !ok {
			return e, errclass.Permanentf("unzip: entry %q: %w: zip64 sizes without a zip64 extra field", e.Name, ErrFormat)
		}
	}
	if err := checkEntry(e.Name, "", e.Flags, e.Method, usize, csize, s.lim); err != nil {
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
		id := le16(extra)
		n := int(le16(extra[2:]))
		extra = extra[4:]
		if n > len(extra) {
			return 0, 0, false
		}
		if id == idZip64Extra && n >= 16 {
			return le64(extra), le64(extra[8:]), true
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

// LocalOpener reads entries found by a LocalScanner from the archive's
// bytes, reusing its decoders. Its methods are safe for concurrent use.
type LocalOpener struct {
	ra   *sourceReaderAt // of unknown size
	lim  Limits
	pool inflaterPool
}

// NewLocalOpener returns an opener of the entries of the archive read
// through ra. ra must allow concurrent ReadAt calls when entries are read
// concurrently.
func NewLocalOpener(ra io.ReaderAt, lim Limits) *LocalOpener {
	return &LocalOpener{ra: &sourceReaderAt{ra: ra, size: math.MaxInt64}, lim: lim.withDefaults()}
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
	if err := checkEntry(e.Name, "", e.Flags, e.Method, uint64(e.Size), uint64(e.CompressedSize), o.lim); err != nil {
		return nil, err
	}
	if e.DataOffset < 0 || e.CompressedSize > math.MaxInt64-e.DataOffset {
		return nil, errclass.Permanentf("unzip: entry %q: %w: data offset %d", e.Name, ErrFormat, e.DataOffset)
	}
	sr := io.NewSectionReader(o.ra, e.DataOffset, e.CompressedSize)
	return openEntry(e.Name, e.Method, e.Size, e.CRC32, sr, nil, o.lim.MaxRatio, &o.pool), nil
}

// OpenData is Open reading e's compressed data from data, read from the
// archive already (e's data offset is not used): the same reader, the same
// checks. data must hold e's compressed size in bytes, or OpenData fails,
// permanently. data must not change while the reader is in use.
func (o *LocalOpener) OpenData(e LocalEntry, data []byte) (io.ReadCloser, error) {
	if e.Size < 0 || e.CompressedSize != int64(len(data)) {
		return nil, errclass.Permanentf("unzip: entry %q: %w: %d bytes of data for a compressed size of %d", e.Name, ErrFormat, len(data), e.CompressedSize)
	}
	if err := checkEntry(e.Name, "", e.Flags, e.Method, uint64(e.Size), uint64(e.CompressedSize), o.lim); err != nil {
		return nil, err
	}
	sr := io.NewSectionReader(bytes.NewReader(data), 0, e.CompressedSize)
	return openEntry(e.Name, e.Method, e.Size, e.CRC32, sr, data, o.lim.MaxRatio, &o.pool), nil
}
