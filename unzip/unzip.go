// Package unzip reads ResourceSync dump packages (ZIP archives with a
// top-level manifest.xml) safely: it enforces caps on entry count, sizes and
// compression ratio, rejects hostile entry names and non-regular entries,
// and streams each entry through a reader that checks its declared size and
// CRC-32.
//
// Archive-level problems make Open fail with a permanent error (see
// [errclass]). Entry-level problems do not: the entry is recorded as rejected
// and looking it up returns the reason. Nothing in this package creates files;
// names are checked so that callers can trust the names they get back.
//
// Memory does not grow with the names: Open streams the central directory
// (in large reads, which suits a ReaderAt over HTTP Range requests) and
// keeps a few dozen bytes per entry, about 16 (a hash of the name and the
// offset of its central-directory record); Lookup, Unreferenced and
// Rejected read the records they need again. A package of a million entries
// costs some 16 MB once open.
package unzip

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zip"
	"github.com/rsharvest/rsharvest/errclass"
)

// Defaults used for zero (or negative) fields of [Limits].
const (
	DefaultMaxEntries   = 5_000_000
	DefaultMaxEntrySize = 64 << 30 // 64 GiB
	DefaultMaxTotalSize = 1 << 40  // 1 TiB
	DefaultMaxRatio     = 1000
)

// RatioExemptSize is the uncompressed size below which an entry is exempt
// from the compression-ratio check: small, highly compressible files are
// common and harmless.
const RatioExemptSize = 1 << 20

// TotalRatioExemptSize is the sum of the entries' declared sizes below
// which a package is exempt from the check of that sum against MaxRatio
// times the package's size.
const TotalRatioExemptSize = 64 << 20

// ManifestName is the key of the manifest entry at the top level of a dump
// package: an entry stored as "manifest.xml" or, as DSpace may write it,
// "/manifest.xml" (see EntryKey).
const ManifestName = "manifest.xml"

// Archive-level errors. Open returns permanent errors wrapping one of them.
var (
	// ErrFormat means the input is not a ZIP archive, or is truncated or
	// otherwise structurally broken.
	ErrFormat = errors.New("unzip: not a valid ZIP archive")
	// ErrTooManyEntries means the central directory holds more records than
	// Limits.MaxEntries.
	ErrTooManyEntries = errors.New("unzip: too many entries")
	// ErrTotalSize means the declared uncompressed sizes of the accepted
	// entries add up to more than Limits.MaxTotalSize.
	ErrTotalSize = errors.New("unzip: total uncompressed size over the limit")
	// ErrNoManifest means there is no regular top-level manifest.xml entry.
	ErrNoManifest = errors.New("unzip: no top-level manifest.xml")
	// ErrManifestDuplicate means manifest.xml is present more than once. The
	// error also wraps ErrDuplicate.
	ErrManifestDuplicate = errors.New("unzip: manifest.xml present more than once")
	// ErrManifestRejected means the top-level manifest.xml entry was
	// rejected (for example a symlink, encrypted, or over a cap). The error
	// also wraps the rejection reason.
	ErrManifestRejected = errors.New("unzip: manifest.xml entry rejected")
	// ErrOverlap means two central-directory records point at the same
	// bytes (an entry's data overlaps another's, or the central
	// directory): a package that would write far more than it holds.
	ErrOverlap = errors.New("unzip: entries overlap")
)

