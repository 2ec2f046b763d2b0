package unzip

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/klauspost/compress/zip"
	"github.com/rsharvest/rsharvest/errclass"
)

// TestEntryKey: the one normalisation of names, and what is refused after
// it.
func TestEntryKey(t *testing.T) {
	tests := []struct {
		raw    string
		legacy bool   // written without the UTF-8 flag
		key    string // EntryKey
		unsafe string // unsafeName(key); "" when the key is usable
	}{
		{raw: "manifest.xml", key: "manifest.xml"},
		{raw: "/manifest.xml", key: "manifest.xml"},
		{raw: "/resources/123456789_101/1_file.pdf", key: "resources/123456789_101/1_file.pdf"},
		{raw: `\resources\123456789_101\1_file.pdf`, key: "resources/123456789_101/1_file.pdf"},
		{raw: `/resources\mixed/sep.pdf`, key: "resources/mixed/sep.pdf"},
		{raw: "sub dir/café über.txt", key: "sub dir/café über.txt"},
		{raw: "r\x82sum\x82 \x9a.txt", legacy: true, key: "résumé Ü.txt"},
		{raw: `dir\caf` + "\x82", legacy: true, key: "dir/café"},
		{raw: "café.txt", legacy: true, key: "café.txt"},                   // valid UTF-8 without the flag: read as UTF-8
		{raw: "caf\x82.txt", key: "caf\x82.txt"},                           // the UTF-8 flag is believed, even when wrong
		{raw: "plain.txt", legacy: true, key: "plain.txt"},                 // ASCII is ASCII either way
		{raw: "//etc/passwd", key: "/etc/passwd", unsafe: "absolute name"}, // one leading slash only
		{raw: `\\server\share\x`, key: "/server/share/x", unsafe: "absolute name"},
		{raw: `\/x`, key: "/x", unsafe: "absolute name"},
		{raw: "/../evil", key: "../evil", unsafe: `".." segment`},
		{raw: `a\..\..\x`, key: "a/../../x", unsafe: `".." segment`},
		{raw: `\..`, key: "..", unsafe: `".." segment`},
		{raw: "/C:/x", key: "C:/x", unsafe: "drive letter"},
		{raw: `C:\x`, key: "C:/x", unsafe: "drive letter"},
		{raw: `\c:x`, key: "c:x", unsafe: "drive letter"},
		{raw: "/a\x00b", key: "a\x00b", unsafe: "control character"},
		{raw: "a\x01\x82", legacy: true, key: "a\x01é", unsafe: "control character"},
		{raw: "a\x7f\x82", legacy: true, key: "a\x7fé", unsafe: "control character"},
		{raw: "", key: "", unsafe: "empty name"},
		{raw: "/", key: "", unsafe: "empty name"},
		{raw: `\`, key: "", unsafe: "empty name"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.raw), func(t *testing.T) {
			var flags uint16 = flagUTF8
			if tt.legacy {
				flags = 0
			}
			key := EntryKey([]byte(tt.raw), flags)
			if key != tt.key {
				t.Fatalf("EntryKey(%q, %#x) = %q, want %q", tt.raw, flags, key, tt.key)
			}
			if why := unsafeName(key); why != tt.unsafe {
				t.Fatalf("unsafeName(%q) = %q, want %q", key, why, tt.unsafe)
			}
			// A manifest path written as the entry's name has the same key.
			if !tt.legacy {
				if p := PathKey(tt.raw); p != key {
					t.Fatalf("PathKey(%q) = %q, EntryKey %q", tt.raw, p, key)
				}
			}
			// A usable key is its own key: nothing normalises twice.
			if tt.unsafe == "" && PathKey(key) != key {
				t.Fatalf("PathKey(%q) = %q", key, PathKey(key))
			}
		})
	}
}

// TestProducerNames reads archives named as producers name their entries,
// through the central directory (Open) and through the local headers
// (LocalScanner): both know each entry by the same key; what is unsafe or
// ambiguous after normalisation is refused with its reason, and every other
// entry is accepted.
func TestProducerNames(t *testing.T) {
	body := []byte("bitstream bytes, bitstream bytes, bitstream bytes")
	legacy := func(name string) rawEntry { return rawEntry{name: name, body: body, legacyName: true} }
	f := func(name string) rawEntry { return file(name, body, zip.Deflate) }
	tests := []struct {
		name    string
		entries []rawEntry       // after manifest.xml
		keys    []string         // the entries' keys, in order
		refused map[string]error // key → reason (every copy of a duplicate)
	}{
		{name: "DSpace: leading slash", entries: []rawEntry{f("/resources/123456789_101/1_file.pdf"), f("/resources/123456789_101/2_file.pdf")},
			keys: []string{"resources/123456789_101/1_file.pdf", "resources/123456789_101/2_file.pdf"}},
		{name: "DSpace on Windows: leading backslash", entries: []rawEntry{f(`\resources\123456789_101\1_file.pdf`), f(`\resources\2.pdf`)},
			keys: []string{"resources/123456789_101/1_file.pdf", "resources/2.pdf"}},
		{name: "mixed separators", entries: []rawEntry{f(`/resources\a/b.pdf`), f(`a\b`)}, keys: []string{"resources/a/b.pdf", "a/b"}},
		{name: "CP437 names without the UTF-8 flag", entries: []rawEntry{legacy("r\x82sum\x82.txt"), legacy(`\dir\` + "\x9a"), legacy("plain.txt")},
			keys: []string{"résumé.txt", "dir/Ü", "plain.txt"}},
		{name: "UTF-8 flag: the name is left alone", entries: []rawEntry{f("café.txt"), f("caf\x82.txt")}, keys: []string{"café.txt", "caf\x82.txt"}},
		{name: "duplicate after removing the leading slash", entries: []rawEntry{f("/a.txt"), f("b.txt"), f("a.txt")},
			keys: []string{"a.txt", "b.txt", "a.txt"}, refused: map[string]error{"a.txt": ErrDuplicate}},
		{name: "duplicate after reading backslashes", entries: []rawEntry{f(`a\b`), f("c"), f("a/b")},
			keys: []string{"a/b", "c", "a/b"}, refused: map[string]error{"a/b": ErrDuplicate}},
		{name: "duplicate after CP437 decoding", entries: []rawEntry{legacy("caf\x82"), f("ok"), f("/café")},
			keys: []string{"café", "ok", "café"}, refused: map[string]error{"café": ErrDuplicate}},
		{name: "still absolute after one leading slash", entries: []rawEntry{f("//etc/passwd"), f("/ok")},
			keys: []string{"/etc/passwd", "ok"}, refused: map[string]error{"/etc/passwd": ErrUnsafePath}},
		{name: "UNC path", entries: []rawEntry{f(`\\server\share\x`), f("/ok")},
			keys: []string{"/server/share/x", "ok"}, refused: map[string]error{"/server/share/x": ErrUnsafePath}},
		{name: "dot-dot after reading backslashes", entries: []rawEntry{f(`a\..\..\x`), f("/ok")},
			keys: []string{"a/../../x", "ok"}, refused: map[string]error{"a/../../x": ErrUnsafePath}},
		{name: "dot-dot after removing the leading slash", entries: []rawEntry{f("/../x"), f("/ok")},
			keys: []string{"../x", "ok"}, refused: map[string]error{"../x": ErrUnsafePath}},
		{name: "drive letter after removing the leading slash", entries: []rawEntry{f("/C:/x"), f("/ok")},
			keys: []string{"C:/x", "ok"}, refused: map[string]error{"C:/x": ErrUnsafePath}},
		{name: "drive letter with backslashes", entries: []rawEntry{f(`\c:\x`), f("/ok")},
			keys: []string{"c:/x", "ok"}, refused: map[string]error{"c:/x": ErrUnsafePath}},
		{name: "NUL after removing the leading slash", entries: []rawEntry{f("/a\x00b"), f("/ok")},
			keys: []string{"a\x00b", "ok"}, refused: map[string]error{"a\x00b": ErrUnsafePath}},
		{name: "control character in a CP437 name", entries: []rawEntry{legacy("a\x01\x82"), f("/ok")},
			keys: []string{"a\x01é", "ok"}, refused: map[string]error{"a\x01é": ErrUnsafePath}},
		{name: "empty after removing the leading slash", entries: []rawEntry{f("/"), f("/ok")},
			keys: []string{"", "ok"}, refused: map[string]error{"": ErrUnsafePath}},
	}
	for _, tt := range tests {
		data := withManifest(tt.entries...).build(t)
		var accepted []string
		for _, k := range tt.keys {
			if tt.refused[k] == nil {
				accepted = append(accepted, k)
			}
		}
		t.Run(tt.name+"/central directory", func(t *testing.T) {
			a := open(t, data, Limits{})
			if a.Len() != 1+len(accepted) {
				t.Fatalf("Len = %d, want %d", a.Len(), 1+len(accepted))
			}
			if u := a.Unreferenced(); !slices.Equal(u, accepted) {
				t.Fatalf("Unreferenced = %q, want %q", u, accepted)
			}
			rejected := a.Rejected()
			if len(rejected) != len(tt.refused) {
				t.Fatalf("Rejected = %v, want %v", rejected, tt.refused)
			}
			for k, want := range tt.refused {
				wantErr(t, rejected[k], want)
				_, err := a.Lookup("/" + k)
				wantErr(t, err, want)
			}
			for i, k := range tt.keys {
				if tt.refused[k] != nil {
					continue
				}
				// By the key, and, unless the name is CP437, by the name
				// as the producer wrote it in its manifest too.
				paths := []string{"/" + k}
				if !tt.entries[i].legacyName {
					paths = append(paths, tt.entries[i].name)
				}
				for _, p := range paths {
					fl, err := a.Lookup(p)
					wantErr(t, err, nil)
					if fl.Name != k {
						t.Fatalf("Lookup(%q) = %q, want %q", p, fl.Name, k)
					}
					got, err := readAll(t, fl)
					wantErr(t, err, nil)
					if !bytes.Equal(got, body) {
						t.Fatalf("%q: read %q", k, got)
					}
				}
			}
			if u := a.Unreferenced(); len(u) != 0 {
				t.Fatalf("Unreferenced after every lookup = %q", u)
			}
		})
		t.Run(tt.name+"/local headers", func(t *testing.T) {
			// The scan ends at the first entry refused by its header; a
			// duplicate is the caller's to see: it gets the same key twice.
			wantNames, wantErr := []string{ManifestName}, error(io.EOF)
			failed := ""
			for _, k := range tt.keys {
				if why := tt.refused[k]; why != nil && !errors.Is(why, ErrDuplicate) {
					wantErr, failed = why, k
					break
				}
				wantNames = append(wantNames, k)
			}
			got, last, err := scanAll(bytes.NewReader(data), Limits{})
			if !errors.Is(err, wantErr) {
				t.Fatalf("scan ended with %v, want %v", err, wantErr)
			}
			if err != io.EOF && (!errclass.IsPermanent(err) || last.Name != failed) {
				t.Fatalf("scan error %v about %q (permanent %v), want it about %q", err, last.Name, errclass.IsPermanent(err), failed)
			}
			var names []string
			for _, e := range got {
				names = append(names, e.Name)
			}
			if !slices.Equal(names, wantNames) {
				t.Fatalf("scanned %q, want %q", names, wantNames)
			}
			op := NewLocalOpener(bytes.NewReader(data), Limits{})
			for _, e := range got[1:] {
				rc, err := op.Open(e)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(b, body) {
					t.Fatalf("%q: read %q, %v", e.Name, b, err)
				}
			}
		})
	}
}

// TestManifestNames: the manifest is found by its key, stored first or
// last (DSpace writes it last), with or without a leading separator; two
// entries with its key are two manifests.
func TestManifestNames(t *testing.T) {
	body := []byte("bytes")
	res := file("/resources/1_file.pdf", body, zip.Deflate)
	tests := []struct {
		name    string
		entries []rawEntry
		want    error // of Open
		scanned string
	}{
		{name: "DSpace: resources, then manifest.xml", entries: []rawEntry{res, file(ManifestName, manifestBody, zip.Deflate)}},
		{name: "/manifest.xml last", entries: []rawEntry{res, file("/manifest.xml", manifestBody, zip.Deflate)}},
		{name: `\manifest.xml first`, entries: []rawEntry{file(`\manifest.xml`, manifestBody, zip.Store), res}, scanned: ManifestName},
		{name: "/manifest.xml first", entries: []rawEntry{file("/manifest.xml", manifestBody, zip.Store), res}, scanned: ManifestName},
		{name: "manifest.xml and /manifest.xml", entries: []rawEntry{file(ManifestName, manifestBody, zip.Store), res, file("/manifest.xml", manifestBody, zip.Store)},
			want: ErrManifestDuplicate, scanned: ManifestName},
		{name: "//manifest.xml is not at the top", entries: []rawEntry{res, file("//manifest.xml", manifestBody, zip.Store)}, want: ErrNoManifest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := rawArchive{entries: tt.entries}.build(t)
			a, err := Open(bytes.NewReader(data), int64(len(data)), Limits{})
			if tt.want != nil {
				wantErr(t, err, tt.want)
			} else {
				wantErr(t, err, nil)
				if m := a.ManifestFile(); m.Name != ManifestName {
					t.Fatalf("manifest named %q", m.Name)
				}
				rc, err := a.Manifest()
				wantErr(t, err, nil)
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(b, manifestBody) {
					t.Fatalf("manifest read %q, %v", b, err)
				}
				if u := a.Unreferenced(); !slices.Equal(u, []string{"resources/1_file.pdf"}) {
					t.Fatalf("Unreferenced = %q", u)
				}
			}
			first, err := NewLocalScanner(bytes.NewReader(data), Limits{}).Next()
			if err != nil {
				t.Fatal(err)
			}
			if tt.scanned != "" && first.Name != tt.scanned {
				t.Fatalf("first local entry %q, want %q", first.Name, tt.scanned)
			}
		})
	}
}

// TestProducerNamesMany: with more records than are read back one by one,
// Unreferenced and Rejected stream the central directory and name the
// entries by their keys all the same.
func TestProducerNamesMany(t *testing.T) {
	n := fewRecords + 44
	var entries []rawEntry
	var accepted []string
	for i := range n {
		entries = append(entries,
			file(fmt.Sprintf("/resources/%d.pdf", i), []byte("r"), zip.Store),
			file(fmt.Sprintf(`\resources\..\..\%d`, i), []byte("x"), zip.Store))
		accepted = append(accepted, fmt.Sprintf("resources/%d.pdf", i))
	}
	entries = append(entries, file("/manifest.xml", manifestBody, zip.Deflate))
	a := open(t, rawArchive{entries: entries}.build(t), Limits{})
	if u := a.Unreferenced(); !slices.Equal(u, accepted) {
		t.Fatalf("Unreferenced: %d names, want %d (first %q)", len(u), len(accepted), u[:min(3, len(u))])
	}
	rejected := a.Rejected()
	if len(rejected) != n {
		t.Fatalf("%d rejected, want %d", len(rejected), n)
	}
	for i := range n {
		wantErr(t, rejected[fmt.Sprintf("resources/../../%d", i)], ErrUnsafePath)
	}
}

// refusedNamesArchive holds names that stay refused after normalisation,
// each next to an accepted one: a seed for the fuzz targets.
func refusedNamesArchive(tb testing.TB, text []byte) []byte {
	return withManifest(
		file("/ok", text, zip.Deflate),
		file(`a\..\..\x`, text, zip.Store),
		file("/C:/x", text, zip.Store),
		file("//abs", text, zip.Store),
		file("/nul\x00", text, zip.Store),
		rawEntry{name: "ctl\x01\x82", body: text, legacyName: true},
		file(`\dup`, text, zip.Store), file("dup", text, zip.Deflate),
		file("/", text, zip.Store),
	).build(tb)
}
