// Package hostile builds, by code, a ResourceSync source whose packages
// carry one item each of the hostile-input checklist (DESIGN.md): entry
// names that stay unsafe once normalised as producers' names are (one
// leading "/" removed, "\" read as "/"): zip-slip, also through backslashes,
// names still absolute, drive letters; symlinks and devices, duplicate
// names, also after normalisation, lying sizes,
// compression bombs, too many entries, truncated archives and trailing junk,
// missing or misplaced manifests, inventory mismatches, wrong hashes and
// lengths, missing and unknown hashes, malformed datetimes, DOCTYPEs, deep
// nesting and huge tokens; and resource URIs that map, carelessly, to ".",
// "..", NUL, control characters, invalid UTF-8, over-long names or names
// that collide by case (those must be delivered, inside the sink).
//
// Every hostile package also carries good resources, so a test can check
// that one bad item fails alone and everything else is delivered. Build
// writes the source to a directory (documents with the
// "http://127.0.0.1:PORTX/" placeholder that bench.Serve rewrites) and
// returns what a correct destination must end up with.
package hostile

import (
	"archive/zip"
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
)

// Base is the URL placeholder of the documents Build writes.
const Base = "http://127.0.0.1:PORTX/"

// Limits the hostile source is built for: a destination must run with caps
// at most these for the cap cases to trip (the defaults are far higher).
const (
	MaxEntries = 100
	MaxRatio   = 100
)

// Case is one checklist item: the package that carries it and what a
// destination must do with it.
type Case struct {
	// Name names the checklist item.
	Name string
	// Package is the package's URL (with the Base placeholder).
	Package string
	// PackageError, when set, is a substring of the error that fails the
	// whole package; none of its resources can be delivered.
	PackageError string
	// Failed maps the URIs that must fail to a substring of their error.
	Failed map[string]string
	// Good are the resources that must be delivered, with their bodies.
	Good map[string][]byte
	// Unreferenced are ZIP entries absent from the manifest, to be reported
	// and skipped.
	Unreferenced []string
}

// Source is the hostile source Build wrote.
type Source struct {
	// Dump is the Resource Dump's URL (with the Base placeholder).
	Dump  string
	Cases []Case
}

// entry is one resource of a package under construction.
type entry struct {
	uri, path string
	zipName   string // the entry's name in the ZIP; "" is path without its leading "/"
	body      []byte
	md        func(*manifest.Metadata) // edits the manifest entry (lies)
	lastmod   string                   // raw lastmod; "" = a valid one
	noZip     bool                     // listed in the manifest only
	bad       bool                     // must fail
}

type pkg struct {
	name     string
	entries  []entry
	manifest []byte // the manifest.xml bytes (built from entries unless set)
	files    func(w *zip.Writer) error
	post     func([]byte) []byte // edits the finished archive bytes
	noMan    bool
}

func body(caseName string, i int) []byte {
	return []byte(strings.Repeat(fmt.Sprintf("%s resource %d. ", caseName, i), 20+i))
}

func uri(caseName, name string) string {
	return "http://example.org/hostile/" + caseName + "/" + name
}

var modTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// good returns n good entries for a case.
func good(caseName string, n int) []entry {
	var es []entry
	for i := range n {
		name := fmt.Sprintf("good%d.txt", i)
		es = append(es, entry{uri: uri(caseName, name), path: "/" + name, body: body(caseName, i)})
	}
	return es
}

func hashes(b []byte) fixity.Hashes {
	m := md5.Sum(b)
	s := sha256.Sum256(b)
	return fixity.Hashes{MD5: m[:], SHA256: s[:]}
}

