package unzip

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zip"
	"github.com/rsharvest/rsharvest/errclass"
)

func open(t testing.TB, b []byte, lim Limits) *Archive {
	t.Helper()
	a, err := Open(bytes.NewReader(b), int64(len(b)), lim)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return a
}

// readAll reads f fully and returns the bytes and the read error (nil at a
// clean EOF).
func readAll(t testing.TB, f *File) ([]byte, error) {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
	if !errclass.IsPermanent(err) {
		t.Fatalf("error %v is %v, want permanent", err, errclass.Of(err))
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestEntryRejections has one case per entry-level item of the checklist:
// the archive opens, the entry is rejected with its reason (or ignored, or
// accepted), and Lookup returns the same.
func TestEntryRejections(t *testing.T) {
	body := []byte("hello")
	unix := func(name string, mode uint32) rawEntry {
		return rawEntry{name: name, body: body, method: zip.Store, creator: creatorUnix, ext: mode << 16}
	}
	tests := []struct {
		name    string
		entries []rawEntry
		lim     Limits
		entry   string // name in the archive (key of Rejected)
		lookup  string // manifest path to look up; "" means "/"+entry
		want    error  // nil: accepted
		ignored bool   // neither accepted nor rejected (directories)
	}{
		{name: "dotdot", entries: []rawEntry{file("../evil", body, zip.Store)}, entry: "../evil", want: ErrUnsafePath},
		{name: "dotdot inside", entries: []rawEntry{file("a/../../evil", body, zip.Store)}, entry: "a/../../evil", want: ErrUnsafePath},
		{name: "dotdot last", entries: []rawEntry{file("a/..", body, zip.Store)}, entry: "a/..", want: ErrUnsafePath},
		{name: "absolute after one leading slash", entries: []rawEntry{file("//etc/passwd", body, zip.Store)}, entry: "/etc/passwd", want: ErrUnsafePath},
		{name: "leading slash (DSpace)", entries: []rawEntry{file("/resources/123456789_101/1_file.pdf", body, zip.Deflate)}, entry: "resources/123456789_101/1_file.pdf"},
		{name: "leading backslash (DSpace on Windows)", entries: []rawEntry{file(`\resources\1_file.pdf`, body, zip.Deflate)}, entry: "resources/1_file.pdf", lookup: `\resources\1_file.pdf`},
		{name: "duplicate after normalisation", entries: []rawEntry{file("/d.txt", body, zip.Store), file("d.txt", body, zip.Store)}, entry: "d.txt", want: ErrDuplicate},
		{name: "duplicate after backslashes", entries: []rawEntry{file(`a\b`, body, zip.Store), file("a/b", body, zip.Store)}, entry: "a/b", want: ErrDuplicate},
		{name: "CP437 name without the UTF-8 flag", entries: []rawEntry{{name: "caf\x82 \x9a.txt", body: body, legacyName: true}}, entry: "café Ü.txt"},
		{name: "invalid UTF-8 with the flag left alone", entries: []rawEntry{{name: "caf\x82.txt", body: body}}, entry: "caf\x82.txt"},
		{name: "UTF-8 name with the flag", entries: []rawEntry{{name: "café.txt", body: body, flags: 0x800}}, entry: "café.txt"},
		{name: "drive backslash", entries: []rawEntry{file(`C:\x`, body, zip.Store)}, entry: "C:/x", want: ErrUnsafePath},
		{name: "drive relative", entries: []rawEntry{file("C:x", body, zip.Store)}, entry: "C:x", want: ErrUnsafePath},
		{name: "drive slash", entries: []rawEntry{file("c:/x", body, zip.Store)}, entry: "c:/x", want: ErrUnsafePath},
		{name: "UNC", entries: []rawEntry{file(`\\server\share\x`, body, zip.Store)}, entry: "/server/share/x", want: ErrUnsafePath},
		{name: "backslash is a separator", entries: []rawEntry{file(`a\b`, body, zip.Store)}, entry: "a/b"},
		{name: "backslash dotdot", entries: []rawEntry{file(`..\evil`, body, zip.Store)}, entry: "../evil", want: ErrUnsafePath},
		{name: "backslash dotdot inside", entries: []rawEntry{file(`a\..\..\x`, body, zip.Store)}, entry: "a/../../x", want: ErrUnsafePath},
		{name: "NUL", entries: []rawEntry{file("a\x00b", body, zip.Store)}, entry: "a\x00b", want: ErrUnsafePath},
		{name: "newline", entries: []rawEntry{file("a\nb", body, zip.Store)}, entry: "a\nb", want: ErrUnsafePath},
		{name: "DEL", entries: []rawEntry{file("a\x7f", body, zip.Store)}, entry: "a\x7f", want: ErrUnsafePath},
		{name: "C1 control", entries: []rawEntry{file("a\u0085b", body, zip.Store)}, entry: "a\u0085b", want: ErrUnsafePath},
		{name: "empty name", entries: []rawEntry{file("", body, zip.Store)}, entry: "", lookup: "/", want: ErrUnsafePath},
		{name: "symlink", entries: []rawEntry{unix("link", 0o120777)}, entry: "link", want: ErrNotRegular},
		{name: "char device", entries: []rawEntry{unix("tty", 0o020644)}, entry: "tty", want: ErrNotRegular},
		{name: "block device", entries: []rawEntry{unix("sda", 0o060644)}, entry: "sda", want: ErrNotRegular},
		{name: "FIFO", entries: []rawEntry{unix("fifo", 0o010644)}, entry: "fifo", want: ErrNotRegular},
		{name: "socket", entries: []rawEntry{unix("sock", 0o140644)}, entry: "sock", want: ErrNotRegular},
		{name: "unknown unix type", entries: []rawEntry{unix("odd", 0o170644)}, entry: "odd", want: ErrNotRegular},
		{name: "symlink bits from a FAT creator", entries: []rawEntry{{name: "link", body: body, creator: creatorFAT, ext: 0o120777 << 16}}, entry: "link", want: ErrNotRegular},
		{name: "NTFS reparse point", entries: []rawEntry{{name: "junction", body: body, creator: creatorNTFS, ext: 0x400}}, entry: "junction", want: ErrNotRegular},
		{name: "DOS device", entries: []rawEntry{{name: "con", body: body, creator: creatorFAT, ext: 0x40}}, entry: "con", want: ErrNotRegular},
		{name: "directory ignored", entries: []rawEntry{unix("sub/", 0o040755)}, entry: "sub/", want: ErrNotInPackage, ignored: true},
		{name: "directory by mode ignored", entries: []rawEntry{unix("d", 0o040755)}, entry: "d", want: ErrNotInPackage, ignored: true},
		{name: "DOS directory ignored", entries: []rawEntry{{name: "d", creator: creatorNTFS, ext: 0x10}}, entry: "d", want: ErrNotInPackage, ignored: true},
		{name: "dotdot directory ignored", entries: []rawEntry{unix("../", 0o040755)}, entry: "../", lookup: "/a", want: ErrNotInPackage, ignored: true},
		{name: "duplicate", entries: []rawEntry{file("a", body, zip.Store), file("a", []byte("other"), zip.Deflate)}, entry: "a", want: ErrDuplicate},
		{name: "duplicate thrice", entries: []rawEntry{file("a", body, zip.Store), file("a", body, zip.Store), file("a", body, zip.Store)}, entry: "a", want: ErrDuplicate},
		{name: "duplicate of a rejected entry", entries: []rawEntry{unix("a", 0o120777), file("a", body, zip.Store)}, entry: "a", want: ErrDuplicate},
		{
			name:    "duplicates do not count toward the total",
			entries: []rawEntry{file("a", make([]byte, 600), zip.Deflate), file("a", make([]byte, 600), zip.Deflate)},
			lim:     Limits{MaxTotalSize: 700}, entry: "a", want: ErrDuplicate,
		},
		{name: "declared size over cap", entries: []rawEntry{file("big", make([]byte, 2000), zip.Deflate)}, lim: Limits{MaxEntrySize: 1000}, entry: "big", want: ErrEntrySize},
		{name: "declared size lies over cap", entries: []rawEntry{{name: "big", body: body, patch: func(h *rawHeader) { h.usize = 1 << 31; h.csize = 1 << 31 }}}, lim: Limits{MaxEntrySize: 1 << 30}, entry: "big", want: ErrEntrySize},
		{name: "declared ratio over cap", entries: []rawEntry{file("zeros", make([]byte, 2<<20), zip.Deflate)}, lim: Limits{MaxRatio: 10}, entry: "zeros", want: ErrRatio},
		{name: "declared ratio, no compressed bytes", entries: []rawEntry{{name: "z", body: body, method: zip.Deflate, patch: func(h *rawHeader) { h.usize = 1 << 20; h.csize = 0 }}}, entry: "z", want: ErrRatio},
		{name: "small entries exempt from ratio", entries: []rawEntry{file("zeros", make([]byte, 1<<20-1), zip.Deflate)}, lim: Limits{MaxRatio: 10}, entry: "zeros"},
		{name: "encrypted", entries: []rawEntry{{name: "secret", body: body, flags: 0x1}}, entry: "secret", want: ErrEncrypted},
		{name: "strong encryption", entries: []rawEntry{{name: "secret", body: body, flags: 0x41}}, entry: "secret", want: ErrEncrypted},
		{name: "bzip2", entries: []rawEntry{{name: "b", body: body, method: 12}}, entry: "b", want: ErrMethod},
		{name: "deflate64", entries: []rawEntry{{name: "b", body: body, method: 9}}, entry: "b", want: zip.ErrAlgorithm},
		{name: "stored sizes differ", entries: []rawEntry{{name: "s", body: body, patch: func(h *rawHeader) { h.usize = 3 }}}, entry: "s", want: ErrSizeMismatch},
		{name: "plain name", entries: []rawEntry{file("r0001.dat", body, zip.Deflate)}, entry: "r0001.dat"},
		{name: "resync-style path", entries: []rawEntry{file("r0001.dat", body, zip.Deflate)}, entry: "r0001.dat", lookup: "r0001.dat"},
		{name: "spaces and non-ASCII", entries: []rawEntry{file("sub dir/café über.txt", body, zip.Store)}, entry: "sub dir/café über.txt"},
		{name: "dots inside a segment", entries: []rawEntry{file("a..b/..c/d..", body, zip.Store)}, entry: "a..b/..c/d.."},
		{name: "colon later in the name", entries: []rawEntry{file("ab:c", body, zip.Store)}, entry: "ab:c"},
		{name: "FAT creator, plain attributes", entries: []rawEntry{{name: "f", body: body, creator: creatorFAT, ext: 0x20}}, entry: "f"},
		{name: "Unix creator, no file type (as resync writes)", entries: []rawEntry{unix("f", 0o600)}, entry: "f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := open(t, withManifest(tt.entries...).build(t), tt.lim)
			lookup := tt.lookup
			if lookup == "" {
				lookup = "/" + tt.entry
			}
			f, err := a.Lookup(lookup)
			wantErr(t, err, tt.want)
			reason, rejected := a.Rejected()[tt.entry]
			switch {
			case tt.ignored:
				if rejected {
					t.Fatalf("directory %q rejected: %v", tt.entry, reason)
				}
				if a.Len() != 1 {
					t.Fatalf("Len = %d, want 1 (manifest only)", a.Len())
				}
			case tt.want == nil:
				if rejected {
					t.Fatalf("%q rejected: %v", tt.entry, reason)
				}
				if f.Name != tt.entry {
					t.Fatalf("Lookup returned %q", f.Name)
				}
				got, err := readAll(t, f)
				wantErr(t, err, nil)
				if int64(len(got)) != f.Size {
					t.Fatalf("read %d bytes, Size %d", len(got), f.Size)
				}
			default:
				if !rejected {
					t.Fatalf("%q not rejected; Rejected() = %v", tt.entry, a.Rejected())
				}
				wantErr(t, reason, tt.want)
				if a.Len() != 1 {
					t.Fatalf("Len = %d, want 1 (manifest only)", a.Len())
				}
				if u := a.Unreferenced(); len(u) != 0 {
					t.Fatalf("Unreferenced = %q, want none", u)
				}
			}
		})
	}
}

// TestOpenErrors has one case per archive-level item: Open fails with a
// permanent error wrapping the sentinel.
func TestOpenErrors(t *testing.T) {
	good := withManifest(file("a", []byte("aaaa"), zip.Deflate), file("b", []byte("bbbb"), zip.Store)).build(t)
	tests := []struct {
		name string
		data []byte
		lim  Limits
		want []error
	}{
		{name: "empty input", data: nil, want: []error{ErrFormat}},
		{name: "not a zip", data: randBytes(1, 4096), want: []error{ErrFormat}},
		{name: "text", data: []byte("<html>404 not found</html>"), want: []error{ErrFormat}},
		{name: "truncated by one byte", data: good[:len(good)-1], want: []error{ErrFormat}},
		{name: "truncated in the central directory", data: good[:len(good)-40], want: []error{ErrFormat}},
		{name: "truncated in the data", data: good[:len(good)/2], want: []error{ErrFormat}},
		{name: "only the first local header", data: good[:30], want: []error{ErrFormat}},
		{name: "junk before a truncated end", data: append(randBytes(2, 100), good[:len(good)-10]...), want: []error{ErrFormat}},
		{name: "trailing junk over 64 KiB", data: append(slices.Clone(good), randBytes(3, 70<<10)...), want: []error{ErrFormat}},
		{
			name: "central directory size out of range",
			data: func() []byte {
				b := slices.Clone(good)
				b[len(b)-7] = 0x7f // high byte of the directory size
				return b
			}(),
			want: []error{ErrFormat},
		},
		{
			name: "central directory record count wrong",
			data: func() []byte {
				b := slices.Clone(good)
				b[len(b)-12]++ // low byte of the total record count
				return b
			}(),
			want: []error{ErrFormat},
		},
		{
			name: "too many entries",
			data: withManifest(file("a", nil, zip.Store), file("b", nil, zip.Store), file("c", nil, zip.Store)).build(t),
			lim:  Limits{MaxEntries: 3},
			want: []error{ErrTooManyEntries},
		},
		{
			name: "too many entries, directories count",
			data: withManifest(rawEntry{name: "d/"}, rawEntry{name: "e/"}).build(t),
			lim:  Limits{MaxEntries: 2},
			want: []error{ErrTooManyEntries},
		},
		{
			name: "total size over cap",
			data: withManifest(file("a", make([]byte, 600), zip.Deflate), file("b", make([]byte, 600), zip.Deflate)).build(t),
			lim:  Limits{MaxTotalSize: 1000},
			want: []error{ErrTotalSize},
		},
		{
			name: "total size over cap by lying sizes",
			data: withManifest(
				rawEntry{name: "a", body: []byte("x"), method: zip.Deflate, patch: func(h *rawHeader) { h.usize = 1 << 19 }},
				rawEntry{name: "b", body: []byte("x"), method: zip.Deflate, patch: func(h *rawHeader) { h.usize = 1 << 19 }},
			).build(t),
			lim:  Limits{MaxTotalSize: 1 << 19},
			want: []error{ErrTotalSize},
		},
		{name: "manifest missing", data: rawArchive{entries: []rawEntry{file("a", nil, zip.Store)}}.build(t), want: []error{ErrNoManifest}},
		{name: "no entries at all", data: rawArchive{}.build(t), want: []error{ErrNoManifest}},
		{name: "manifest not at the top", data: rawArchive{entries: []rawEntry{file("sub/manifest.xml", manifestBody, zip.Store)}}.build(t), want: []error{ErrNoManifest}},
		{name: "manifest absolute", data: rawArchive{entries: []rawEntry{file("//manifest.xml", manifestBody, zip.Store)}}.build(t), want: []error{ErrNoManifest}},
		{name: "manifest is a directory", data: rawArchive{entries: []rawEntry{{name: "manifest.xml/"}}}.build(t), want: []error{ErrNoManifest}},
		{name: "manifest wrong case", data: rawArchive{entries: []rawEntry{file("Manifest.xml", manifestBody, zip.Store)}}.build(t), want: []error{ErrNoManifest}},
		{name: "manifest twice", data: withManifest(file("a", nil, zip.Store), manifestEntry()).build(t), want: []error{ErrManifestDuplicate, ErrDuplicate}},
		{
			name: "manifest is a symlink",
			data: rawArchive{entries: []rawEntry{{name: ManifestName, body: []byte("/etc/passwd"), creator: creatorUnix, ext: 0o120777 << 16}}}.build(t),
			want: []error{ErrManifestRejected, ErrNotRegular},
		},
		{
			name: "manifest encrypted",
			data: rawArchive{entries: []rawEntry{{name: ManifestName, body: manifestBody, flags: 1}}}.build(t),
			want: []error{ErrManifestRejected, ErrEncrypted},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Open(bytes.NewReader(tt.data), int64(len(tt.data)), tt.lim)
			if err == nil {
				t.Fatalf("Open succeeded (Len %d), want %v", a.Len(), tt.want)
			}
			for _, w := range tt.want {
				wantErr(t, err, w)
			}
		})
	}
	t.Run("negative size", func(t *testing.T) {
		_, err := Open(bytes.NewReader(good), -1, Limits{})
		wantErr(t, err, ErrFormat)
	})
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(good) {
			if _, err := Open(bytes.NewReader(good[:n]), int64(n), Limits{}); !errors.Is(err, ErrFormat) || !errclass.IsPermanent(err) {
				t.Fatalf("truncated to %d bytes: %v", n, err)
			}
		}
	})
}

