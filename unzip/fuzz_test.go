package unzip

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/klauspost/compress/zip"
	"github.com/rsharvest/rsharvest/errclass"
)

// FuzzOpen opens arbitrary bytes and reads every entry it accepts. The
// properties: no panic; every error is permanent (the source is in memory,
// so nothing is retryable); no entry yields more than its declared size or
// the entry cap, and all reads together stay within the total cap.
func FuzzOpen(f *testing.F) {
	text := bytes.Repeat([]byte("resourcesync "), 300)
	seeds := []rawArchive{
		withManifest(file("a", text, zip.Deflate), file("b", text, zip.Store)),
		withManifest(file("../evil", text, zip.Store), file("a", text, zip.Store), file("a", text, zip.Deflate)),
		withManifest(rawEntry{name: "link", body: []byte("/etc"), creator: creatorUnix, ext: 0o120777 << 16}, rawEntry{name: "d/"}),
		withManifest(rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.usize = 10 }}),
		withManifest(rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.usize += 10 }}),
		withManifest(rawEntry{name: "x", body: text, method: zip.Deflate, patch: func(h *rawHeader) { h.crc++ }}),
		withManifest(rawEntry{name: "x", body: make([]byte, 3<<20), method: zip.Deflate}),
		{zip64: true, entries: []rawEntry{{name: ManifestName, body: manifestBody, zip64: true}, {name: "z", body: text, method: zip.Deflate, zip64: true}}},
		{entries: []rawEntry{file("sub/manifest.xml", manifestBody, zip.Store)}},
		{entries: withManifest(file("a", text, zip.Store)).entries, prefix: []byte("junk"), suffix: []byte("junk")},
	}
	for _, s := range seeds {
		f.Add(s.build(f))
	}
	f.Add([]byte{})
	f.Add([]byte("PK\x05\x06"))
	f.Add(dspaceArchive(f, text))
	f.Add(refusedNamesArchive(f, text))

	lim := Limits{MaxEntries: 100, MaxEntrySize: 4 << 20, MaxTotalSize: 8 << 20, MaxRatio: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Open(bytes.NewReader(data), int64(len(data)), lim)
		if err != nil {
			if !errclass.IsPermanent(err) {
				t.Fatalf("Open error not permanent: %v", err)
			}
			return
		}
		for name, reason := range a.Rejected() {
			if !errclass.IsPermanent(reason) {
				t.Fatalf("rejection of %q not permanent: %v", name, reason)
			}
			if _, err := a.Lookup(name); err == nil {
				t.Fatalf("Lookup of rejected %q succeeded", name)
			}
		}
		files := []*File{a.ManifestFile()}
		for _, name := range a.Unreferenced() {
			// An accepted key is safe, and normalised once for all.
			if why := unsafeName(name); why != "" || PathKey(name) != name {
				t.Fatalf("accepted %q (%s), key of it %q", name, why, PathKey(name))
			}
			fl, err := a.Lookup(name)
			if err != nil {
				t.Fatalf("Lookup(%q) of an unreferenced entry: %v", name, err)
			}
			files = append(files, fl)
		}
		if len(files) != a.Len() || len(a.Unreferenced()) != 0 {
			t.Fatalf("%d files, Len %d", len(files), a.Len())
		}
		var total int64
		for _, fl := range files {
			if fl.Size > lim.MaxEntrySize {
				t.Fatalf("%q: declared %d over the cap", fl.Name, fl.Size)
			}
			rc, err := fl.Open()
			if err != nil {
				if !errclass.IsPermanent(err) {
					t.Fatalf("File.Open error not permanent: %v", err)
				}
				continue
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil && !errclass.IsPermanent(err) {
				t.Fatalf("read error not permanent: %v", err)
			}
			if err == nil && n != fl.Size {
				t.Fatalf("%q: clean read of %d bytes, declared %d", fl.Name, n, fl.Size)
			}
			if n > fl.Size {
				t.Fatalf("%q: read %d bytes, declared %d", fl.Name, n, fl.Size)
			}
			if errors.Is(err, io.EOF) {
				t.Fatalf("%q: io.EOF leaked as an error", fl.Name)
			}
			total += n
		}
		if total > lim.MaxTotalSize {
			t.Fatalf("read %d bytes in all, cap %d", total, lim.MaxTotalSize)
		}
	})
}
