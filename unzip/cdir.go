package unzip

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// This file reads the ZIP structures this package needs itself, instead of
// through a ZIP library that would keep every central-directory record in
// memory: the end records, the central directory (streamed through a
// buffer, or one record at a time) and local headers.

// Record layouts (APPNOTE.TXT 4.3).
const (
	sigEOCD      = 0x06054b50
	lenEOCD      = 22
	sigEOCD64Loc = 0x07064b50
	lenEOCD64Loc = 20
	sigEOCD64    = 0x06064b50
	lenEOCD64    = 56
	sigDirHeader = 0x02014b50
	lenDirHeader = 46
	sigLocal     = 0x04034b50
	lenLocal     = 30

	// Records that may follow the entries, as a LocalScanner meets them.
	sigDigital      = 0x05054b50 // digital signature
	sigArchiveExtra = 0x08064b50 // archive extra data

	// searchEOCD is how far from the end the end-of-central-directory
	// record can start: its own length plus the longest comment.
	searchEOCD = lenEOCD + math.MaxUint16
)

// Extra-field IDs that are read.
const (
	idZip64Extra       = 0x0001 // ZIP64 sizes and offset
	idNTFSExtra        = 0x000a // NTFS times
	idUnixExtra        = 0x000d // PKWARE Unix times
	idExtTimeExtra     = 0x5455 // extended timestamp
	idInfoZipUnixExtra = 0x5855 // Info-ZIP Unix (old)
)

const (
	// dirBufSize is the read size when streaming the central directory:
	// large, since the ReaderAt may issue an HTTP Range request per read,
	// and larger than a record can be (46 + 3*65535 bytes), so a record's
	// variable part can always be peeked at in the buffer.
	dirBufSize = 256 << 10
	// recordGuess is how many bytes past the name a single-record read
	// takes, to get a record's extra field in the same ReadAt.
	recordGuess = 96
)

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// formatErr returns a permanent error wrapping ErrFormat.
func formatErr(format string, args ...any) error {
	return errclass.Permanentf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// readError makes an error of reading the archive fit to return: an error
// of the caller's ReaderAt is passed on (keeping its class), anything else
// is a permanent error wrapping ErrFormat.
func readError(err error) error {
	var se *sourceError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("unzip: reading archive: %w", se.err)
	case errors.Is(err, ErrFormat):
		return err
	default:
		return formatErr("%w", err)
	}
}

// readFullAt reads len(p) bytes at off; fewer is a format error.
func readFullAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		return formatErr("%d bytes at offset %d, want %d", n, off, len(p))
	}
	return err
}

// dirEnd locates the central directory.
type dirEnd struct {
	records uint64 // declared record count (only its low 16 bits without zip64)
	zip64   bool   // records comes from a ZIP64 end record
	start   int64  // offset of the first record
	end     int64  // offset of the (ZIP64) end record: the directory ends before it
	base    int64  // bytes before the archive proper, added to every offset it records
}

// readDirEnd finds the end-of-central-directory record in the last
// searchEOCD bytes (the last candidate whose comment fits wins, so trailing
// junk is tolerated), follows the ZIP64 locator when the record's fields are
// saturated, and works out where the archive starts, as archive/zip does:
// junk before the first local header (a self-extractor stub) shifts every
// offset.
func readDirEnd(r io.ReaderAt, size int64) (dirEnd, error) {
	n := min(size, searchEOCD)
	buf := make([]byte, n)
	if err := readFullAt(r, buf, size-n); err != nil {
		return dirEnd{}, err
	}
	p := findEOCD(buf)
	if p < 0 {
		return dirEnd{}, formatErr("no end-of-central-directory record")
	}
	end := size - n + int64(p)
	b := buf[p:]
	d := dirEnd{records: uint64(le16(b[10:])), end: end}
	dirSize, dirOff := uint64(le32(b[12:])), uint64(le32(b[16:]))
	if d.records == math.MaxUint16 || dirSize == math.MaxUint32 || dirOff == math.MaxUint32 {
		off, ok, err := findEOCD64(r, end)
		if err != nil {
			return dirEnd{}, err
		}
		if ok {
			var b [lenEOCD64]byte
			if err := readFullAt(r, b[:], off); err != nil {
				return dirEnd{}, err
			}
			d.zip64, d.end = true, off
			d.records, dirSize, dirOff = le64(b[32:]), le64(b[40:]), le64(b[48:])
		}
	}
	if dirSize > uint64(d.end) || dirOff > uint64(d.end)-dirSize {
		return dirEnd{}, formatErr("central directory (%d bytes at offset %d) does not fit before its end record at %d",
			dirSize, dirOff, d.end)
	}
	d.base = d.end - int64(dirSize) - int64(dirOff)
	if d.base > 0 {
		// Some writers get the directory size wrong: when the declared
		// offset, unshifted, holds a record, trust it.
		_, err := readRecordAt(r, int64(dirOff), 0, 0)
		var se *sourceError
		switch {
		case err == nil:
			d.base = 0
		case errors.As(err, &se):
			return dirEnd{}, err
		}
	}
	d.start = d.base + int64(dirOff)
	return d, nil
}