// Entry-level errors: the reasons an entry is rejected (see
// [Archive.Rejected]) or a lookup fails. All are returned as permanent errors.
var (
	// ErrUnsafePath means a name that could escape a destination directory
	// or is otherwise unusable once made a key (see EntryKey and PathKey):
	// empty, still absolute, a ".." segment, a drive letter, or a control
	// character (NUL included).
	ErrUnsafePath = errors.New("unzip: unsafe name")
	// ErrNotRegular means a symlink, device, FIFO, socket or other
	// non-regular entry.
	ErrNotRegular = errors.New("unzip: not a regular file")
	// ErrDuplicate means the name's key occurs more than once in the
	// archive ("/a" and "a", or `a\b` and "a/b", are copies); every copy
	// is rejected because the name is ambiguous.
	ErrDuplicate = errors.New("unzip: duplicate entry name")
	// ErrEntrySize means the declared uncompressed size is over
	// Limits.MaxEntrySize.
	ErrEntrySize = errors.New("unzip: entry size over the limit")
	// ErrRatio means the compression ratio is over Limits.MaxRatio, by the
	// declared sizes or while inflating.
	ErrRatio = errors.New("unzip: compression ratio over the limit")
	// ErrEncrypted means an encrypted entry.
	ErrEncrypted = errors.New("unzip: encrypted entry")
	// ErrMethod means a compression method other than Store and Deflate. It
	// wraps zip.ErrAlgorithm.
	ErrMethod = fmt.Errorf("unzip: unsupported compression method (%w)", zip.ErrAlgorithm)
	// ErrSizeMismatch means the data is longer or shorter than the declared
	// uncompressed size (or, for a stored entry, the declared sizes differ).
	ErrSizeMismatch = errors.New("unzip: size differs from the declared size")
	// ErrChecksum means the CRC-32 of the data differs from the declared one.
	// It wraps zip.ErrChecksum.
	ErrChecksum = fmt.Errorf("unzip: CRC-32 mismatch (%w)", zip.ErrChecksum)
	// ErrCorrupt means the compressed data is corrupt or truncated.
	ErrCorrupt = errors.New("unzip: corrupt entry data")
	// ErrNotInPackage means a manifest path names no entry of the archive.
	ErrNotInPackage = errors.New("unzip: path not in package")
	// ErrNameMismatch means an entry's local header names another entry
	// than its central-directory record: a malformed entry.
	ErrNameMismatch = errors.New("unzip: the local header names another entry")
)

// Limits caps what an archive may hold. The zero value of each field means
// its default.
type Limits struct {
	// MaxEntries caps the number of central-directory records, directories
	// included (default DefaultMaxEntries). Over it, Open fails.
	MaxEntries int
	// MaxEntrySize caps an entry's uncompressed size, declared and actual
	// (default DefaultMaxEntrySize). Over it, the entry is rejected.
	MaxEntrySize int64
	// MaxTotalSize caps the sum of the declared uncompressed sizes of the
	// accepted entries (default DefaultMaxTotalSize). Over it, Open fails.
	MaxTotalSize int64
	// MaxRatio caps uncompressed/compressed size per entry (default
	// DefaultMaxRatio), checked on the declared sizes (the entry is
	// rejected) and while inflating (the read fails). Entries under
	// RatioExemptSize are exempt. The accepted entries' declared sizes
	// together may not exceed MaxRatio times the archive's size either
	// (past RatioExemptSize): Open fails.
	MaxRatio float64
	// Logger receives rejections and a summary; nil discards.
	Logger *slog.Logger
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxEntrySize <= 0 {
		l.MaxEntrySize = DefaultMaxEntrySize
	}
	if l.MaxTotalSize <= 0 {
		l.MaxTotalSize = DefaultMaxTotalSize
	}
	if !(l.MaxRatio > 0) { // also catches NaN
		l.MaxRatio = DefaultMaxRatio
	}
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
	return l
}

// Archive is an opened dump package. Its methods are safe for concurrent
// use.
//
// It keeps 16 bytes per non-directory entry (a hash of the name and where
// its central-directory record is, sorted by hash) plus a bit for
// [Archive.Lookup]; names, sizes and rejection reasons are read back from
// the central directory when asked for.
type Archive struct {
	ra   *sourceReaderAt
	size int64
	lim  Limits
	dir  dirEnd
	hash func(name string) uint64 // of the names in index

	index      []indexEntry    // non-directory records, sorted by name hash, then offset
	starts     []int64         // where each such record's local header starts, and the central directory, in order
	refs       []atomic.Uint64 // bitset over index: referenced by Lookup
	manifest   File            // the top-level manifest.xml
	manifestAt int             // position of manifest.xml in index
	regular    int             // number of accepted entries
	rejected   int             // number of rejected records, duplicates included

	pool inflaterPool
}

