package unzip

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/zip"
)

// TestOverlappingEntries: central-directory records that point at the
// same compressed bytes (a small package that would write far more than it
// holds), or at bytes inside another entry's, make Open fail; so do
// entries whose declared sizes add up to more than the ratio limit allows
// of the package's size.
func TestOverlappingEntries(t *testing.T) {
	zeros := bytes.Repeat([]byte{0}, 200_000)
	sameBytes := func(target int) func(h *rawHeader, all []rawHeader) {
		return func(h *rawHeader, all []rawHeader) {
			o := all[target]
			h.offset, h.csize, h.usize, h.crc, h.method = o.offset, o.csize, o.usize, o.crc, o.method
		}
	}
	many := func(n int, f func(i int) rawEntry) []rawEntry {
		var out []rawEntry
		for i := range n {
			out = append(out, f(i))
		}
		return out
	}
	tests := []struct {
		name    string
		archive rawArchive
		want    error // of Open
	}{
		{"honest entries", withManifest(file("a", zeros, zip.Deflate), file("b", zeros, zip.Deflate)), nil},
		{"two records, one entry's bytes", withManifest(file("a", zeros, zip.Deflate),
			rawEntry{name: "b", body: []byte("x"), method: zip.Store, creator: creatorUnix, ext: 0o100644 << 16, central: sameBytes(1)}), ErrOverlap},
		{"a thousand records, one entry's bytes", withManifest(append([]rawEntry{file("a", zeros, zip.Deflate)},
			many(1000, func(i int) rawEntry {
				return rawEntry{name: fmt.Sprint("c", i), body: []byte("x"), method: zip.Store, creator: creatorUnix, ext: 0o100644 << 16, central: sameBytes(1)}
			})...)...), ErrOverlap},
		{"a record inside another entry's data", withManifest(file("a", zeros, zip.Store),
			rawEntry{name: "b", body: []byte("x"), method: zip.Store, creator: creatorUnix, ext: 0o100644 << 16,
				central: func(h *rawHeader, all []rawHeader) { h.offset = all[1].offset + 1000 }}), ErrOverlap},
		{"declared sizes past the ratio, each exempt", withManifest(many(100, func(i int) rawEntry {
			return rawEntry{name: fmt.Sprint("s", i), body: []byte("0123456789"), method: zip.Deflate, creator: creatorUnix, ext: 0o100644 << 16,
				patch: func(h *rawHeader) { h.usize = RatioExemptSize - 1 }}
		})...), ErrRatio},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.archive.build(t)
			_, err := Open(bytes.NewReader(data), int64(len(data)), Limits{})
			wantErr(t, err, tc.want)
		})
	}
}

// TestLocalNameMismatch: an entry whose central-directory record names
// another entry than its local header is malformed: opening it fails
// (permanently), and the other entries read.
func TestLocalNameMismatch(t *testing.T) {
	data := withManifest(
		file("a", []byte("alpha"), zip.Store),
		rawEntry{name: "b", body: []byte("beta"), method: zip.Store, creator: creatorUnix, ext: 0o100644 << 16,
			central: func(h *rawHeader, _ []rawHeader) { h.name = "c" }},
	).build(t)
	a, err := Open(bytes.NewReader(data), int64(len(data)), Limits{})
	wantErr(t, err, nil)
	f, err := a.Lookup("c")
	wantErr(t, err, nil)
	_, err = f.Open()
	wantErr(t, err, ErrNameMismatch)
	f, err = a.Lookup("a")
	wantErr(t, err, nil)
	rc, err := f.Open()
	wantErr(t, err, nil)
	b, err := io.ReadAll(rc)
	if err != nil || string(b) != "alpha" {
		t.Errorf("a: %q, %v", b, err)
	}
}