// findEOCD returns the offset in b of the last end-of-central-directory
// signature whose record and comment fit in b, or -1.
func findEOCD(b []byte) int {
	sig := []byte{'P', 'K', 5, 6}
	for end := len(b); ; {
		i := bytes.LastIndex(b[:end], sig)
		if i < 0 {
			return -1
		}
		if i+lenEOCD <= len(b) && i+lenEOCD+int(le16(b[i+lenEOCD-2:])) <= len(b) {
			return i
		}
		end = i + len(sig) - 1
	}
}

// findEOCD64 returns the offset of the ZIP64 end record, if a ZIP64 locator
// precedes the end record at end. The locator's offset is relative to the
// start of the archive proper, which is not known yet: when it does not
// hold the record, the record is looked for where it lies when it has no
// extensible data, just before the locator.
func findEOCD64(r io.ReaderAt, end int64) (int64, bool, error) {
	loc := end - lenEOCD64Loc
	if loc < 0 {
		return 0, false, nil
	}
	var b [lenEOCD64Loc]byte
	if err := readFullAt(r, b[:], loc); err != nil {
		return 0, false, err
	}
	if le32(b[:]) != sigEOCD64Loc || le32(b[4:]) != 0 || le32(b[16:]) > 1 {
		return 0, false, nil
	}
	last := loc - lenEOCD64 // the last offset the record can start at
	if last < 0 {
		return 0, false, formatErr("ZIP64 locator without room for a ZIP64 end record")
	}
	for _, off := range []uint64{le64(b[8:]), uint64(last)} {
		if off > uint64(last) {
			continue
		}
		var sig [4]byte
		if err := readFullAt(r, sig[:], int64(off)); err != nil {
			return 0, false, err
		}
		if le32(sig[:]) == sigEOCD64 {
			return int64(off), true, nil
		}
	}
	return 0, false, formatErr("ZIP64 locator without a ZIP64 end record")
}

// dirRecord is a parsed central-directory record. name and extra alias the
// buffer the record was read into.
type dirRecord struct {
	off              int64 // offset of the record itself
	name, extra      []byte
	flags, method    uint16
	dosTime, dosDate uint16
	crc              uint32
	csize, usize     uint64
	ext              uint32 // external attributes
	header           int64  // offset of the local header; -1 if out of range
}

// parseRecord parses the fixed part h of a record (lenDirHeader bytes,
// signature checked by the caller) and v, its name and extra field. base is
// added to the local header offset.
func parseRecord(rec *dirRecord, h, v []byte, base int64) error {
	rec.flags = le16(h[8:])
	rec.method = le16(h[10:])
	rec.dosTime = le16(h[12:])
	rec.dosDate = le16(h[14:])
	rec.crc = le32(h[16:])
	csize, usize := le32(h[20:]), le32(h[24:])
	nameLen := int(le16(h[28:]))
	rec.name, rec.extra = v[:nameLen], v[nameLen:]
	rec.ext = le32(h[38:])
	header := le32(h[42:])
	rec.csize, rec.usize = uint64(csize), uint64(usize)
	local := uint64(header)

	// As archive/zip: a ZIP64 field is consulted only for the values that
	// are saturated, in the order usize, csize, offset. An uncompressed
	// size of 2^32-1 without one is plausible; the others are not.
	needU, needC, needH := usize == math.MaxUint32, csize == math.MaxUint32, header == math.MaxUint32
	for extra := rec.extra; len(extra) >= 4; {
		tag, n := le16(extra), int(le16(extra[2:]))
		extra = extra[4:]
		if len(extra) < n {
			break
		}
		field := extra[:n]
		extra = extra[n:]
		if tag != idZip64Extra {
			continue
		}
		for _, v := range []struct {
			need *bool
			dst  *uint64
		}{{&needU, &rec.usize}, {&needC, &rec.csize}, {&needH, &local}} {
			if !*v.need {
				continue
			}
			if len(field) < 8 {
				return formatErr("entry %q: short ZIP64 extra field", rec.name)
			}
			*v.dst, field, *v.need = le64(field), field[8:], false
		}
	}
	if needC || needH {
		return formatErr("entry %q: saturated size or offset without a ZIP64 extra field", rec.name)
	}
	rec.header = -1
	if local <= uint64(math.MaxInt64-base) {
		rec.header = int64(local) + base
	}
	return nil
}