// indexEntry is what an Archive keeps of a non-directory record: the hash
// of its name and the offset of the record, shifted left by entryFlagBits,
// under two flags. Sorting by word sorts by offset, which is archive order.
type indexEntry struct {
	hash uint64
	word uint64
}

// Flags in the low bits of indexEntry.word.
const (
	entryRejected  = 1 << 0 // the entry is rejected (duplicates included)
	entryDuplicate = 1 << 1 // rejected because its name occurs more than once
	entryFlagBits  = 2
)

// maxArchiveSize keeps record offsets within indexEntry.word.
const maxArchiveSize = 1 << (64 - entryFlagBits)

func (e indexEntry) off() int64 { return int64(e.word >> entryFlagBits) }

// fewRecords is the number of records up to which they are read back one
// ReadAt each rather than by streaming the central directory.
const fewRecords = 256

// Open reads the central directory of the ZIP archive of the given size read
// through ra, classifies every entry and checks that a single top-level
// manifest.xml is present.
//
// The central directory is streamed, in reads of up to 256 KiB, and not
// kept: what stays in memory is a few dozen bytes per entry, whatever the
// length of the names.
//
// It fails with a permanent error wrapping ErrFormat (not a ZIP, truncated,
// inconsistent end records or record count), ErrTooManyEntries,
// ErrTotalSize, ErrNoManifest, ErrManifestDuplicate or ErrManifestRejected.
// An error returned by ra itself (other than io.EOF) is passed on wrapped,
// keeping whatever class it had. Entry-level problems do not fail Open; see
// [Archive.Rejected].
//
// ra must allow concurrent ReadAt calls if Files are read concurrently or
// Lookup is called concurrently, and must stay usable, and unchanged, as
// long as the Archive and its readers are: Lookup, Unreferenced and
// Rejected read the central directory again.
func Open(ra io.ReaderAt, size int64, lim Limits) (*Archive, error) {
	seed := maphash.MakeSeed()
	return openHashed(ra, size, lim, func(name string) uint64 { return maphash.String(seed, name) })
}

// openHashed is Open with the given name hash (tests force collisions).
func openHashed(ra io.ReaderAt, size int64, lim Limits, hash func(string) uint64) (*Archive, error) {
	lim = lim.withDefaults()
	if size < 0 || size > maxArchiveSize {
		return nil, formatErr("size %d out of range", size)
	}
	src := &sourceReaderAt{ra: ra, size: size}
	d, err := readDirEnd(src, size)
	if err != nil {
		return nil, readError(err)
	}
	// The declared count is a lower bound of the real one even when it is
	// only the low 16 bits of it (no ZIP64 end record).
	if d.records > uint64(lim.MaxEntries) {
		return nil, errclass.Permanentf("%w: more than %d", ErrTooManyEntries, lim.MaxEntries)
	}
	a := &Archive{ra: src, size: size, lim: lim, dir: d, hash: hash, manifestAt: -1}
	if err := a.scan(); err != nil {
		return nil, err
	}
	return a, nil
}

