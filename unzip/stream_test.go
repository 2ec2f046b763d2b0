package unzip

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zip"
	"github.com/rsharvest/rsharvest/errclass"
)

// noSeek hides a reader's Seek, so the scanner reads through entry data.
type noSeek struct{ r io.Reader }

func (n noSeek) Read(p []byte) (int, error) { return n.r.Read(p) }

// scanAll returns the entries a scanner finds and the error it ends with.
func scanAll(r io.Reader, lim Limits) ([]LocalEntry, LocalEntry, error) {
	s := NewLocalScanner(r, lim)
	var out []LocalEntry
	for {
		e, err := s.Next()
		if err != nil {
			// The error is final.
			if _, again := s.Next(); again != err {
				return out, e, errors.New("error not sticky")
			}
			return out, e, err
		}
		out = append(out, e)
	}
}

func TestLocalScanner(t *testing.T) {
	text := bytes.Repeat([]byte("resourcesync local headers "), 200)
	big := make([]byte, 2<<20) // zeros: deflates far beyond a ratio of 10
	tests := []struct {
		name    string
		archive rawArchive
		lim     Limits
		names   []string // entries found before the end
		want    error    // io.EOF: clean end at the central directory
		failed  string   // name of the entry the error is about
	}{
		{name: "stored and deflated", archive: withManifest(file("a.txt", text, zip.Store), file("sub/b.txt", text, zip.Deflate), rawEntry{name: "sub/"}),
			names: []string{ManifestName, "a.txt", "sub/b.txt", "sub/"}, want: io.EOF},
		{name: "empty archive", archive: rawArchive{}, want: io.EOF},
		{name: "zip64 sizes", archive: rawArchive{zip64: true, entries: []rawEntry{{name: ManifestName, body: manifestBody, zip64: true}, {name: "z", body: text, method: zip.Deflate, zip64: true}}},
			names: []string{ManifestName, "z"}, want: io.EOF},
		{name: "data descriptor stops", archive: withManifest(file("a", text, zip.Store), rawEntry{name: "b", body: text, method: zip.Deflate, flags: 0x8}, file("c", text, zip.Store)),
			names: []string{ManifestName, "a"}, want: ErrDataDescriptor, failed: "b"},
		{name: "dot-dot", archive: withManifest(file("../evil", text, zip.Store)), names: []string{ManifestName}, want: ErrUnsafePath, failed: "../evil"},
		{name: "absolute", archive: withManifest(file("//etc/x", text, zip.Store)), names: []string{ManifestName}, want: ErrUnsafePath, failed: "/etc/x"},
		{name: "DSpace names", archive: withManifest(file("/resources/a.pdf", text, zip.Deflate), file(`\resources\b.pdf`, text, zip.Store), rawEntry{name: "caf\x82", body: text, legacyName: true}),
			names: []string{ManifestName, "resources/a.pdf", "resources/b.pdf", "café"}, want: io.EOF},
		{name: "drive letter", archive: withManifest(file("C:x", text, zip.Store)), names: []string{ManifestName}, want: ErrUnsafePath, failed: "C:x"},
		{name: "backslash", archive: withManifest(file(`a\..\b`, text, zip.Store)), names: []string{ManifestName}, want: ErrUnsafePath, failed: "a/../b"},
		{name: "control character", archive: withManifest(file("a\x00b", text, zip.Store)), names: []string{ManifestName}, want: ErrUnsafePath, failed: "a\x00b"},
		{name: "encrypted", archive: withManifest(rawEntry{name: "e", body: text, flags: 0x1}), names: []string{ManifestName}, want: ErrEncrypted, failed: "e"},
		{name: "method", archive: withManifest(rawEntry{name: "m", body: text, method: 12}), names: []string{ManifestName}, want: ErrMethod, failed: "m"},
		{name: "stored sizes differ", archive: withManifest(rawEntry{name: "s", body: text, patch: func(h *rawHeader) { h.usize++ }}),
			names: []string{ManifestName}, want: ErrSizeMismatch, failed: "s"},
		{name: "entry size cap", archive: withManifest(file("a", text, zip.Store)), lim: Limits{MaxEntrySize: 100},
			names: []string{ManifestName}, want: ErrEntrySize, failed: "a"},
		{name: "ratio cap", archive: withManifest(file("bomb", big, zip.Deflate)), lim: Limits{MaxRatio: 10},
			names: []string{ManifestName}, want: ErrRatio, failed: "bomb"},
		{name: "entry count cap", archive: withManifest(file("a", text, zip.Store), file("b", text, zip.Store)), lim: Limits{MaxEntries: 2},
			names: []string{ManifestName, "a"}, want: ErrTooManyEntries, failed: "b"},
		{name: "total size cap", archive: withManifest(file("a", text, zip.Store), file("b", text, zip.Store)), lim: Limits{MaxTotalSize: int64(len(text)) + 100},
			names: []string{ManifestName, "a"}, want: ErrTotalSize, failed: "b"},
		{name: "junk before the first header", archive: rawArchive{prefix: []byte("MZ junk"), entries: withManifest().entries}, want: ErrFormat},
	}
	for _, tc := range tests {
		for _, seek := range []bool{true, false} {
			name := tc.name
			if !seek {
				name += "/no seek"
			}
			t.Run(name, func(t *testing.T) {
				b := tc.archive.build(t)
				var r io.Reader = bytes.NewReader(b)
				if !seek {
					r = noSeek{r}
				}
				got, last, err := scanAll(r, tc.lim)
				if !errors.Is(err, tc.want) {
					t.Fatalf("ended with %v, want %v", err, tc.want)
				}
				if err != io.EOF && !errclass.IsPermanent(err) {
					t.Errorf("error %v is not permanent", err)
				}
				if tc.failed != "" && last.Name != tc.failed {
					t.Errorf("failing entry %q, want %q", last.Name, tc.failed)
				}
				var names []string
				for _, e := range got {
					names = append(names, e.Name)
				}
				if strings.Join(names, ",") != strings.Join(tc.names, ",") {
					t.Fatalf("entries %q, want %q", names, tc.names)
				}
				if err != io.EOF {
					return
				}
				// What the local headers say is what the central directory says.
				zr, zerr := zip.NewReader(bytes.NewReader(b), int64(len(b)))
				if zerr != nil {
					t.Fatal(zerr)
				}
				if len(zr.File) != len(got) {
					t.Fatalf("%d entries, the central directory has %d", len(got), len(zr.File))
				}
				for i, f := range zr.File {
					e := got[i]
					off, _ := f.DataOffset()
					if e.Name != EntryKey([]byte(f.Name), f.Flags) || e.Method != f.Method || e.CRC32 != f.CRC32 || e.Size != int64(f.UncompressedSize64) ||
						e.CompressedSize != int64(f.CompressedSize64) || e.DataOffset != off || e.IsDir() != strings.HasSuffix(f.Name, "/") {
						t.Errorf("entry %d: %+v, central directory %+v at %d", i, e, f.FileHeader, off)
					}
					if i+1 < len(got) && got[i+1].HeaderOffset != e.End() {
						t.Errorf("entry %d ends at %d, the next starts at %d", i, e.End(), got[i+1].HeaderOffset)
					}
				}
			})
		}
	}
}