// TestJunk documents what happens with junk around a valid archive: the
// library finds the end-of-central-directory record in the last 64 KiB and
// works out where the archive starts, so junk after the end (up to about
// 64 KiB) and junk before the first local header (a self-extractor stub) are
// tolerated and every entry reads back intact. Longer trailing junk is not a
// ZIP (TestOpenErrors).
func TestJunk(t *testing.T) {
	body := randBytes(4, 5000)
	entries := []rawEntry{manifestEntry(), file("a", body, zip.Deflate), file("b", body, zip.Store)}
	tests := []struct {
		name           string
		prefix, suffix []byte
	}{
		{name: "trailing junk", suffix: randBytes(5, 1000)},
		{name: "trailing zeros 60 KiB", suffix: make([]byte, 60<<10)},
		{name: "leading junk", prefix: randBytes(6, 1000)},
		{name: "leading junk that looks like a local header", prefix: []byte("PK\x03\x04 not really")},
		{name: "both", prefix: randBytes(7, 300), suffix: randBytes(8, 300)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := open(t, rawArchive{entries: entries, prefix: tt.prefix, suffix: tt.suffix}.build(t), Limits{})
			for _, name := range []string{"a", "b"} {
				f, err := a.Lookup(name)
				wantErr(t, err, nil)
				got, err := readAll(t, f)
				wantErr(t, err, nil)
				if !bytes.Equal(got, body) {
					t.Fatalf("%s: content differs", name)
				}
			}
		})
	}
}