// scan reads the central directory once, sorting every record into ignored
// (directories), rejected or accepted, then finds duplicate names and checks
// the total size and the manifest.
func (a *Archive) scan() error {
	log := a.lim.Logger
	d := a.dir
	a.index = make([]indexEntry, 0, min(d.records, uint64(a.lim.MaxEntries), uint64(d.end-d.start)/lenDirHeader))
	var (
		rec            dirRecord
		records        int
		spans          []span // where each record's local header and data lie
		total          sizeSum
		manifests      int
		manifestOff    int64
		manifestReason error
		nestedManifest string
	)
	sc := newDirScanner(a.ra, d)
	for {
		ok, err := sc.next(&rec)
		if err != nil {
			return readError(err)
		}
		if !ok {
			break
		}
		records++
		if records > a.lim.MaxEntries {
			return errclass.Permanentf("%w: more than %d", ErrTooManyEntries, a.lim.MaxEntries)
		}
		name := recordKey(&rec)
		if isDir(name, rec.ext) {
			continue
		}
		if rec.header >= 0 {
			spans = append(spans, span{rec.header, rec.header + lenLocal + int64(min(rec.csize, math.MaxInt64/2))})
		}
		e := indexEntry{hash: a.hash(name), word: uint64(rec.off) << entryFlagBits}
		reason := a.check(name, &rec)
		if name == ManifestName {
			manifests++
			if manifests == 1 {
				a.manifest, manifestOff, manifestReason = *a.newFile(name, &rec), rec.off, reason
			}
		}
		if reason != nil {
			e.word |= entryRejected
			a.rejected++
			log.Debug("unzip: entry rejected", "name", name, "reason", reason)
		} else {
			a.regular++
			total.add(rec.usize)
			if nestedManifest == "" && strings.HasSuffix(name, "/"+ManifestName) {
				nestedManifest = name
			}
		}
		a.index = append(a.index, e)
	}
	// Without a ZIP64 end record the count may have been truncated to 16
	// bits by the writer: compare only those.
	if d.zip64 && uint64(records) != d.records || !d.zip64 && uint16(records) != uint16(d.records) {
		return formatErr("%d central-directory records, the end record says %d", records, d.records)
	}
	if cap(a.index) > len(a.index)+len(a.index)/8 {
		a.index = slices.Clone(a.index) // the count was truncated, or many directories
	}
	slices.SortFunc(a.index, func(x, y indexEntry) int {
		return cmp.Or(cmp.Compare(x.hash, y.hash), cmp.Compare(x.word, y.word))
	})
	dups, err := a.markDuplicates(&total)
	if err != nil {
		return err
	}
	if total.over(a.lim.MaxTotalSize) {
		return errclass.Permanentf("%w: over %d bytes", ErrTotalSize, a.lim.MaxTotalSize)
	}
	if err := overlaps(spans); err != nil {
		return err
	}
	a.starts = make([]int64, 0, len(spans)+1)
	for _, sp := range spans {
		a.starts = append(a.starts, sp.start)
	}
	a.starts = append(a.starts, d.start)
	slices.Sort(a.starts)
	if limit := max(a.lim.MaxRatio*float64(a.size), TotalRatioExemptSize); total.hi != 0 || float64(total.lo) > limit {
		return errclass.Permanentf("%w: the entries declare %d bytes in all, more than %g times the package's %d bytes",
			ErrRatio, total.lo, a.lim.MaxRatio, a.size)
	}

	switch {
	case manifests > 1:
		return errclass.Permanentf("%w: %w", ErrManifestDuplicate, duplicateError(ManifestName))
	case manifests == 1 && manifestReason != nil:
		return errclass.Permanentf("%w: %w", ErrManifestRejected, manifestReason)
	case manifests == 0 && nestedManifest != "":
		return errclass.Permanentf("%w (found %q, not at the top level)", ErrNoManifest, nestedManifest)
	case manifests == 0:
		return errclass.Permanentf("%w", ErrNoManifest)
	}
	a.manifestAt = a.position(a.hash(ManifestName), manifestOff)
	a.refs = make([]atomic.Uint64, (len(a.index)+63)/64)

	if a.rejected > 0 {
		log.Warn("unzip: entries rejected", "rejected", a.rejected, "duplicates", dups, "accepted", a.regular)
	}
	log.Debug("unzip: archive opened", "records", records, "accepted", a.regular,
		"rejected", a.rejected, "total_size", total.lo)
	return nil
}

// span is the bytes of one entry in the archive: its local header (the
// fixed part) and its compressed data, [start, end).
type span struct{ start, end int64 }

// next returns where the next thing after the local header at off starts:
// another entry's local header or the central directory. An entry's data
// ends before it: the local header's name and extra field, unknown until
// the entry is read, may not carry its data into another entry's.
func (a *Archive) next(off int64) int64 {
	i, found := slices.BinarySearch(a.starts, off)
	if found {
		i++
	}
	if i == len(a.starts) {
		return a.size
	}
	return a.starts[i]
}