// manifestXML renders a manifest for es, raw lastmods spliced in.
func manifestXML(es []entry) ([]byte, error) {
	var buf bytes.Buffer
	md := manifest.NewMetadata()
	md.Capability = manifest.ResourceDumpManifest
	md.At = modTime
	w, err := manifest.NewWriter(&buf, manifest.Header{Root: manifest.URLSet, Metadata: md})
	if err != nil {
		return nil, err
	}
	var raws []string
	for i, e := range es {
		m := manifest.NewMetadata()
		m.Hashes = hashes(e.body)
		m.Length = int64(len(e.body))
		m.Path = e.path
		m.Type = "text/plain"
		if e.md != nil {
			e.md(&m)
		}
		ent := &manifest.Entry{Loc: e.uri, Lastmod: modTime, Metadata: m}
		if e.lastmod != "" {
			ent.Lastmod = modTime.Add(time.Duration(i+1) * time.Hour)
			raws = append(raws, manifest.FormatDatetime(ent.Lastmod), e.lastmod)
		}
		if err := w.Write(ent); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	out := buf.String()
	for i := 0; i < len(raws); i += 2 {
		out = strings.Replace(out, raws[i], raws[i+1], 1)
	}
	return []byte(out), nil
}

func (p *pkg) build() ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	if !p.noMan {
		m := p.manifest
		if m == nil {
			var err error
			if m, err = manifestXML(p.entries); err != nil {
				return nil, err
			}
		}
		if err := add(zw, "manifest.xml", m, zip.Store); err != nil {
			return nil, err
		}
	}
	for _, e := range p.entries {
		if e.noZip {
			continue
		}
		name := e.zipName
		if name == "" {
			name = strings.TrimPrefix(e.path, "/")
		}
		if err := add(zw, name, e.body, zip.Deflate); err != nil {
			return nil, err
		}
	}
	if p.files != nil {
		if err := p.files(zw); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if p.post != nil {
		b = p.post(b)
	}
	return b, nil
}

func add(zw *zip.Writer, name string, b []byte, method uint16) error {
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method, Modified: modTime})
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// addMode adds an entry with a Unix mode (symlink, device …).
func addMode(zw *zip.Writer, name string, b []byte, mode fs.FileMode) error {
	h := &zip.FileHeader{Name: name, Method: zip.Store, Modified: modTime}
	h.SetMode(mode)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// addLying adds a stored entry whose headers declare size bytes and the
// CRC of the declared prefix, while the data holds all of b.
func addLying(zw *zip.Writer, name string, b []byte, declared int) error {
	h := &zip.FileHeader{Name: name, Method: zip.Store, Modified: modTime,
		CompressedSize64: uint64(len(b)), UncompressedSize64: uint64(declared), CRC32: crc32.ChecksumIEEE(b[:min(declared, len(b))])}
	w, err := zw.CreateRaw(h)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// cases returns every checklist item.
func cases() []pkg {
	var ps []pkg
	withBad := func(name string, bad entry, extra func(*pkg)) {
		bad.bad = true
		p := pkg{name: name, entries: append(good(name, 3), bad)}
		if extra != nil {
			extra(&p)
		}
		ps = append(ps, p)
	}
	// withOdd adds a package whose odd entry is valid input after all, to
	// be delivered like the good ones.
	withOdd := func(name string, odd entry) {
		ps = append(ps, pkg{name: name, entries: append(good(name, 3), odd)})
	}
	// ZIP names: a name is matched after one leading "/" is removed and
	// "\" read as "/" (as DSpace writes them, "/resources/…" or
	// "\resources\…"); these stay unsafe after that, the entry and the
	// manifest path alike.
	withBad("zip-slip", entry{uri: uri("zip-slip", "evil"), path: "/../evil.txt", body: []byte("escaped")}, nil)
	withBad("absolute-path", entry{uri: uri("absolute-path", "abs"), path: "//etc/abs.txt", zipName: "//etc/abs.txt", body: []byte("absolute")}, nil)
	withBad("windows-path", entry{uri: uri("windows-path", "win"), path: `/C:\win.txt`, zipName: `\C:\win.txt`, body: []byte("windows")}, nil)
	withBad("backslash-slip", entry{uri: uri("backslash-slip", "bs"), path: `/res\..\..\bs.txt`, zipName: `res\..\..\bs.txt`, body: []byte("backslash")}, nil)
	// Entry types.
	withBad("symlink", entry{uri: uri("symlink", "link"), path: "/link", body: []byte("/etc/passwd"), noZip: true}, func(p *pkg) {
		p.files = func(zw *zip.Writer) error { return addMode(zw, "link", []byte("/etc/passwd"), fs.ModeSymlink|0o777) }
	})
	withBad("device", entry{uri: uri("device", "dev"), path: "/dev0", body: []byte{}, noZip: true}, func(p *pkg) {
		p.files = func(zw *zip.Writer) error { return addMode(zw, "dev0", nil, fs.ModeDevice|fs.ModeCharDevice|0o600) }
	})
	withBad("duplicate-name", entry{uri: uri("duplicate-name", "dup"), path: "/dup.txt", body: []byte("first")}, func(p *pkg) {
		p.files = func(zw *zip.Writer) error { return add(zw, "dup.txt", []byte("second"), zip.Store) }
	})
	// Names are matched after one leading "/" is removed and "\" made "/"
	// (as DSpace writes them): two names that then agree are ambiguous.
	withBad("duplicate-after-normalisation", entry{uri: uri("duplicate-after-normalisation", "dup"), path: "/dup.txt", body: []byte("first")}, func(p *pkg) {
		p.files = func(zw *zip.Writer) error { return add(zw, "/dup.txt", []byte("second"), zip.Store) }
	})
	// Sizes and caps.
	lie := bytes.Repeat([]byte("L"), 4096)
	withBad("size-lies", entry{uri: uri("size-lies", "lie"), path: "/lie.bin", body: lie[:100], noZip: true}, func(p *pkg) {
		p.files = func(zw *zip.Writer) error { return addLying(zw, "lie.bin", lie, 100) }
	})
	bomb := make([]byte, 8<<20)
	withBad("compression-bomb", entry{uri: uri("compression-bomb", "bomb"), path: "/bomb.bin", body: bomb}, nil)
	many := pkg{name: "too-many-entries", entries: good("too-many-entries", MaxEntries+5)}
	ps = append(ps, many)
	ps = append(ps, pkg{name: "truncated", entries: good("truncated", 3), post: func(b []byte) []byte { return b[:len(b)/2] }})
	ps = append(ps, pkg{name: "trailing-junk", entries: good("trailing-junk", 3), post: func(b []byte) []byte {
		return append(append([]byte{}, b...), bytes.Repeat([]byte("JUNK"), 64)...)
	}})
	// Manifests.
	ps = append(ps, pkg{name: "manifest-missing", entries: good("manifest-missing", 2), noMan: true})
	ps = append(ps, pkg{name: "manifest-not-at-top", entries: good("manifest-not-at-top", 2), noMan: true, files: func(zw *zip.Writer) error {
		m, err := manifestXML(good("manifest-not-at-top", 2))
		if err != nil {
			return err
		}
		return add(zw, "sub/manifest.xml", m, zip.Deflate)
	}})
	ps = append(ps, pkg{name: "manifest-twice", entries: good("manifest-twice", 2), files: func(zw *zip.Writer) error {
		m, err := manifestXML(good("manifest-twice", 2))
		if err != nil {
			return err
		}
		return add(zw, "manifest.xml", m, zip.Deflate)
	}})
	withBad("path-not-in-zip", entry{uri: uri("path-not-in-zip", "absent"), path: "/absent.txt", body: []byte("absent"), noZip: true}, nil)
	ps = append(ps, pkg{name: "entry-not-in-manifest", entries: good("entry-not-in-manifest", 2), files: func(zw *zip.Writer) error {
		return add(zw, "stowaway.txt", []byte("not listed"), zip.Deflate)
	}})
	withBad("wrong-hash", entry{uri: uri("wrong-hash", "h"), path: "/h.txt", body: []byte("hashed"), md: func(m *manifest.Metadata) { m.Hashes.SHA256[0] ^= 0xff }}, nil)
	withBad("wrong-md5-only", entry{uri: uri("wrong-md5-only", "h"), path: "/h.txt", body: []byte("hashed"), md: func(m *manifest.Metadata) { m.Hashes.MD5[0] ^= 0xff; m.Hashes.SHA256 = nil }}, nil)
	withBad("wrong-length", entry{uri: uri("wrong-length", "l"), path: "/l.txt", body: []byte("lengthy"), md: func(m *manifest.Metadata) { m.Length++ }}, nil)
	// Hash and length are optional (the specification's own words): an
	// entry without a usable hash is delivered after its length and CRC-32
	// checks; --require-hash refuses it (TestRequireHash).
	withOdd("missing-hash", entry{uri: uri("missing-hash", "nh"), path: "/nh.txt", body: []byte("no hash"), md: func(m *manifest.Metadata) { m.Hashes = fixity.Hashes{} }})
	withOdd("unknown-hash", entry{uri: uri("unknown-hash", "uh"), path: "/uh.txt", body: []byte("unknown hash"), md: func(m *manifest.Metadata) {
		m.Hashes = fixity.Hashes{Unknown: []string{"sha-384:00ff"}}
	}})
	withBad("malformed-hash", entry{uri: uri("malformed-hash", "mh"), path: "/mh.txt", body: []byte("malformed hash"), md: func(m *manifest.Metadata) {
		m.Hashes = fixity.Hashes{Unknown: []string{"sha-512:00ff"}}
	}}, nil)
	// A snapshot's lastmod is informative: one that cannot be read is
	// dropped with a warning and the resource, whose body verifies, kept.
	withOdd("malformed-datetime", entry{uri: uri("malformed-datetime", "dt"), path: "/dt.txt", body: []byte("when"), lastmod: "2013-13-45T99:99Z"})
	doctype := pkg{name: "doctype", entries: good("doctype", 2)}
	doctype.manifest = []byte(`<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>` +
		`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="resourcedump-manifest"/><url><loc>&lol2;</loc></url></urlset>`)
	ps = append(ps, doctype)
	deep := pkg{name: "deep-nesting", entries: good("deep-nesting", 2)}
	deep.manifest = []byte(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="resourcedump-manifest"/>` +
		strings.Repeat("<x>", 10000) + strings.Repeat("</x>", 10000) + `</urlset>`)
	ps = append(ps, deep)
	// Filesystem: URIs a careless mirror would map to ".", "..", NUL,
	// control characters, invalid UTF-8, names over 255 bytes, or one name
	// for two URIs on a case-insensitive filesystem. Each is a valid
	// resource: it must be delivered, inside the sink, distinct from the
	// others.
	fsCase := func(name string, uris ...string) {
		p := pkg{name: name, entries: good(name, 2)}
		for i, u := range uris {
			p.entries = append(p.entries, entry{uri: u, path: fmt.Sprintf("/odd%d.txt", i), body: body(name+" odd", i)})
		}
		ps = append(ps, p)
	}
	fsCase("fs-dot", "http://example.org/.", "http://example.org/hostile/fs-dot/.", "http://example.org/hostile/fs-dot/./x", "http://example.org/hostile/fs-dot/%2E")
	fsCase("fs-dotdot", "http://example.org/..", "http://example.org/hostile/fs-dotdot/..", "http://example.org/hostile/fs-dotdot/../../../../etc/passwd", "http://example.org/hostile/fs-dotdot/%2E%2E/%2e%2e/x")
	fsCase("fs-nul", "http://example.org/hostile/fs-nul/a%00b", "http://example.org/hostile/fs-nul/%00")
	fsCase("fs-control", "http://example.org/hostile/fs-control/a%01b", "http://example.org/hostile/fs-control/%1F%7F", "http://example.org/hostile/fs-control/tab%09newline%0A")
	fsCase("fs-invalid-utf8", "http://example.org/hostile/fs-invalid-utf8/%FF%FE", "http://example.org/hostile/fs-invalid-utf8/%C3%28")
	fsCase("fs-long-name", "http://example.org/hostile/fs-long-name/"+strings.Repeat("n", 300),
		"http://example.org/hostile/fs-long-name/"+strings.Repeat("é", 200),
		"http://example.org/hostile/fs-long-name/"+strings.Repeat("deep/", 800)+"end") // 4,044 bytes: under source.MaxURILength
	fsCase("fs-case-collision", "http://example.org/hostile/fs-case-collision/Readme", "http://example.org/hostile/fs-case-collision/README",
		"http://example.org/hostile/fs-case-collision/readme")
	huge := pkg{name: "huge-token", entries: good("huge-token", 2)}
	huge.manifest = []byte(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="resourcedump-manifest"/><url><loc>http://example.org/` +
		strings.Repeat("A", 8<<20) + `</loc></url></urlset>`)
	ps = append(ps, huge)
	return ps
}

// Build writes the hostile source under dir: resourcedump.xml and one
// package per case (plus "package-hash-mismatch", whose bytes differ from
// the hashes the Resource Dump gives), and returns the expectations.
func Build(dir string) (*Source, error) {
	if err := os.MkdirAll(filepath.Join(dir, "packages"), 0o755); err != nil {
		return nil, err
	}
	src := &Source{Dump: Base + "resourcedump.xml"}
	var dumpEntries []*manifest.Entry
	ps := cases()
	ps = append(ps, pkg{name: "package-hash-mismatch", entries: good("package-hash-mismatch", 2)})
	for _, p := range ps {
		b, err := p.build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		file := "packages/" + p.name + ".zip"
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			return nil, err
		}
		md := manifest.NewMetadata()
		md.Type = "application/zip"
		md.Length = int64(len(b))
		md.Hashes = hashes(b)
		md.At = modTime
		if p.name == "package-hash-mismatch" {
			md.Hashes.SHA256[0] ^= 0xff
		}
		dumpEntries = append(dumpEntries, &manifest.Entry{Loc: Base + file, Metadata: md})
		src.Cases = append(src.Cases, expect(p, Base+file))
	}
	var buf bytes.Buffer
	md := manifest.NewMetadata()
	md.Capability = manifest.ResourceDump
	md.At = modTime
	w, err := manifest.NewWriter(&buf, manifest.Header{Root: manifest.URLSet, Metadata: md})
	if err != nil {
		return nil, err
	}
	for _, e := range dumpEntries {
		if err := w.Write(e); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return src, os.WriteFile(filepath.Join(dir, "resourcedump.xml"), buf.Bytes(), 0o644)
}

// packageErrors are the cases that fail a whole package, with a substring
// of the error.
var packageErrors = map[string]string{
	"too-many-entries":      "entries",
	"truncated":             "zip",
	"manifest-missing":      "manifest",
	"manifest-not-at-top":   "manifest",
	"manifest-twice":        "manifest",
	"doctype":               "DOCTYPE",
	"deep-nesting":          "deep",
	"huge-token":            "token",
	"package-hash-mismatch": "sha-256",
}

func expect(p pkg, pkgURL string) Case {
	c := Case{Name: p.name, Package: pkgURL, Failed: map[string]string{}, Good: map[string][]byte{}}
	if e, ok := packageErrors[p.name]; ok {
		c.PackageError = e
		return c
	}
	for _, e := range p.entries {
		if !e.bad {
			c.Good[e.uri] = e.body
			continue
		}
		c.Failed[e.uri] = failReason[p.name]
	}
	if p.name == "entry-not-in-manifest" {
		c.Unreferenced = []string{"stowaway.txt"}
	}
	return c
}

// failReason is a substring of the error each bad resource must fail with.
var failReason = map[string]string{
	"zip-slip":                      `".." segment`,
	"absolute-path":                 "absolute name",
	"windows-path":                  "drive letter",
	"backslash-slip":                `".." segment`,
	"symlink":                       "symlink",
	"device":                        "",
	"duplicate-name":                "duplicate",
	"duplicate-after-normalisation": "duplicate",
	"size-lies":                     "",
	"compression-bomb":              "ratio",
	"path-not-in-zip":               "not in",
	"wrong-hash":                    "sha-256",
	"wrong-md5-only":                "md5",
	"wrong-length":                  "length",
	"malformed-hash":                "sha-512",
}