// dirScanner streams the central directory, one record after the other.
type dirScanner struct {
	br   *bufio.Reader
	off  int64 // offset of the next record
	base int64
	hdr  [lenDirHeader]byte
}

func newDirScanner(r io.ReaderAt, d dirEnd) *dirScanner {
	n := d.end - d.start
	size := int(min(max(n, 16), dirBufSize))
	return &dirScanner{
		br:   bufio.NewReaderSize(io.NewSectionReader(r, d.start, n), size),
		off:  d.start,
		base: d.base,
	}
}

// next parses the next record into rec, whose name and extra stay valid
// until the next call. It returns false at the end of the directory: at the
// end of its bytes, or at anything that is not a record signature (whether
// the count is right is for the caller to check).
func (s *dirScanner) next(rec *dirRecord) (bool, error) {
	sig, err := s.br.Peek(4)
	if len(sig) < 4 {
		if err == io.EOF {
			return false, nil
		}
		return false, err
	}
	if le32(sig) != sigDirHeader {
		return false, nil
	}
	if _, err := io.ReadFull(s.br, s.hdr[:]); err != nil {
		return false, s.truncated(err)
	}
	h := s.hdr[:]
	nameExtra := int(le16(h[28:])) + int(le16(h[30:]))
	n := nameExtra + int(le16(h[32:]))
	v, err := s.br.Peek(n)
	if err != nil {
		return false, s.truncated(err)
	}
	if err := parseRecord(rec, h, v[:nameExtra], s.base); err != nil {
		return false, err
	}
	rec.off = s.off
	s.off += lenDirHeader + int64(n)
	if _, err := s.br.Discard(n); err != nil { // cannot fail: n bytes are buffered
		return false, s.truncated(err)
	}
	return true, nil
}

func (s *dirScanner) truncated(err error) error {
	var se *sourceError
	if errors.As(err, &se) {
		return err
	}
	return formatErr("central directory truncated at offset %d", s.off)
}

// readRecordAt reads and parses the single record at off (its name and
// extra in a new buffer). nameLen is the expected name length, to read the
// record in one ReadAt when its extra field is short.
func readRecordAt(r io.ReaderAt, off, base int64, nameLen int) (dirRecord, error) {
	buf := make([]byte, lenDirHeader+nameLen+recordGuess)
	n, err := r.ReadAt(buf, off)
	if n < lenDirHeader {
		if err == nil || err == io.EOF {
			err = formatErr("central-directory record at offset %d truncated", off)
		}
		return dirRecord{}, err
	}
	if le32(buf) != sigDirHeader {
		return dirRecord{}, formatErr("no central-directory record at offset %d", off)
	}
	need := lenDirHeader + int(le16(buf[28:])) + int(le16(buf[30:]))
	if need > len(buf) {
		more := make([]byte, need)
		copy(more, buf[:n])
		buf = more
	}
	buf = buf[:need]
	if n < need {
		if err := readFullAt(r, buf[n:], off+int64(n)); err != nil {
			return dirRecord{}, err
		}
	}
	rec := dirRecord{off: off}
	if err := parseRecord(&rec, buf[:lenDirHeader], buf[lenDirHeader:], base); err != nil {
		return dirRecord{}, err
	}
	return rec, nil
}