// TestRead reads entries back, honest and lying.
func TestRead(t *testing.T) {
	text := bytes.Repeat([]byte("ResourceSync dump entry. "), 2000)
	random := randBytes(9, 100_000)
	zeros := make([]byte, 2<<20)
	mixed := append(make([]byte, 2<<20), randBytes(10, 1<<20)...)
	tests := []struct {
		name     string
		entry    rawEntry
		lim      Limits
		want     []byte // expected content when the read succeeds
		wantOpen error  // File.Open error
		wantErr  error  // read error
		wantN    int    // bytes yielded before the error, when wantErr != nil
	}{
		{name: "stored", entry: file("x", random, zip.Store), want: random},
		{name: "deflated", entry: file("x", text, zip.Deflate), want: text},
		{name: "deflated random", entry: file("x", random, zip.Deflate), want: random},
		{name: "empty stored", entry: file("x", nil, zip.Store), want: []byte{}},
		{name: "empty deflated", entry: file("x", nil, zip.Deflate), want: []byte{}},
		{name: "zeros over 1 MiB within ratio", entry: file("x", zeros, zip.Deflate), want: zeros},
		{name: "zip64 extra", entry: rawEntry{name: "x", body: text, method: zip.Deflate, zip64: true}, want: text},
		{
			name:    "declared size larger than the data",
			entry:   rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.usize += 10 }},
			wantErr: ErrSizeMismatch, wantN: len(text),
		},
		{
			name:    "declared size smaller than the data",
			entry:   rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.usize = 1000 }},
			wantErr: ErrSizeMismatch, wantN: 1000,
		},
		{
			name:    "declared size zero, data present",
			entry:   rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.usize = 0 }},
			wantErr: ErrSizeMismatch, wantN: 0,
		},
		{
			name:    "stored, both sizes smaller",
			entry:   rawEntry{name: "x", body: random, patch: func(h *rawHeader) { h.usize, h.csize = 10, 10 }},
			wantErr: ErrChecksum, wantN: 10,
		},
		{
			name:    "wrong CRC",
			entry:   rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.crc ^= 1 }},
			wantErr: ErrChecksum, wantN: len(text),
		},
		{
			name:    "wrong CRC, empty",
			entry:   rawEntry{name: "x", patch: func(h *rawHeader) { h.crc = 1 }},
			wantErr: ErrChecksum, wantN: 0,
		},
		{
			name:    "corrupt deflate data",
			entry:   rawEntry{name: "x", body: text, method: zip.Deflate, raw: []byte{0xff, 0xff, 0xff, 0xff}},
			wantErr: ErrCorrupt, wantN: 0,
		},
		{
			name:    "truncated deflate data",
			entry:   rawEntry{name: "x", body: random, method: zip.Deflate, raw: deflate(t, random)[:5000]},
			wantErr: ErrCorrupt, wantN: -1,
		},
		{
			name:    "ratio over cap while inflating",
			entry:   file("x", mixed, zip.Deflate),
			lim:     Limits{MaxRatio: 50},
			wantErr: ErrRatio, wantN: -1,
		},
		{
			name:     "data past the end of the archive",
			entry:    rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.csize = 1 << 30; h.usize = 1 << 20 }},
			wantOpen: ErrFormat,
		},
		{
			name:     "local header offset to nowhere",
			entry:    rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.offset += 7 }},
			wantOpen: ErrFormat,
		},
		{
			name:     "local header offset past the end",
			entry:    rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.offset = 0xfffffff0 }},
			wantOpen: ErrFormat,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := open(t, withManifest(tt.entry).build(t), tt.lim)
			f, err := a.Lookup("/x")
			wantErr(t, err, nil)
			rc, err := f.Open()
			wantErr(t, err, tt.wantOpen)
			if tt.wantOpen != nil {
				return
			}
			defer rc.Close()
			var got bytes.Buffer
			_, err = io.Copy(&got, rc)
			wantErr(t, err, tt.wantErr)
			if int64(got.Len()) > f.Size {
				t.Fatalf("yielded %d bytes, more than the %d declared", got.Len(), f.Size)
			}
			if tt.wantErr != nil {
				if tt.wantN >= 0 && got.Len() != tt.wantN {
					t.Fatalf("yielded %d bytes before failing, want %d", got.Len(), tt.wantN)
				}
				// The failure is sticky.
				if _, err := rc.Read(make([]byte, 10)); !errors.Is(err, tt.wantErr) {
					t.Fatalf("second read: %v", err)
				}
				return
			}
			if !bytes.Equal(got.Bytes(), tt.want) {
				t.Fatalf("content differs: got %d bytes, want %d", got.Len(), len(tt.want))
			}
			if f.CRC32 == 0 && len(tt.want) > 0 {
				t.Fatal("CRC32 not reported")
			}
		})
	}
}

