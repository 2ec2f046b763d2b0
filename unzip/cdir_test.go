package unzip

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zip"
	"github.com/rsharvest/rsharvest/errclass"
)

// libraryArchive writes an archive with the zip library's writer: modified
// times (extended timestamps), NTFS and Unix time extra fields, data
// descriptors (Create), comments, a directory.
func libraryArchive(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	mod := time.Date(2023, 5, 6, 7, 8, 10, 0, time.FixedZone("", 2*3600))
	ntfs := binary.LittleEndian.AppendUint32(nil, 0) // reserved
	ntfs = binary.LittleEndian.AppendUint16(ntfs, 1) // attribute 1: times
	ntfs = binary.LittleEndian.AppendUint16(ntfs, 24)
	ntfs = binary.LittleEndian.AppendUint64(ntfs, 133_000_000_000_000_000) // 2022
	ntfs = binary.LittleEndian.AppendUint64(ntfs, 0)
	ntfs = binary.LittleEndian.AppendUint64(ntfs, 0)
	extra := func(tag uint16, field []byte) []byte {
		b := binary.LittleEndian.AppendUint16(nil, tag)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(field)))
		return append(b, field...)
	}
	unix := binary.LittleEndian.AppendUint32(nil, 1) // access time
	unix = binary.LittleEndian.AppendUint32(unix, 1_600_000_000)
	headers := []*zip.FileHeader{
		{Name: ManifestName, Method: zip.Deflate, Modified: mod},
		{Name: "plain.txt", Method: zip.Store},
		{Name: "modified.txt", Method: zip.Deflate, Modified: mod.UTC(), Comment: "a comment"},
		{Name: "ntfs.txt", Method: zip.Deflate, Extra: extra(idNTFSExtra, ntfs)},
		{Name: "unix.txt", Method: zip.Store, Extra: extra(idUnixExtra, unix)},
		{Name: "dir/", Method: zip.Store},
		{Name: "dir/nested name ünïcode.txt", Method: zip.Deflate, Modified: mod},
	}
	for i, h := range headers {
		fw, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(h.Name, "/") {
			if _, err := fw.Write(bytes.Repeat([]byte(h.Name), 100+i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 3 { // Create: sizes in data descriptors
		fw, err := w.Create(fmt.Sprintf("streamed%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(randBytes(uint64(i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetComment("archive comment"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestMatchesZipLibrary opens archives with this package and with the zip
// library, and compares what each says of every entry: sizes, method,
// CRC-32, modification time (and zone), and where the data starts.
func TestMatchesZipLibrary(t *testing.T) {
	body := randBytes(20, 5000)
	zip64 := rawArchive{zip64: true, entries: []rawEntry{
		{name: ManifestName, body: manifestBody, method: zip.Deflate, zip64: true},
		{name: "a", body: body, method: zip.Store, zip64: true},
		{name: "b", body: body, method: zip.Deflate, zip64: true},
	}}
	tests := []struct {
		name string
		data []byte
	}{
		{name: "library writer", data: libraryArchive(t)},
		{name: "library writer, leading and trailing junk", data: append(append([]byte("MZ stub"), libraryArchive(t)...), "trailer"...)},
		{name: "raw", data: withManifest(file("a", body, zip.Deflate), file("sub/b", body, zip.Store), rawEntry{name: "d/"}).build(t)},
		{name: "zip64 records", data: zip64.build(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			zr, err := zip.NewReader(bytes.NewReader(tt.data), int64(len(tt.data)))
			if err != nil {
				t.Fatal(err)
			}
			a := open(t, tt.data, Limits{})
			files := 0
			for _, zf := range zr.File {
				if strings.HasSuffix(zf.Name, "/") {
					continue
				}
				files++
				f, err := a.Lookup("/" + zf.Name)
				if err != nil {
					t.Fatalf("%s: %v", zf.Name, err)
				}
				if f.Size != int64(zf.UncompressedSize64) || f.CompressedSize != int64(zf.CompressedSize64) ||
					f.Method != zf.Method || f.CRC32 != zf.CRC32 {
					t.Errorf("%s: got %+v, library %+v", zf.Name, f, zf.FileHeader)
				}
				_, gotZone := f.Modified.Zone()
				_, wantZone := zf.Modified.Zone()
				if !f.Modified.Equal(zf.Modified) || gotZone != wantZone || f.Modified.Location().String() != zf.Modified.Location().String() {
					t.Errorf("%s: Modified %v, library %v", zf.Name, f.Modified, zf.Modified)
				}
				got, err := f.DataOffset()
				if err != nil {
					t.Fatal(err)
				}
				want, err := zf.DataOffset()
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s: data at %d, library %d", zf.Name, got, want)
				}
				rc, err := zf.Open()
				if err != nil {
					t.Fatal(err)
				}
				wantBody, err := readAllClose(rc)
				if err != nil {
					t.Fatal(err)
				}
				gotBody, err := readAll(t, f)
				if err != nil || !bytes.Equal(gotBody, wantBody) {
					t.Errorf("%s: content differs (%v)", zf.Name, err)
				}
			}
			if a.Len() != files {
				t.Fatalf("Len = %d, library lists %d files", a.Len(), files)
			}
			if m := a.ManifestFile(); m.Name != ManifestName || m.Size == 0 {
				t.Fatalf("ManifestFile = %+v", m)
			}
		})
	}
}

func readAllClose(rc interface {
	Read([]byte) (int, error)
	Close() error
}) ([]byte, error) {
	defer rc.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(rc)
	return b.Bytes(), err
}

// TestHashCollisions opens one archive with the real name hash and with
// hashes that collide (all names, and names of equal length), and checks
// that every answer is the same: names are always compared exactly.
func TestHashCollisions(t *testing.T) {
	body := []byte("body")
	data := withManifest(
		file("a", body, zip.Store),
		file("bb", body, zip.Deflate),
		file("cc", []byte("other"), zip.Store),
		file("d", body, zip.Store), file("d", body, zip.Deflate),
		rawEntry{name: "ee", body: body, creator: creatorUnix, ext: 0o120777 << 16}, file("ee", body, zip.Store),
		file("../x", body, zip.Store),
		file("ff", body, zip.Store),
		rawEntry{name: "dir/"},
	).build(t)
	paths := []string{"/a", "/bb", "/cc", "/d", "/ee", "/../x", "/ff", "/dir/", "/dir", "/zz", "/" + ManifestName}

	type answer struct {
		name string
		size int64
		err  string
	}
	run := func(t *testing.T, hash func(string) uint64) (answers []answer, unref []string, rejected []string, n int) {
		a, err := openHashed(bytes.NewReader(data), int64(len(data)), Limits{MaxTotalSize: int64(len(manifestBody)) + 17}, hash)
		if err != nil {
			t.Fatal(err)
		}
		unrefBefore := a.Unreferenced()
		for _, p := range paths[:2] { // reference a and bb
			if _, err := a.Lookup(p); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range paths {
			f, err := a.Lookup(p)
			var an answer
			if err != nil {
				an.err = err.Error()
			} else {
				an.name, an.size = f.Name, f.Size
			}
			answers = append(answers, an)
		}
		for name, reason := range a.Rejected() {
			rejected = append(rejected, name+": "+reason.Error())
		}
		slices.Sort(rejected)
		if want := []string{"a", "bb", "cc", "ff"}; !slices.Equal(unrefBefore, want) {
			t.Fatalf("Unreferenced before lookups = %q, want %q", unrefBefore, want)
		}
		return answers, a.Unreferenced(), rejected, a.Len()
	}
	seed := maphash.MakeSeed()
	wantAnswers, wantUnref, wantRejected, wantLen := run(t, func(s string) uint64 { return maphash.String(seed, s) })
	if wantLen != 5 || len(wantRejected) != 3 || len(wantUnref) != 0 {
		t.Fatalf("Len %d, Rejected %q, Unreferenced %q", wantLen, wantRejected, wantUnref)
	}
	for _, tt := range []struct {
		name string
		hash func(string) uint64
	}{
		{name: "all names collide", hash: func(string) uint64 { return 42 }},
		{name: "names of equal length collide", hash: func(s string) uint64 { return uint64(len(s)) }},
		{name: "names of unequal length collide", hash: func(s string) uint64 { return uint64(len(s) % 2) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			answers, unref, rejected, n := run(t, tt.hash)
			if !slices.Equal(answers, wantAnswers) {
				t.Errorf("Lookup answers differ:\n got %v\nwant %v", answers, wantAnswers)
			}
			if !slices.Equal(unref, wantUnref) || !slices.Equal(rejected, wantRejected) || n != wantLen {
				t.Errorf("Unreferenced %q, Rejected %q, Len %d; want %q, %q, %d", unref, rejected, n, wantUnref, wantRejected, wantLen)
			}
		})
	}
}

// patchAt returns a copy of b with the little-endian value v (of len(v)
// bytes) written at off, counting from the end when off < 0.
func patchAt(b []byte, off int, v ...byte) []byte {
	b = slices.Clone(b)
	if off < 0 {
		off += len(b)
	}
	copy(b[off:], v)
	return b
}

func u16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// TestDirectoryErrors covers the structures this package parses itself:
// end records, ZIP64 records, central-directory records.
func TestDirectoryErrors(t *testing.T) {
	good := withManifest(file("a", []byte("aaaa"), zip.Deflate), file("b", []byte("bbbb"), zip.Store)).build(t)
	z64 := rawArchive{zip64: true, entries: []rawEntry{{name: ManifestName, body: manifestBody, zip64: true}, {name: "a", body: []byte("a"), zip64: true}}}.build(t)
	// Layout at the end of z64: ZIP64 end record (56), locator (20), end
	// record (22).
	const eocd64, loc = -22 - 20 - 56, -22 - 20
	lastRecord := bytes.LastIndex(good, []byte("PK\x01\x02"))
	tests := []struct {
		name string
		data []byte
		lim  Limits
		want error // nil: opens
	}{
		{name: "ZIP64 good", data: z64},
		{name: "ZIP64 with leading junk", data: append([]byte("#!/bin/sh\nexit 0\n"), z64...)},
		{name: "ZIP64 locator offset wrong, record just before it", data: patchAt(z64, loc+8, u64(12345)...)},
		{name: "ZIP64 end record missing", data: patchAt(z64, eocd64, 'X'), want: ErrFormat},
		{name: "ZIP64 locator offset past the end", data: patchAt(patchAt(z64, eocd64, 'X'), loc+8, u64(1<<62)...), want: ErrFormat},
		{name: "ZIP64 record count wrong", data: patchAt(z64, eocd64+32, u64(3)...), want: ErrFormat},
		{name: "ZIP64 record count huge", data: patchAt(z64, eocd64+32, u64(1<<60)...), want: ErrTooManyEntries},
		{name: "ZIP64 directory size huge", data: patchAt(z64, eocd64+40, u64(1<<63)...), want: ErrFormat},
		{name: "ZIP64 directory offset huge", data: patchAt(z64, eocd64+48, u64(1<<63-1)...), want: ErrFormat},
		{name: "ZIP64 disk count 2: no ZIP64", data: patchAt(z64, loc+16, u32(2)...), want: ErrFormat},
		{name: "declared count over the cap", data: patchAt(good, -12, u16(1000)...), lim: Limits{MaxEntries: 999}, want: ErrTooManyEntries},
		{name: "directory offset past its end", data: patchAt(good, -6, u32(1<<30)...), want: ErrFormat},
		{name: "end record comment runs past the end", data: patchAt(good, -2, u16(1)...), want: ErrFormat},
		{name: "end record with a comment", data: append(patchAt(good, -2, u16(5)...), "hello"...)},
		{name: "record name runs past the directory", data: patchAt(good, lastRecord+28, u16(0xffff)...), want: ErrFormat},
		{name: "record signature wrong", data: patchAt(good, lastRecord, 'X'), want: ErrFormat},
		{name: "saturated compressed size without ZIP64", data: withManifest(rawEntry{name: "x", body: []byte("x"), patch: func(h *rawHeader) { h.csize = 1<<32 - 1 }}).build(t), want: ErrFormat},
		{name: "saturated offset without ZIP64", data: withManifest(rawEntry{name: "x", body: []byte("x"), patch: func(h *rawHeader) { h.offset = 1<<32 - 1 }}).build(t), want: ErrFormat},
		{name: "size over the offset range", data: good, want: ErrFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := int64(len(tt.data))
			if tt.name == "size over the offset range" {
				size = maxArchiveSize + 1
			}
			a, err := Open(bytes.NewReader(tt.data), size, tt.lim)
			if tt.want == nil {
				wantErr(t, err, nil)
				f, err := a.Lookup("a")
				wantErr(t, err, nil)
				if _, err := readAll(t, f); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Open succeeded (Len %d), want %v", a.Len(), tt.want)
			}
			wantErr(t, err, tt.want)
		})
	}
}

// TestManyRejected has more rejected and unreferenced entries than are
// read back one by one, so Rejected and Unreferenced stream the central
// directory; duplicates make the total fit.
func TestManyRejected(t *testing.T) {
	const n = fewRecords + 50
	var entries []rawEntry
	var wantUnref []string
	wantRejected := map[string]error{}
	for i := range n {
		unsafe := fmt.Sprintf("../u%04d", i)
		dup := fmt.Sprintf("dup%04d", i)
		keep := fmt.Sprintf("keep%04d", i)
		entries = append(entries,
			file(unsafe, []byte("u"), zip.Store),
			file(dup, make([]byte, 100), zip.Deflate),
			file(keep, []byte("k"), zip.Store),
			file(dup, make([]byte, 100), zip.Store),
		)
		wantRejected[unsafe], wantRejected[dup] = ErrUnsafePath, ErrDuplicate
		if i%3 != 0 {
			wantUnref = append(wantUnref, keep)
		}
	}
	// The duplicates, counted, would exceed the total.
	data := withManifest(entries...).build(t)
	a := open(t, data, Limits{MaxTotalSize: n*2 + int64(len(manifestBody))})
	if a.Len() != n+1 {
		t.Fatalf("Len = %d, want %d", a.Len(), n+1)
	}
	for i := 0; i < n; i += 3 {
		if _, err := a.Lookup(fmt.Sprintf("keep%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Unreferenced(); !slices.Equal(got, wantUnref) {
		t.Fatalf("Unreferenced: %d names, want %d", len(got), len(wantUnref))
	}
	got := a.Rejected()
	if len(got) != len(wantRejected) {
		t.Fatalf("Rejected: %d names, want %d", len(got), len(wantRejected))
	}
	for name, want := range wantRejected {
		wantErr(t, got[name], want)
		_, err := a.Lookup(name)
		wantErr(t, err, want)
	}
}

// TestLookupSourceErrors: after Open, errors of the ReaderAt reach Lookup's
// caller with their class; they are never taken for a missing entry or a
// broken archive. Unreferenced and Rejected log them and return what they
// could read.
func TestLookupSourceErrors(t *testing.T) {
	var entries []rawEntry
	for i := range fewRecords + 10 {
		entries = append(entries, file(fmt.Sprintf("e%04d", i), []byte("e"), zip.Store), file(fmt.Sprintf("../r%04d", i), nil, zip.Store))
	}
	data := withManifest(entries...).build(t)
	var logs bytes.Buffer
	a := open(t, data, Limits{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a.ra.ra = flakyReaderAt{bytes.NewReader(data), 0, int64(len(data))}
	for _, p := range []string{"/e0001", "/" + ManifestName, "/missing", "/../r0001"} {
		_, err := a.Lookup(p)
		switch p {
		case "/missing": // no record has its hash: decided without reading
			wantErr(t, err, ErrNotInPackage)
			continue
		case "/../r0001": // decided without reading
			wantErr(t, err, ErrUnsafePath)
			continue
		}
		if !errors.Is(err, errFlaky) || !errclass.IsRetryable(err) || errors.Is(err, ErrFormat) || errors.Is(err, ErrNotInPackage) {
			t.Fatalf("Lookup(%q): %v (%v)", p, err, errclass.Of(err))
		}
	}
	if u := a.Unreferenced(); len(u) != 0 {
		t.Fatalf("Unreferenced = %d names", len(u))
	}
	if r := a.Rejected(); len(r) != 0 {
		t.Fatalf("Rejected = %d names", len(r))
	}
	if !strings.Contains(logs.String(), "connection reset") {
		t.Fatalf("read errors not logged:\n%s", logs.String())
	}
}

// FuzzMatchesLibrary opens arbitrary bytes with this package and with the
// zip library and, when both accept the archive, checks that they agree on
// every entry this package accepts, and that no entry the library lists is
// missing.
func FuzzMatchesLibrary(f *testing.F) {
	text := bytes.Repeat([]byte("resourcesync "), 50)
	f.Add(libraryArchive(f))
	f.Add(withManifest(file("a", text, zip.Deflate), file("b", text, zip.Store), file("b", text, zip.Store), rawEntry{name: "d/"}).build(f))
	f.Add(rawArchive{zip64: true, entries: []rawEntry{{name: ManifestName, body: manifestBody, zip64: true}, {name: "z", body: text, method: zip.Deflate, zip64: true}}}.build(f))
	f.Add(rawArchive{entries: withManifest(file("a", text, zip.Store)).entries, prefix: []byte("junk"), suffix: []byte("junk")}.build(f))
	f.Add(dspaceArchive(f, text))
	f.Add(refusedNamesArchive(f, text))
	f.Fuzz(func(t *testing.T, data []byte) {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		a, err := Open(bytes.NewReader(data), int64(len(data)), Limits{MaxEntries: 1000})
		if err != nil {
			return
		}
		// Entries are known by their keys (see EntryKey): names that
		// differ only by a leading slash or by backslashes are copies.
		copies := map[string]int{}
		for _, zf := range zr.File {
			if key := EntryKey([]byte(zf.Name), zf.Flags); !isDir(key, zf.ExternalAttrs) {
				copies[key]++
			}
		}
		for _, zf := range zr.File {
			key := EntryKey([]byte(zf.Name), zf.Flags)
			if isDir(key, zf.ExternalAttrs) {
				continue
			}
			got, err := a.Lookup("/" + key)
			switch {
			case copies[key] > 1:
				if !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrUnsafePath) {
					t.Fatalf("%q, %d copies: %v", zf.Name, copies[zf.Name], err)
				}
			case errors.Is(err, ErrNotInPackage):
				t.Fatalf("%q listed by the library: %v", zf.Name, err)
			case err == nil:
				if got.Size != int64(zf.UncompressedSize64) || got.CompressedSize != int64(zf.CompressedSize64) ||
					got.Method != zf.Method || got.CRC32 != zf.CRC32 || !got.Modified.Equal(zf.Modified) {
					t.Fatalf("%q: got %+v, library %+v", zf.Name, got, zf.FileHeader)
				}
				gotOff, gotErr := got.DataOffset()
				wantOff, wantErr := zf.DataOffset()
				switch {
				case gotErr != nil && wantErr == nil && wantOff+int64(zf.CompressedSize64) > int64(len(data)):
					continue // the library names data past the archive's end, which this package refuses
				case errors.Is(gotErr, ErrNameMismatch):
					continue // a local header naming another entry: refused here, not by the library
				case errors.Is(gotErr, ErrOverlap):
					continue // data past the next local header or the central directory: refused here, not by the library
				}
				if (gotErr == nil) != (wantErr == nil) || gotErr == nil && gotOff != wantOff {
					t.Fatalf("%q: data at %d (%v), library %d (%v)", zf.Name, gotOff, gotErr, wantOff, wantErr)
				}
			}
		}
	})
}

// dspaceArchive is a package named as DSpace names its entries: a leading
// slash, backslashes, a CP437 name, the manifest last, and a name that is
// a copy of another once normalised.
func dspaceArchive(tb testing.TB, text []byte) []byte {
	return rawArchive{entries: []rawEntry{
		file("/resources/1_file.pdf", text, zip.Deflate),
		file(`\resources\2_file.pdf`, text, zip.Store),
		{name: "caf\x82.txt", body: text, legacyName: true},
		file("/dup", text, zip.Store), file("dup", text, zip.Store),
		{name: "/manifest.xml", body: manifestBody},
	}}.build(tb)
}