// overlaps fails with ErrOverlap when two spans share bytes: several
// records that point at the same compressed bytes make a small package
// write much more than it holds. (A span that runs past the archive's end
// is the entry's own failure, when it is read.)
func overlaps(spans []span) error {
	slices.SortFunc(spans, func(x, y span) int { return cmp.Compare(x.start, y.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return errclass.Permanentf("%w: the entries at offsets %d and %d share bytes", ErrOverlap, spans[i-1].start, spans[i].start)
		}
	}
	return nil
}

// markDuplicates flags every record whose name occurs more than once (all
// copies, whatever else was wrong with them) and takes the accepted ones
// off the count and the total. Names are compared by reading the records
// back, for each run of equal hashes only. It returns the number of
// duplicated names.
func (a *Archive) markDuplicates(total *sizeSum) (int, error) {
	names := 0
	for i := 0; i < len(a.index); {
		j := i + 1
		for j < len(a.index) && a.index[j].hash == a.index[i].hash {
			j++
		}
		if j-i > 1 {
			n, err := a.markRun(a.index[i:j], total)
			if err != nil {
				return 0, err
			}
			names += n
		}
		i = j
	}
	return names, nil
}

// markRun handles records sharing a name hash: almost always copies of one
// name, so each pass takes the first remaining record's name and sets aside
// the records with another name (a hash collision) for the next pass.
func (a *Archive) markRun(run []indexEntry, total *sizeSum) (int, error) {
	type copyOf struct {
		k     int    // position in run
		usize uint64 // declared size
	}
	names := 0
	rest := make([]int, len(run))
	for k := range rest {
		rest[k] = k
	}
	for len(rest) > 1 {
		first, err := a.recordAt(run[rest[0]].off(), 0)
		if err != nil {
			return 0, readError(err)
		}
		name := recordKey(&first)
		same := []copyOf{{rest[0], first.usize}}
		var other []int
		for _, k := range rest[1:] {
			rec, err := a.recordAt(run[k].off(), len(name))
			if err != nil {
				return 0, readError(err)
			}
			if recordKey(&rec) == name {
				same = append(same, copyOf{k, rec.usize})
			} else {
				other = append(other, k)
			}
		}
		if len(same) > 1 {
			names++
			for _, c := range same {
				e := &run[c.k]
				if e.word&entryRejected == 0 {
					a.regular--
					a.rejected++
					total.sub(c.usize)
				}
				e.word |= entryRejected | entryDuplicate
			}
			a.lim.Logger.Debug("unzip: entry rejected", "name", name, "reason", duplicateError(name), "copies", len(same))
		}
		rest = other
	}
	return names, nil
}

// position returns the position in index of the record at off, whose name
// has the given hash.
func (a *Archive) position(hash uint64, off int64) int {
	i, _ := slices.BinarySearchFunc(a.index, hash, func(e indexEntry, h uint64) int { return cmp.Compare(e.hash, h) })
	for ; i < len(a.index) && a.index[i].hash == hash; i++ {
		if a.index[i].off() == off {
			return i
		}
	}
	return -1
}

// recordAt reads the central-directory record at off; nameLen is its
// expected name length (a hint).
func (a *Archive) recordAt(off int64, nameLen int) (dirRecord, error) {
	return readRecordAt(a.ra, off, a.dir.base, nameLen)
}

// records calls fn for the records at the given positions of index, in
// archive order (ps is sorted in place). A few records are read one by one;
// more, by streaming the central directory.
func (a *Archive) records(ps []int, fn func(i int, rec *dirRecord)) error {
	slices.SortFunc(ps, func(x, y int) int { return cmp.Compare(a.index[x].word, a.index[y].word) })
	if len(ps) <= fewRecords {
		for _, i := range ps {
			rec, err := a.recordAt(a.index[i].off(), 0)
			if err != nil {
				return err
			}
			fn(i, &rec)
		}
		return nil
	}
	sc := newDirScanner(a.ra, a.dir)
	var rec dirRecord
	for k := 0; k < len(ps); {
		ok, err := sc.next(&rec)
		if err != nil {
			return err
		}
		if !ok {
			return formatErr("central directory changed: no record at offset %d", a.index[ps[k]].off())
		}
		if rec.off == a.index[ps[k]].off() {
			fn(ps[k], &rec)
			k++
		}
	}
	return nil
}

// sizeSum is a 128-bit sum of declared sizes, which are up to 2^63 each and
// some of which are taken off again once duplicates are known.
type sizeSum struct{ hi, lo uint64 }

func (s *sizeSum) add(v uint64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, v, 0)
	s.hi += carry
}

