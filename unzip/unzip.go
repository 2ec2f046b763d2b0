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
package unzip

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
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

// ManifestName is the name of the manifest entry at the top level of a dump
// package.
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
)

// Entry-level errors: the reasons an entry is rejected (see
// [Archive.Rejected]) or a lookup fails. All are returned as permanent errors.
var (
	// ErrUnsafePath means a name that could escape a destination directory
	// or is otherwise unusable: empty, absolute, a ".." segment, a drive
	// letter, a backslash, or a control character.
	ErrUnsafePath = errors.New("unzip: unsafe name")
	// ErrNotRegular means a symlink, device, FIFO, socket or other
	// non-regular entry.
	ErrNotRegular = errors.New("unzip: not a regular file")
	// ErrDuplicate means the name occurs more than once in the archive; every
	// copy is rejected because the name is ambiguous.
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
	// RatioExemptSize are exempt.
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
type Archive struct {
	ra   *sourceReaderAt
	size int64
	lim  Limits
	zr   *zip.Reader

	byName   map[string]int   // accepted entry name -> index in zr.File
	rejected map[string]error // rejected entry name -> reason
	manifest int              // index of manifest.xml in zr.File
	regular  int              // number of accepted entries
	refs     []atomic.Uint64  // bitset over zr.File: referenced by Lookup

	pool sync.Pool // of *inflater
}

// errTooMany stops the central-directory scan once MaxEntries is exceeded.
var errTooMany = errors.New("unzip: entry count cap reached")

// Open reads the central directory of the ZIP archive of the given size read
// through ra, classifies every entry and checks that a single top-level
// manifest.xml is present.
//
// It fails with a permanent error wrapping ErrFormat (not a ZIP, truncated),
// ErrTooManyEntries, ErrTotalSize, ErrNoManifest, ErrManifestDuplicate or
// ErrManifestRejected. An error returned by ra itself (other than io.EOF) is
// passed on wrapped, keeping whatever class it had. Entry-level problems do
// not fail Open; see [Archive.Rejected].
//
// ra must allow concurrent ReadAt calls if Files are read concurrently, and
// must stay usable as long as the Archive and its readers are.
func Open(ra io.ReaderAt, size int64, lim Limits) (*Archive, error) {
	lim = lim.withDefaults()
	if size < 0 {
		return nil, errclass.Permanentf("%w: negative size %d", ErrFormat, size)
	}
	src := &sourceReaderAt{ra: ra, size: size}
	count := 0
	zr, err := zip.NewReaderWithOptions(src, size, zip.ReaderOptions{
		NameDecoder: func(*zip.FileHeader) error {
			count++
			if count > lim.MaxEntries {
				return errTooMany
			}
			return nil
		},
	})
	if err != nil {
		var se *sourceError
		switch {
		case errors.Is(err, errTooMany):
			return nil, errclass.Permanentf("%w: more than %d", ErrTooManyEntries, lim.MaxEntries)
		case errors.As(err, &se):
			return nil, fmt.Errorf("unzip: reading archive: %w", se.err)
		default:
			return nil, errclass.Permanentf("%w: %w", ErrFormat, err)
		}
	}
	a := &Archive{
		ra:       src,
		size:     size,
		lim:      lim,
		zr:       zr,
		byName:   make(map[string]int, len(zr.File)),
		rejected: make(map[string]error),
		manifest: -1,
		refs:     make([]atomic.Uint64, (len(zr.File)+63)/64),
	}
	if err := a.classify(); err != nil {
		return nil, err
	}
	return a, nil
}

// classify sorts every entry into ignored (directories), rejected or
// accepted, then checks the total size and the manifest.
func (a *Archive) classify() error {
	log := a.lim.Logger
	dups := 0
	nestedManifest := ""
	for i, f := range a.zr.File {
		if isDir(&f.FileHeader) {
			continue
		}
		_, accepted := a.byName[f.Name]
		r, rejected := a.rejected[f.Name]
		if accepted || rejected {
			// Seen before: every copy of the name is rejected, whatever
			// else was wrong with the earlier one.
			delete(a.byName, f.Name)
			if !errors.Is(r, ErrDuplicate) {
				a.reject(f.Name, errclass.Permanentf("unzip: entry %q: %w", f.Name, ErrDuplicate))
				dups++
			}
			continue
		}
		if err := a.check(&f.FileHeader); err != nil {
			a.reject(f.Name, err)
			continue
		}
		a.byName[f.Name] = i
		if nestedManifest == "" && strings.HasSuffix(f.Name, "/"+ManifestName) {
			nestedManifest = f.Name
		}
	}

	var total int64
	for _, i := range a.byName {
		s := int64(a.zr.File[i].UncompressedSize64) // checked <= MaxEntrySize
		if s > a.lim.MaxTotalSize-total {
			return errclass.Permanentf("%w: over %d bytes", ErrTotalSize, a.lim.MaxTotalSize)
		}
		total += s
	}
	a.regular = len(a.byName)

	if r, ok := a.rejected[ManifestName]; ok {
		if errors.Is(r, ErrDuplicate) {
			return errclass.Permanentf("%w: %w", ErrManifestDuplicate, r)
		}
		return errclass.Permanentf("%w: %w", ErrManifestRejected, r)
	}
	i, ok := a.byName[ManifestName]
	if !ok {
		if nestedManifest != "" {
			return errclass.Permanentf("%w (found %q, not at the top level)", ErrNoManifest, nestedManifest)
		}
		return errclass.Permanentf("%w", ErrNoManifest)
	}
	a.manifest = i

	if len(a.rejected) > 0 {
		log.Warn("unzip: entries rejected", "rejected", len(a.rejected), "duplicates", dups, "accepted", a.regular)
	}
	log.Debug("unzip: archive opened", "records", len(a.zr.File), "accepted", a.regular,
		"rejected", len(a.rejected), "total_size", total)
	return nil
}

func (a *Archive) reject(name string, reason error) {
	a.rejected[name] = reason
	a.lim.Logger.Debug("unzip: entry rejected", "name", name, "reason", reason)
}

// check returns why an entry (not a directory) must be rejected, or nil.
func (a *Archive) check(h *zip.FileHeader) error {
	name := h.Name
	if why := unsafeName(name); why != "" {
		return errclass.Permanentf("unzip: entry %q: %w: %s", name, ErrUnsafePath, why)
	}
	if why := nonRegular(h); why != "" {
		return errclass.Permanentf("unzip: entry %q: %w: %s", name, ErrNotRegular, why)
	}
	if h.Flags&(flagEncrypted|flagStrongEncryption) != 0 {
		return errclass.Permanentf("unzip: entry %q: %w", name, ErrEncrypted)
	}
	if h.Method != zip.Store && h.Method != zip.Deflate {
		return errclass.Permanentf("unzip: entry %q: %w: method %d", name, ErrMethod, h.Method)
	}
	usize, csize := h.UncompressedSize64, h.CompressedSize64
	if usize > uint64(a.lim.MaxEntrySize) {
		return errclass.Permanentf("unzip: entry %q: %w: %d bytes declared, limit %d",
			name, ErrEntrySize, usize, a.lim.MaxEntrySize)
	}
	if csize > math.MaxInt64 {
		return errclass.Permanentf("unzip: entry %q: %w: compressed size %d", name, ErrFormat, csize)
	}
	if h.Method == zip.Store && usize != csize {
		return errclass.Permanentf("unzip: entry %q: %w: stored entry declares %d bytes compressed, %d uncompressed",
			name, ErrSizeMismatch, csize, usize)
	}
	if usize >= RatioExemptSize && float64(usize) > a.lim.MaxRatio*float64(csize) {
		return errclass.Permanentf("unzip: entry %q: %w: %d bytes from %d declared, limit %g",
			name, ErrRatio, usize, csize, a.lim.MaxRatio)
	}
	return nil
}

// ZIP general-purpose flag bits.
const (
	flagEncrypted        = 0x1
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
	return a.file(a.manifest)
}

// Lookup maps a manifest rs:md path to its entry. One leading "/" is
// stripped (a path without it, as resync writes, is accepted too); the rest
// must equal an entry name exactly, with no cleaning. A path that is unsafe
// as an entry name would be (a ".." segment, a backslash, NUL or another
// control character, a drive letter, empty) fails with ErrUnsafePath. A path
// naming no entry (or only a directory) fails with ErrNotInPackage; a path
// naming a rejected entry fails with the rejection reason. All these errors
// are permanent. On success the entry is marked as referenced (see
// [Archive.Unreferenced]).
func (a *Archive) Lookup(manifestPath string) (*File, error) {
	name := strings.TrimPrefix(manifestPath, "/")
	if why := unsafeName(name); why != "" {
		return nil, errclass.Permanentf("unzip: manifest path %q: %w: %s", manifestPath, ErrUnsafePath, why)
	}
	if r, ok := a.rejected[name]; ok {
		return nil, r
	}
	i, ok := a.byName[name]
	if !ok {
		return nil, errclass.Permanentf("unzip: manifest path %q: %w", manifestPath, ErrNotInPackage)
	}
	a.refs[i/64].Or(1 << (i % 64))
	return a.file(i), nil
}

// Unreferenced lists, in archive order, the accepted entries other than
// manifest.xml that no Lookup has referenced so far: entries absent from the
// manifest, which the caller reports and skips.
func (a *Archive) Unreferenced() []string {
	var out []string
	for i, f := range a.zr.File {
		if i == a.manifest || a.refs[i/64].Load()&(1<<(i%64)) != 0 {
			continue
		}
		if j, ok := a.byName[f.Name]; ok && j == i {
			out = append(out, f.Name)
		}
	}
	return out
}

// Rejected returns a copy of the rejected entries: name -> reason (a
// permanent error wrapping one of the entry-level sentinels).
func (a *Archive) Rejected() map[string]error {
	m := make(map[string]error, len(a.rejected))
	for k, v := range a.rejected {
		m[k] = v
	}
	return m
}

// Len returns the number of accepted regular entries, manifest.xml included
// (directories and rejected entries are not counted).
func (a *Archive) Len() int { return a.regular }

// File is an accepted regular entry of an Archive. Its fields describe the
// central-directory record and must not be changed.
type File struct {
	Name           string    // entry name, as in the archive
	Size           int64     // declared uncompressed size
	CompressedSize int64     // declared compressed size
	Method         uint16    // zip.Store or zip.Deflate
	CRC32          uint32    // declared CRC-32 (IEEE)
	Modified       time.Time // modification time, as the library decodes it

	a  *Archive
	zf *zip.File
}

func (a *Archive) file(i int) *File {
	zf := a.zr.File[i]
	return &File{
		Name:           zf.Name,
		Size:           int64(zf.UncompressedSize64),
		CompressedSize: int64(zf.CompressedSize64),
		Method:         zf.Method,
		CRC32:          zf.CRC32,
		Modified:       zf.Modified,
		a:              a,
		zf:             zf,
	}
}