// TestDataIntoTheNextHeader: an entry whose data, placed after its local
// header's name and extra field, runs into the next entry's local header
// or into the central directory shares bytes with it: reading it fails
// with ErrOverlap (the central directory's sizes alone cannot tell, so
// the archive opens), and the other entries read. One case hides a second
// entry's local header inside the first's extra field, whose own extra
// field leads to the first's data: two records, one entry's bytes.
func TestDataIntoTheNextHeader(t *testing.T) {
	data := bytes.Repeat([]byte("shared bytes "), 8)
	crc := crc32.ChecksumIEEE(data)
	var hidden bytes.Buffer
	hidden.Write(storedLocalHeader(ManifestName, 0, crc32.ChecksumIEEE(manifestBody), len(manifestBody)))
	hidden.Write(manifestBody)
	const extraA = 2000
	aOff := hidden.Len()
	hidden.Write(storedLocalHeader("a", extraA, crc, len(data)))
	extraStart := hidden.Len()
	dataStart := extraStart + extraA
	extra := make([]byte, extraA)
	bOff := aOff + lenLocal + len(data) // past a's header and data, as the central directory's sizes place them
	copy(extra[bOff-extraStart:], storedLocalHeader("b", dataStart-(bOff+lenLocal+1), crc, len(data)))
	hidden.Write(extra)
	hidden.Write(data)
	cdStart := hidden.Len()
	hidden.Write(storedCentralRecord(ManifestName, crc32.ChecksumIEEE(manifestBody), len(manifestBody), 0))
	hidden.Write(storedCentralRecord("a", crc, len(data), aOff))
	hidden.Write(storedCentralRecord("b", crc, len(data), bOff))
	var end le
	end.u32(sigEOCD)
	end.u16(0)
	end.u16(0)
	end.u16(3)
	end.u16(3)
	end.u32(uint32(hidden.Len() - cdStart))
	end.u32(uint32(cdStart))
	end.u16(0)
	hidden.Write(end.b.Bytes())

	tests := []struct {
		name    string
		archive []byte
		overlap string // the entry whose data runs into another's header
	}{
		{"a header in another's extra field", hidden.Bytes(), "a"},
		{"data into the central directory", withManifest(rawEntry{name: "a", body: bytes.Repeat([]byte("into the directory "), 100),
			method: zip.Deflate, creator: creatorUnix, ext: 0o100644 << 16,
			patch: func(h *rawHeader) { h.csize += 40 }}).build(t), "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Open(bytes.NewReader(tc.archive), int64(len(tc.archive)), Limits{})
			wantErr(t, err, nil)
			f, err := a.Lookup(tc.overlap)
			wantErr(t, err, nil)
			_, err = f.Open()
			wantErr(t, err, ErrOverlap)
			_, err = f.DataOffset()
			wantErr(t, err, ErrOverlap)
			m, err := a.Lookup(ManifestName)
			wantErr(t, err, nil)
			if b, err := readAll(t, m); err != nil || !bytes.Equal(b, manifestBody) {
				t.Errorf("manifest = %q, %v", b, err)
			}
		})
	}
}

// storedLocalHeader is a stored entry's local header, announcing an extra
// field of extraLen bytes the caller writes.
func storedLocalHeader(name string, extraLen int, crc uint32, size int) []byte {
	var w le
	w.u32(sigLocal)
	w.u16(20)
	w.u16(0x800)
	w.u16(0) // stored
	w.u16(0)
	w.u16(0)
	w.u32(crc)
	w.u32(uint32(size))
	w.u32(uint32(size))
	w.u16(uint16(len(name)))
	w.u16(uint16(extraLen))
	w.b.WriteString(name)
	return w.b.Bytes()
}

// storedCentralRecord is a stored entry's central-directory record, its
// local header at off.
func storedCentralRecord(name string, crc uint32, size int, off int) []byte {
	var w le
	w.u32(sigDirHeader)
	w.u16(3<<8 | 20)
	w.u16(20)
	w.u16(0x800)
	w.u16(0)
	w.u16(0)
	w.u16(0)
	w.u32(crc)
	w.u32(uint32(size))
	w.u32(uint32(size))
	w.u16(uint16(len(name)))
	w.u16(0)
	w.u16(0)
	w.u16(0)
	w.u16(0)
	w.u32(0o100644 << 16)
	w.u32(uint32(off))
	w.b.WriteString(name)
	return w.b.Bytes()
}