func (s *sizeSum) sub(v uint64) {
	var borrow uint64
	s.lo, borrow = bits.Sub64(s.lo, v, 0)
	s.hi -= borrow
}

func (s sizeSum) over(limit int64) bool { return s.hi != 0 || s.lo > uint64(limit) }

func duplicateError(name string) error {
	return errclass.Permanentf("unzip: entry %q: %w", name, ErrDuplicate)
}

// check returns why an entry (not a directory) must be rejected, or nil.
func (a *Archive) check(name string, rec *dirRecord) error {
	return checkEntry(name, nonRegular(rec.ext), rec.flags, rec.method, rec.usize, rec.csize, a.lim)
}

// checkEntry returns why an entry (not a directory) must be rejected by
// what its header says, or nil: the checks Archive applies to the central
// directory's records, and LocalScanner and LocalOpener to local headers.
// notRegular is why the entry's external attributes make it other than a
// regular file (see nonRegular): "" when they do not, or when there are
// none, as in a local header.
func checkEntry(name, notRegular string, flags, method uint16, usize, csize uint64, lim Limits) error {
	if why := unsafeName(name); why != "" {
		return errclass.Permanentf("unzip: entry %q: %w: %s", name, ErrUnsafePath, why)
	}
	if notRegular != "" {
		return errclass.Permanentf("unzip: entry %q: %w: %s", name, ErrNotRegular, notRegular)
	}
	if flags&(flagEncrypted|flagStrongEncryption) != 0 {
		return errclass.Permanentf("unzip: entry %q: %w", name, ErrEncrypted)
	}
	if method != zip.Store && method != zip.Deflate {
		return errclass.Permanentf("unzip: entry %q: %w: method %d", name, ErrMethod, method)
	}
	if usize > uint64(lim.MaxEntrySize) {
		return errclass.Permanentf("unzip: entry %q: %w: %d bytes declared, limit %d",
			name, ErrEntrySize, usize, lim.MaxEntrySize)
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

// ZIP general-purpose flag bits.
const (
	flagEncrypted        = 0x1
	flagDescriptor       = 0x8 // sizes and CRC-32 follow the data
	flagStrongEncryption = 0x40
)

// Manifest streams the top-level manifest.xml, with the same checks as
// [File.Open].
func (a *Archive) Manifest() (io.ReadCloser, error) {
	return a.ManifestFile().Open()
}

// ManifestFile returns the top-level manifest.xml entry. It does not mark
// anything as referenced.
func (a *Archive) ManifestFile() *File {
	f := a.manifest
	return &f
}

// Lookup maps a manifest rs:md path to its entry: the path's key (see
// PathKey: backslashes made slashes, one leading "/" stripped, so a path
// without it, as resync writes, is accepted too) must equal an entry's key
// (see EntryKey) exactly, with no other cleaning. Manifest paths are
// normalised as entry names are, so that a path and the entry it names
// agree whichever separator the producer used in each. A path whose key is
// unsafe as an entry's would be (a ".." segment, still absolute, NUL or
// another control character, a drive letter, empty) fails with
// ErrUnsafePath. A path
// naming no entry (or only a directory) fails with ErrNotInPackage; a path
// naming a rejected entry fails with the rejection reason. All these errors
// are permanent. On success the entry is marked as referenced (see
// [Archive.Unreferenced]).
//
// Lookup reads the entry's central-directory record again (one ReadAt,
// usually); an error of the archive's ReaderAt is passed on wrapped,
// keeping its class.
func (a *Archive) Lookup(manifestPath string) (*File, error) {
	name := PathKey(manifestPath)
	if why := unsafeName(name); why != "" {
		return nil, errclass.Permanentf("unzip: manifest path %q: %w: %s", manifestPath, ErrUnsafePath, why)
	}
	h := a.hash(name)
	i, _ := slices.BinarySearchFunc(a.index, h, func(e indexEntry, h uint64) int { return cmp.Compare(e.hash, h) })
	for ; i < len(a.index) && a.index[i].hash == h; i++ {
		e := a.index[i]
		rec, err := a.recordAt(e.off(), len(name))
		if err != nil {
			return nil, readError(err)
		}
		if recordKey(&rec) != name {
			continue // another name with the same hash
		}
		if e.word&entryDuplicate != 0 {
			return nil, duplicateError(name)
		}
		if err := a.check(name, &rec); err != nil {
			return nil, err
		}
		a.refs[i/64].Or(1 << (i % 64))
		return a.newFile(name, &rec), nil
	}
	return nil, errclass.Permanentf("unzip: manifest path %q: %w", manifestPath, ErrNotInPackage)
}

// Unreferenced lists, in archive order, the accepted entries other than
// manifest.xml that no Lookup has referenced so far: entries absent from the
// manifest, which the caller reports and skips.
//
// The names are read back from the central directory (record by record
// when they are few, else in one stream). Should that fail (an error of the
// archive's ReaderAt), the names read so far are returned and the error is
// logged at Warn.
func (a *Archive) Unreferenced() []string {
	var ps []int
	for i, e := range a.index {
		if i != a.manifestAt && e.word&entryRejected == 0 && a.refs[i/64].Load()&(1<<(i%64)) == 0 {
			ps = append(ps, i)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, 0, len(ps))
	err := a.records(ps, func(_ int, rec *dirRecord) { out = append(out, recordKey(rec)) })
	if err != nil {
		a.lim.Logger.Warn("unzip: listing unreferenced entries failed", "error", readError(err),
			"listed", len(out), "unreferenced", len(ps))
	}
	return out
}

// Rejected returns the rejected entries: name -> reason (a permanent error
// wrapping one of the entry-level sentinels). The map is the caller's.
//
// The reasons are worked out again from the central directory, as for
// Unreferenced (and with the same behaviour on a read error).
func (a *Archive) Rejected() map[string]error {
	m := make(map[string]error)
	if a.rejected == 0 {
		return m
	}
	var ps []int
	for i, e := range a.index {
		if e.word&entryRejected != 0 {
			ps = append(ps, i)
		}
	}
	err := a.records(ps, func(i int, rec *dirRecord) {
		name := recordKey(rec)
		if a.index[i].word&entryDuplicate != 0 {
			m[name] = duplicateError(name)
		} else if reason := a.check(name, rec); reason != nil {
			m[name] = reason
		}
	})
	if err != nil {
		a.lim.Logger.Warn("unzip: listing rejected entries failed", "error", readError(err),
			"listed", len(m), "rejected", len(ps))
	}
	return m
}

// Len returns the number of accepted regular entries, manifest.xml included
// (directories and rejected entries are not counted).
func (a *Archive) Len() int { return a.regular }

// File is an accepted regular entry of an Archive. Its fields describe the
// central-directory record and must not be changed.
type File struct {
	Name           string    // the entry's key (see EntryKey)
	Size           int64     // declared uncompressed size
	CompressedSize int64     // declared compressed size
	Method         uint16    // zip.Store or zip.Deflate
	CRC32          uint32    // declared CRC-32 (IEEE)
	Modified       time.Time // modification time, decoded as archive/zip does

	a      *Archive
	header int64 // offset of the local header; -1 if out of range
}

// HeaderOffset is where the entry's local header is in the archive (-1
// when its record gives an offset out of range).
func (f *File) HeaderOffset() int64 { return f.header }

// newFile returns the File of an accepted record.
func (a *Archive) newFile(name string, rec *dirRecord) *File {
	return &File{
		Name:           name,
		Size:           int64(rec.usize),
		CompressedSize: int64(rec.csize),
		Method:         rec.method,
		CRC32:          rec.crc,
		Modified:       modTime(rec.dosDate, rec.dosTime, rec.extra),
		a:              a,
		header:         rec.header,
	}
}