// TestLocalScannerWriters: a zip.Writer's CreateHeader writes data
// descriptors (bit 3), CreateRaw with known sizes does not.
func TestLocalScannerWriters(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	body := []byte("stored with its sizes")
	w, err := zw.CreateRaw(&zip.FileHeader{Name: ManifestName, Method: zip.Store, CRC32: crc32.ChecksumIEEE(body),
		CompressedSize64: uint64(len(body)), UncompressedSize64: uint64(len(body))})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(body)
	w, err = zw.CreateHeader(&zip.FileHeader{Name: "later.txt", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(body)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	got, last, err := scanAll(bytes.NewReader(buf.Bytes()), Limits{})
	if len(got) != 1 || got[0].Name != ManifestName || !errors.Is(err, ErrDataDescriptor) || last.Name != "later.txt" {
		t.Fatalf("entries %+v, then %q: %v", got, last.Name, err)
	}
	rc, err := OpenLocal(bytes.NewReader(buf.Bytes()), got[0], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, err := io.ReadAll(rc); err != nil || !bytes.Equal(b, body) {
		t.Fatalf("read %q, %v", b, err)
	}
}

// TestLocalScannerTruncated: an archive cut anywhere before its central
// directory ends the scan with ErrFormat, never io.EOF, and never an entry
// whose header was not read whole.
func TestLocalScannerTruncated(t *testing.T) {
	b := withManifest(file("a", bytes.Repeat([]byte("x"), 300), zip.Deflate), file("bb", []byte("tiny"), zip.Store)).build(t)
	full, _, err := scanAll(bytes.NewReader(b), Limits{})
	if err != io.EOF || len(full) != 3 {
		t.Fatalf("%d entries, %v", len(full), err)
	}
	end := full[len(full)-1].End()
	for cut := int64(0); cut < end; cut++ {
		got, _, err := scanAll(bytes.NewReader(b[:cut]), Limits{})
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		for _, e := range got {
			if e.DataOffset > cut {
				t.Fatalf("cut at %d: entry %q with data at %d", cut, e.Name, e.DataOffset)
			}
		}
	}
}

// failingReaderAt fails every read with a retryable error.
type failingReaderAt struct{}

func (failingReaderAt) ReadAt([]byte, int64) (int, error) {
	return 0, errclass.Retryablef("disk hiccup")
}

func TestOpenLocal(t *testing.T) {
	text := bytes.Repeat([]byte("open local "), 500)
	zeros := make([]byte, 3<<20)
	tests := []struct {
		name  string
		entry rawEntry
		lim   Limits
		ra    func(b []byte) io.ReaderAt
		want  error // nil: reads the body
		class errclass.Class
	}{
		{name: "stored", entry: file("s", text, zip.Store)},
		{name: "deflated", entry: file("d", text, zip.Deflate)},
		{name: "empty", entry: rawEntry{name: "e", body: []byte{}, method: zip.Deflate}},
		{name: "crc mismatch", entry: rawEntry{name: "c", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.crc ^= 1 }}, want: ErrChecksum},
		{name: "declared longer", entry: rawEntry{name: "l", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.usize += 5 }}, want: ErrSizeMismatch},
		{name: "declared shorter", entry: rawEntry{name: "s", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.usize -= 5 }}, want: ErrSizeMismatch},
		{name: "stored declared longer", entry: rawEntry{name: "s", body: text, patch: func(h *rawHeader) { h.usize += 5; h.csize += 5 }}, want: ErrChecksum},
		{name: "stored data cut", entry: file("s", text, zip.Store), ra: func(b []byte) io.ReaderAt { return bytes.NewReader(b[:300]) }, want: ErrSizeMismatch},
		{name: "deflated data cut", entry: file("d", text, zip.Deflate), ra: func(b []byte) io.ReaderAt { return bytes.NewReader(b[:150]) }, want: ErrCorrupt},
		{name: "corrupt deflate", entry: rawEntry{name: "x", body: text, method: zip.Deflate, raw: bytes.Repeat([]byte{0xff}, 64)}, want: ErrCorrupt},
		{name: "truncated deflate", entry: rawEntry{name: "t", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.csize = 20 }}, want: ErrCorrupt},
		{name: "ratio while inflating", entry: rawEntry{name: "b", body: zeros, method: zip.Deflate, patch: func(h *rawHeader) { h.csize = 3 << 20 }},
			lim: Limits{MaxRatio: 100}, want: ErrRatio},
		{name: "reader error keeps its class", entry: file("r", text, zip.Deflate), ra: func([]byte) io.ReaderAt { return failingReaderAt{} }, class: errclass.Retryable},
	}
	// Each entry is read at its offset (Open) and, unless the test cuts
	// the archive, from its data read already (OpenData): the same checks.
	for _, tc := range tests {
		for _, data := range []bool{false, true} {
			if data && tc.ra != nil {
				continue // OpenData reads no archive
			}
			name := tc.name + "/at offset"
			if data {
				name = tc.name + "/data"
			}
			t.Run(name, func(t *testing.T) { testOpenLocal(t, tc.entry, tc.lim, tc.ra, tc.want, tc.class, data) })
		}
	}
	t.Run("rejected header", func(t *testing.T) {
		for _, e := range []LocalEntry{
			{Name: "../x", Method: zip.Store},
			{Name: "m", Method: 9},
			{Name: "n", Method: zip.Store, Size: -1, CompressedSize: -1},
			{Name: "o", Method: zip.Store, Size: 10, CompressedSize: 10, DataOffset: -5},
		} {
			if _, err := OpenLocal(bytes.NewReader(nil), e, Limits{}); err == nil || !errclass.IsPermanent(err) {
				t.Errorf("%+v: %v", e, err)
			}
			if e.DataOffset < 0 {
				continue // OpenData does not use it
			}
			if _, err := NewLocalOpener(nil, Limits{}).OpenData(e, nil); err == nil || !errclass.IsPermanent(err) {
				t.Errorf("OpenData %+v: %v", e, err)
			}
		}
		e := LocalEntry{Name: "p", Method: zip.Store, Size: 10, CompressedSize: 10}
		if _, err := NewLocalOpener(nil, Limits{}).OpenData(e, make([]byte, 9)); !errors.Is(err, ErrFormat) || !errclass.IsPermanent(err) {
			t.Errorf("OpenData with 9 bytes of 10: %v", err)
		}
	})
}