// zeroDeflate returns n zero bytes deflated, generated in 1 MiB chunks.
func zeroDeflate(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := flateWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(chunk))
		if _, err := w.Write(chunk[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestBomb: a deflated entry of 50 MB of zeros.
func TestBomb(t *testing.T) {
	const size = 50 << 20
	comp := zeroDeflate(t, size)
	crc := crc32Zeros(size)
	bomb := func(patch func(h *rawHeader)) rawEntry {
		return rawEntry{name: "bomb", method: zip.Deflate, raw: comp, patch: func(h *rawHeader) {
			h.usize, h.crc = size, crc
			if patch != nil {
				patch(h)
			}
		}}
	}
	filler := file("filler", randBytes(11, 1<<20), zip.Store)
	tests := []struct {
		name     string
		entries  []rawEntry
		lim      Limits
		openErr  error // from Open
		rejected error // reason the bomb is rejected
		readErr  error // reading the bomb
		maxRead  int64 // bytes the read may yield at most
	}{
		{name: "honest sizes, ratio cap", entries: []rawEntry{bomb(nil)}, lim: Limits{MaxRatio: 100}, rejected: ErrRatio},
		{name: "honest sizes, entry cap", entries: []rawEntry{bomb(nil)}, lim: Limits{MaxEntrySize: 10 << 20}, rejected: ErrEntrySize},
		{name: "honest sizes, total cap", entries: []rawEntry{bomb(nil)}, lim: Limits{MaxRatio: 2000, MaxTotalSize: 10 << 20}, openErr: ErrTotalSize},
		{name: "honest sizes, default caps read fine", entries: []rawEntry{bomb(nil)}, lim: Limits{MaxRatio: 2000}, maxRead: size},
		{
			name:    "declared size small (exempt), inflates more",
			entries: []rawEntry{bomb(func(h *rawHeader) { h.usize = 1<<20 - 1 })},
			lim:     Limits{MaxRatio: 100},
			readErr: ErrSizeMismatch, maxRead: 1<<20 - 1,
		},
		{
			name: "declared compressed size large, claiming the next entry's bytes",
			// The compressed size claims the filler after it too, so the
			// declared ratio looks harmless; but two entries' bytes
			// overlap, and the package is refused before any is read.
			entries: []rawEntry{bomb(func(h *rawHeader) { h.csize += 1<<20 + 200 }), filler},
			lim:     Limits{MaxRatio: 100},
			openErr: ErrOverlap,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := withManifest(tt.entries...).build(t)
			a, err := Open(bytes.NewReader(data), int64(len(data)), tt.lim)
			if tt.openErr != nil {
				wantErr(t, err, tt.openErr)
				return
			}
			wantErr(t, err, nil)
			f, err := a.Lookup("/bomb")
			if tt.rejected != nil {
				wantErr(t, err, tt.rejected)
				wantErr(t, a.Rejected()["bomb"], tt.rejected)
				return
			}
			wantErr(t, err, nil)
			rc, err := f.Open()
			wantErr(t, err, nil)
			defer rc.Close()
			n, err := io.Copy(io.Discard, rc)
			wantErr(t, err, tt.readErr)
			if n > tt.maxRead {
				t.Fatalf("yielded %d bytes, want at most %d", n, tt.maxRead)
			}
		})
	}
}

// TestLookup covers manifest paths: with and without the leading slash, no
// cleaning, unsafe paths, absent paths, and Unreferenced.
func TestLookup(t *testing.T) {
	data := withManifest(
		file("r.dat", []byte("r"), zip.Store),
		file("sub/s.dat", []byte("s"), zip.Deflate),
		file("extra1", []byte("e"), zip.Store),
		file("../evil", []byte("e"), zip.Store),
		rawEntry{name: "dir/"},
		file("extra2", []byte("e"), zip.Store),
	).build(t)
	a := open(t, data, Limits{})
	if a.Len() != 5 {
		t.Fatalf("Len = %d, want 5", a.Len())
	}
	tests := []struct {
		path string
		want error
		name string
	}{
		{path: "/r.dat", name: "r.dat"},
		{path: "r.dat", name: "r.dat"},
		{path: "/sub/s.dat", name: "sub/s.dat"},
		{path: "//r.dat", want: ErrUnsafePath},
		{path: "/missing", want: ErrNotInPackage},
		{path: "/R.DAT", want: ErrNotInPackage},
		{path: "/./r.dat", want: ErrNotInPackage},
		{path: "/sub//s.dat", want: ErrNotInPackage},
		{path: "/sub/../r.dat", want: ErrUnsafePath},
		{path: "/../evil", want: ErrUnsafePath},
		{path: `/sub\s.dat`, name: "sub/s.dat"},
		{path: `\sub\s.dat`, name: "sub/s.dat"},
		{path: `/sub\..\r.dat`, want: ErrUnsafePath},
		{path: "/r.dat\x00", want: ErrUnsafePath},
		{path: "", want: ErrUnsafePath},
		{path: "/", want: ErrUnsafePath},
		{path: "/C:/r.dat", want: ErrUnsafePath},
		{path: "/dir/", want: ErrNotInPackage},
		{path: "/dir", want: ErrNotInPackage},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.path), func(t *testing.T) {
			f, err := a.Lookup(tt.path)
			wantErr(t, err, tt.want)
			if tt.want == nil && f.Name != tt.name {
				t.Fatalf("Lookup(%q) = %q, want %q", tt.path, f.Name, tt.name)
			}
		})
	}
	if got, want := a.Unreferenced(), []string{"extra1", "extra2"}; !slices.Equal(got, want) {
		t.Fatalf("Unreferenced = %q, want %q", got, want)
	}
	if _, err := a.Lookup("/extra2"); err != nil {
		t.Fatal(err)
	}
	if got, want := a.Unreferenced(), []string{"extra1"}; !slices.Equal(got, want) {
		t.Fatalf("Unreferenced = %q, want %q", got, want)
	}
	rej := a.Rejected()
	if len(rej) != 1 || !errors.Is(rej["../evil"], ErrUnsafePath) {
		t.Fatalf("Rejected = %v", rej)
	}
	delete(rej, "../evil")
	if len(a.Rejected()) != 1 {
		t.Fatal("Rejected must return a copy")
	}

	rc, err := a.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, manifestBody) {
		t.Fatalf("Manifest: %q, %v", got, err)
	}
	if mf := a.ManifestFile(); mf.Name != ManifestName || mf.Size != int64(len(manifestBody)) {
		t.Fatalf("ManifestFile = %+v", mf)
	}
}