// localDataOffset reads the local header at off and returns where the
// entry's data starts. The name and extra lengths come from the local
// header, which may differ from the central directory's.
func localDataOffset(r io.ReaderAt, off int64, key string) (int64, error) {
	// The header and, in the same read, a name as long as the key (or a
	// little longer: a leading slash, DSpace's).
	b := make([]byte, lenLocal+len(key)+8)
	n, err := r.ReadAt(b, off)
	if n < lenLocal {
		if err == nil || err == io.EOF {
			return 0, formatErr("%d bytes at offset %d, want %d", n, off, lenLocal)
		}
		return 0, err
	}
	b = b[:n]
	if le32(b) != sigLocal {
		return 0, formatErr("no local header at offset %d", off)
	}
	nameLen := int(le16(b[26:]))
	if len(b) < lenLocal+nameLen {
		b = make([]byte, lenLocal+nameLen)
		if err := readFullAt(r, b, off); err != nil {
			return 0, err
		}
	}
	if local := EntryKey(b[lenLocal:lenLocal+nameLen], le16(b[6:])); local != key {
		return 0, errclass.Permanentf("%w: %q, not %q", ErrNameMismatch, truncName(local), truncName(key))
	}
	return off + lenLocal + int64(nameLen) + int64(le16(b[28:])), nil
}

// truncName shortens a name for a message.
func truncName(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// modTime returns an entry's modification time as archive/zip decodes it:
// from an extended-timestamp, NTFS or Unix extra field when there is one (in
// a fixed zone estimated from the MS-DOS time, if that is set, else UTC),
// else from the MS-DOS date and time (in UTC).
func modTime(dosDate, dosTime uint16, extra []byte) time.Time {
	var modified time.Time
	for len(extra) >= 4 {
		tag, n := le16(extra), int(le16(extra[2:]))
		extra = extra[4:]
		if len(extra) < n {
			break
		}
		field := extra[:n]
		extra = extra[n:]
		switch tag {
		case idNTFSExtra:
			if len(field) < 4 {
				continue
			}
			for attrs := field[4:]; len(attrs) >= 4; {
				attrTag, attrLen := le16(attrs), int(le16(attrs[2:]))
				attrs = attrs[4:]
				if len(attrs) < attrLen {
					break
				}
				attr := attrs[:attrLen]
				attrs = attrs[attrLen:]
				if attrTag != 1 || attrLen != 24 {
					continue
				}
				const ticksPerSecond = 1e7 // 100 ns ticks since 1601
				ts := int64(le64(attr))
				epoch := time.Date(1601, time.January, 1, 0, 0, 0, 0, time.UTC)
				modified = time.Unix(epoch.Unix()+ts/ticksPerSecond, (1e9/ticksPerSecond)*(ts%ticksPerSecond))
			}
		case idUnixExtra, idInfoZipUnixExtra:
			if len(field) < 8 {
				continue
			}
			modified = time.Unix(int64(le32(field[4:])), 0)
		case idExtTimeExtra:
			if len(field) < 5 || field[0]&1 == 0 {
				continue
			}
			modified = time.Unix(int64(le32(field[1:])), 0)
		}
	}
	dos := time.Date(int(dosDate>>9+1980), time.Month(dosDate>>5&0xf), int(dosDate&0x1f),
		int(dosTime>>11), int(dosTime>>5&0x3f), int(dosTime&0x1f*2), 0, time.UTC)
	switch {
	case modified.IsZero():
		return dos
	case dosTime != 0 || dosDate != 0:
		return modified.In(timeZone(dos.Sub(modified)))
	default:
		return modified.UTC()
	}
}

// timeZone returns a fixed zone for an offset estimated from the MS-DOS
// local time, rounded to 15 minutes; out of range means UTC.
func timeZone(offset time.Duration) *time.Location {
	offset = offset.Round(15 * time.Minute)
	if offset < -12*time.Hour || offset > 14*time.Hour {
		offset = 0
	}
	return time.FixedZone("", int(offset/time.Second))
}

// DirectoryStart returns the offset of the central directory of the
// archive of size bytes in ra, as its end records give it (its records,
// then the end records, run from there to the archive's end): without
// reading the directory itself. It fails as Open does when the end
// records cannot be found or read.
func DirectoryStart(ra io.ReaderAt, size int64) (int64, error) {
	if size < 0 || size > maxArchiveSize {
		return 0, formatErr("size %d out of range", size)
	}
	d, err := readDirEnd(&sourceReaderAt{ra: ra, size: size}, size)
	if err != nil {
		return 0, readError(err)
	}
	return d.start, nil
}