// testOpenLocal reads the second entry of an archive of entry, from the
// archive's bytes (raOf, when not nil, gives the reader instead) or, with
// data, from its data cut out of them: want is the error expected (nil:
// the entry's body), or class the class of the error.
func testOpenLocal(t *testing.T, entry rawEntry, lim Limits, raOf func([]byte) io.ReaderAt, want error, class errclass.Class, data bool) {
	b := withManifest(entry).build(t)
	// Lying sizes may run the scan off its track after the entry.
	es, _, err := scanAll(bytes.NewReader(b), Limits{})
	if len(es) < 2 {
		t.Fatalf("scan: %d entries, %v", len(es), err)
	}
	var rc io.ReadCloser
	if data {
		// Sizes declared past the archive's end: what would follow.
		e := es[1]
		d := append([]byte(nil), b[e.DataOffset:min(e.End(), int64(len(b)))]...)
		d = append(d, make([]byte, e.CompressedSize-int64(len(d)))...)
		rc, err = NewLocalOpener(nil, lim).OpenData(e, d)
	} else {
		var ra io.ReaderAt = bytes.NewReader(b)
		if raOf != nil {
			ra = raOf(b)
		}
		rc, err = NewLocalOpener(ra, lim).Open(es[1])
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if class != errclass.Unclassified {
		if errclass.Of(err) != class {
			t.Fatalf("read error %v, want class %v", err, class)
		}
		return
	}
	if want == nil {
		if err != nil || !bytes.Equal(got, entry.body) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("read error %v, want %v", err, want)
	}
	if !errclass.IsPermanent(err) {
		t.Errorf("error %v not permanent", err)
	}
	if int64(len(got)) > es[1].Size {
		t.Errorf("read %d bytes, declared %d", len(got), es[1].Size)
	}
	// Sticky after the failure, and after Close.
	if _, again := rc.Read(make([]byte, 10)); again == nil || again == io.EOF {
		t.Errorf("read after failure: %v", again)
	}
}

// FuzzLocalScanner scans arbitrary bytes and reads every entry found. The
// properties: no panic; every error but the clean end is permanent (the
// source is in memory); entries come in order, each starting where the
// last one's data ended, with names Lookup would accept; no read yields
// more than the declared size.
func FuzzLocalScanner(f *testing.F) {
	text := bytes.Repeat([]byte("resourcesync "), 300)
	seeds := []rawArchive{
		withManifest(file("a", text, zip.Deflate), file("b", text, zip.Store)),
		withManifest(file("../evil", text, zip.Store), file("a", text, zip.Store)),
		withManifest(rawEntry{name: "d", body: text, method: zip.Deflate, flags: 0x8}),
		withManifest(rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.usize = 10 }}),
		withManifest(rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.crc++ }}),
		withManifest(rawEntry{name: "x", body: make([]byte, 3<<20), method: zip.Deflate}),
		{zip64: true, entries: []rawEntry{{name: ManifestName, body: manifestBody, zip64: true}, {name: "z", body: text, method: zip.Deflate, zip64: true}}},
		{entries: withManifest(file("a", text, zip.Store)).entries, prefix: []byte("junk"), suffix: []byte("junk")},
	}
	for _, s := range seeds {
		f.Add(s.build(f))
	}
	f.Add(dspaceArchive(f, text))
	f.Add(refusedNamesArchive(f, text))
	f.Add([]byte{})
	f.Add([]byte("PK\x03\x04"))
	lim := Limits{MaxEntries: 100, MaxEntrySize: 4 << 20, MaxTotalSize: 8 << 20, MaxRatio: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewLocalScanner(bytes.NewReader(data), lim)
		op := NewLocalOpener(bytes.NewReader(data), lim)
		var next int64
		for {
			e, err := s.Next()
			if err != nil {
				if err != io.EOF && !errclass.IsPermanent(err) {
					t.Fatalf("scan error not permanent: %v", err)
				}
				return
			}
			if e.HeaderOffset != next || e.DataOffset < e.HeaderOffset+30 || e.End() < e.DataOffset {
				t.Fatalf("entry %+v after offset %d", e, next)
			}
			next = e.End()
			if unsafeName(e.Name) != "" || PathKey(e.Name) != e.Name || e.Size > lim.MaxEntrySize {
				t.Fatalf("entry %+v accepted", e)
			}
			rc, err := op.Open(e)
			if err != nil {
				t.Fatalf("Open of a scanned entry: %v", err)
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil && !errclass.IsPermanent(err) {
				t.Fatalf("read error not permanent: %v", err)
			}
			if n > e.Size || (err == nil && n != e.Size) {
				t.Fatalf("%q: read %d bytes (%v), declared %d", e.Name, n, err, e.Size)
			}
		}
	})
}