// TestZip64 opens an archive with more than 65535 entries (written by
// archive/zip, which switches to zip64 end records) and one with forced
// zip64 records and extra fields.
func TestZip64(t *testing.T) {
	t.Run("many entries", func(t *testing.T) {
		const n = 70_000
		var buf bytes.Buffer
		w := zip.NewWriter(&buf)
		for i := range n + 1 {
			name := fmt.Sprintf("f%05d", i)
			body := []byte(name)
			if i == n {
				name, body = ManifestName, manifestBody
			}
			fw, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fw.Write(body); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		a := open(t, buf.Bytes(), Limits{})
		t.Logf("opened %d entries (%d bytes) in %v", a.Len(), buf.Len(), time.Since(start))
		if a.Len() != n+1 {
			t.Fatalf("Len = %d, want %d", a.Len(), n+1)
		}
		f, err := a.Lookup("/f69999")
		wantErr(t, err, nil)
		got, err := readAll(t, f)
		wantErr(t, err, nil)
		if string(got) != "f69999" {
			t.Fatalf("got %q", got)
		}
		if u := a.Unreferenced(); len(u) != n-1 {
			t.Fatalf("Unreferenced: %d names, want %d", len(u), n-1)
		}
		if _, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()), Limits{MaxEntries: n}); !errors.Is(err, ErrTooManyEntries) {
			t.Fatalf("MaxEntries %d: %v", n, err)
		}
	})
	t.Run("forced zip64 records", func(t *testing.T) {
		body := randBytes(12, 3000)
		ra := rawArchive{zip64: true, entries: []rawEntry{
			{name: ManifestName, body: manifestBody, method: zip.Deflate, zip64: true},
			{name: "a", body: body, method: zip.Store, zip64: true},
			{name: "b", body: body, method: zip.Deflate, zip64: true},
		}}
		a := open(t, ra.build(t), Limits{})
		for _, name := range []string{"a", "b"} {
			f, err := a.Lookup(name)
			wantErr(t, err, nil)
			got, err := readAll(t, f)
			wantErr(t, err, nil)
			if !bytes.Equal(got, body) {
				t.Fatalf("%s: content differs", name)
			}
		}
	})
	t.Run("zip64 sizes over the entry cap", func(t *testing.T) {
		ra := withManifest(rawEntry{name: "huge", body: []byte("x"), zip64: true, method: zip.Deflate,
			patch: func(h *rawHeader) { h.usize = 1 << 62 }})
		ra.zip64 = true
		a := open(t, ra.build(t), Limits{})
		_, err := a.Lookup("huge")
		wantErr(t, err, ErrEntrySize)
	})
}

