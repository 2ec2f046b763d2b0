package unzip

import (
	"bytes"
	"fmt"
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