// TestInterop opens the package written by the resync reference library and
// resolves and reads every manifest path.
func TestInterop(t *testing.T) {
	path := "../../shared/interop/resync-2.0.1/dump00000.zip"
	fh, err := os.Open(path)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("interop sample missing: %v", err)
		}
		t.Skipf("interop sample missing: %v", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(fh, st.Size(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Rejected()) != 0 {
		t.Fatalf("Rejected: %v", a.Rejected())
	}
	rc, err := a.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	paths := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("manifest: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "md" {
			continue
		}
		var p, length string
		for _, at := range se.Attr {
			switch at.Name.Local {
			case "path":
				p = at.Value
			case "length":
				length = at.Value
			}
		}
		if p == "" {
			continue
		}
		paths++
		f, err := a.Lookup(p)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", p, err)
		}
		got, err := readAll(t, f)
		if err != nil {
			t.Fatalf("read %q: %v", p, err)
		}
		if strconv.Itoa(len(got)) != length {
			t.Fatalf("%q: %d bytes, manifest says %s", p, len(got), length)
		}
	}
	if paths == 0 || paths != a.Len()-1 {
		t.Fatalf("%d manifest paths, %d entries", paths, a.Len())
	}
	if u := a.Unreferenced(); len(u) != 0 {
		t.Fatalf("Unreferenced = %q", u)
	}
}

// TestConcurrentReads reads every entry from several goroutines at once,
// with Lookup and Unreferenced running alongside.
func TestConcurrentReads(t *testing.T) {
	var entries []rawEntry
	bodies := map[string][]byte{}
	for i := range 12 {
		name := fmt.Sprintf("e%02d", i)
		body := randBytes(uint64(100+i), 50_000+i*1000)
		if i%3 == 0 {
			body = bytes.Repeat(body[:100], 20_000) // 2 MB, compressible
		}
		method := zip.Deflate
		if i%2 == 1 {
			method = zip.Store
		}
		entries = append(entries, file(name, body, method))
		bodies[name] = body
	}
	a := open(t, withManifest(entries...).build(t), Limits{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 12 {
				name := fmt.Sprintf("e%02d", (i+g)%12)
				f, err := a.Lookup(name)
				if err != nil {
					errs <- err
					return
				}
				rc, err := f.Open()
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, bodies[name]) {
					errs <- fmt.Errorf("%s: content differs", name)
					return
				}
				_ = a.Unreferenced()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if u := a.Unreferenced(); len(u) != 0 {
		t.Fatalf("Unreferenced = %q", u)
	}
}

// flakyReaderAt fails every read that touches [from, to) with a retryable
// error, standing in for a network ReaderAt.
type flakyReaderAt struct {
	r        io.ReaderAt
	from, to int64
}

var errFlaky = errors.New("connection reset")

func (f flakyReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < f.to && off+int64(len(p)) > f.from {
		return 0, errclass.NewRetryable(errFlaky)
	}
	return f.r.ReadAt(p, off)
}

// TestSourceErrors checks that errors of the ReaderAt keep their class
// instead of being reported as a broken archive.
func TestSourceErrors(t *testing.T) {
	body := randBytes(13, 200_000)
	data := withManifest(file("a", body, zip.Deflate), file("b", body, zip.Store)).build(t)
	size := int64(len(data))

	_, err := Open(flakyReaderAt{bytes.NewReader(data), 0, size}, size, Limits{})
	if !errors.Is(err, errFlaky) || !errclass.IsRetryable(err) || errors.Is(err, ErrFormat) {
		t.Fatalf("Open: %v (%v)", err, errclass.Of(err))
	}

	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			a := open(t, data, Limits{})
			f, err := a.Lookup(name)
			wantErr(t, err, nil)
			off, err := f.DataOffset()
			if err != nil {
				t.Fatal(err)
			}
			// Fail in the middle of the entry's data.
			mid := off + f.CompressedSize/2
			a.ra.ra = flakyReaderAt{bytes.NewReader(data), mid, mid + 1}
			_, err = readAll(t, f)
			if !errors.Is(err, errFlaky) || !errclass.IsRetryable(err) {
				t.Fatalf("read: %v (%v)", err, errclass.Of(err))
			}
			// The local header unreadable.
			hdr := off - 30 - int64(len(name))
			a.ra.ra = flakyReaderAt{bytes.NewReader(data), hdr, hdr + 1}
			if _, err := f.Open(); !errors.Is(err, errFlaky) || !errclass.IsRetryable(err) {
				t.Fatalf("Open: %v (%v)", err, errclass.Of(err))
			}
		})
	}
}

// TestReadAfterClose: a closed reader fails instead of reading.
func TestReadAfterClose(t *testing.T) {
	a := open(t, withManifest(file("a", []byte("abc"), zip.Deflate)).build(t), Limits{})
	f, _ := a.Lookup("a")
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := rc.Read(make([]byte, 10)); n != 0 || err == nil {
		t.Fatalf("Read after Close = %d, %v", n, err)
	}
}

// benchArchive returns a generated archive of count entries of entrySize
// bytes of text-like data (about 3.7:1 deflated), plus a manifest.
func benchArchive(b *testing.B, count, entrySize int) []byte {
	b.Helper()
	words := []string{"resource", "sync", "dump", "manifest", "change", "list", "capability", "the", "of", "and", "http://example.org/"}
	r := rand.New(rand.NewPCG(1, 2))
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	body := make([]byte, 0, entrySize+32)
	for i := range count + 1 {
		name := fmt.Sprintf("r%04d.dat", i)
		body = body[:0]
		for len(body) < entrySize {
			body = append(body, words[r.IntN(len(words))]...)
			body = append(body, ' ')
			if r.IntN(8) == 0 {
				body = strconv.AppendUint(body, r.Uint64(), 36)
			}
		}
		body = body[:entrySize]
		if i == count {
			name, body = ManifestName, manifestBody
		}
		fw, err := w.Create(name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fw.Write(body); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReadEntries reads every entry of a generated 64 MB archive
// (512 entries of 128 KiB of text-like data, deflated).
func BenchmarkReadEntries(b *testing.B) {
	const entrySize, count = 128 << 10, 512
	data := benchArchive(b, count, entrySize)
	b.Logf("archive: %d bytes compressed, %d uncompressed", len(data), count*entrySize)
	b.SetBytes(count * entrySize)
	b.ResetTimer()
	for b.Loop() {
		a, err := Open(bytes.NewReader(data), int64(len(data)), Limits{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range count {
			f, err := a.Lookup(fmt.Sprintf("r%04d.dat", i))
			if err != nil {
				b.Fatal(err)
			}
			rc, err := f.Open()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				b.Fatal(err)
			}
			rc.Close()
		}
	}
}
