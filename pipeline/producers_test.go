package pipeline_test

import (
	"archive/zip"
	"bytes"
	"cmp"
	"compress/flate"
	"context"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/testdata/javazip"
)

// Packages as DSpace's ResourceSync module writes them, the most deployed
// producer of Resource Dumps: java.util.zip.ZipOutputStream, every entry
// deflated with a data descriptor, every entry name with a leading
// separator ("/resources/123456789_101/1_file.pdf", "\" on Windows), and
// manifest.xml last. The names are keys matched against the manifest's
// paths after one leading "/" is removed and "\" is read as "/".

// producerRes is one resource of a hand-built package.
type producerRes struct {
	uri   string
	entry string // the entry's name as the archive stores it ("" for none)
	path  string // rs:md path in the manifest
	body  []byte
}

// producerPkg is a package under construction: its resources and extra
// entries, and how it is written.
type producerPkg struct {
	name     string // file name, without .zip
	res      []producerRes
	extra    []javazip.Entry // entries the manifest does not list, written before manifest.xml
	manifest string          // the manifest entry's name
	charset  string          // Java charset of the names ("" is UTF-8)
	java     bool            // written by ZipOutputStream; else by Go's archive/zip (data descriptors too)
}

// dspacePkg returns a package of n resources named as DSpace names them,
// with sep as the entry names' separator and pathSep as the manifest
// paths'. Name templates may hold non-ASCII letters (for CP437 names).
func dspacePkg(name, sep, pathSep string, n int) *producerPkg {
	p := &producerPkg{name: name, manifest: "manifest.xml", java: true}
	for i := range n {
		file := fmt.Sprintf("%d_file %s é Ü %d.pdf", i+1, name, i)
		p.res = append(p.res, producerRes{
			uri:   fmt.Sprintf("http://example.org/bitstreams/%s/%d", name, i),
			entry: sep + strings.Join([]string{"resources", "123456789_101", file}, sep),
			path:  pathSep + strings.Join([]string{"resources", "123456789_101", file}, pathSep),
			body:  []byte(strings.Repeat(fmt.Sprintf("bitstream %d of %s; ", i, name), 200+i)),
		})
	}
	return p
}

// manifestXML is the package's manifest.xml, listing every resource with
// its md5, sha-256 and length.
func (p *producerPkg) manifestXML() []byte {
	var urls []string
	for _, r := range p.res {
		urls = append(urls, fmt.Sprintf(`<url><loc>%s</loc><lastmod>2024-03-01T10:00:00Z</lastmod><rs:md path="%s" hash="md5:%s sha-256:%s" length="%d" type="application/pdf"/></url>`,
			xmlText(r.uri), xmlText(r.path), hexMD5(r.body), hexSHA256(r.body), len(r.body)))
	}
	return doc("resourcedump-manifest", `at="2024-03-01T12:00:00Z"`, urls...)
}

func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// entries lists the archive's entries in order: the resources', the
// extra ones, manifest.xml last.
func (p *producerPkg) entries() []javazip.Entry {
	var es []javazip.Entry
	for _, r := range p.res {
		if r.entry != "" {
			es = append(es, javazip.Entry{Name: r.entry, Body: r.body})
		}
	}
	es = append(es, p.extra...)
	return append(es, javazip.Entry{Name: p.manifest, Body: p.manifestXML()})
}

// write writes the package to dir and returns its bytes.
func (p *producerPkg) write(t *testing.T, dir string) []byte {
	t.Helper()
	out := filepath.Join(dir, p.name+".zip")
	es := p.entries()
	if p.java {
		javazip.WriteCharset(t, out, cmp.Or(p.charset, "UTF-8"), es)
	} else {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, e := range es {
			w, err := zw.Create(e.Name)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(e.Body)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	checkAsDSpaceWrites(t, p, b)
	return b
}

// checkAsDSpaceWrites checks that a written package is what the test
// says it is: the names stored as given (encoded in the charset), every
// entry deflated with a data descriptor, manifest.xml last.
func checkAsDSpaceWrites(t *testing.T, p *producerPkg, b []byte) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	es := p.entries()
	if len(zr.File) != len(es) {
		t.Fatalf("%s: %d entries, want %d", p.name, len(zr.File), len(es))
	}
	for i, f := range zr.File {
		want := es[i].Name
		if p.charset == "IBM437" {
			want = string(cp437(t, want))
			if f.Flags&0x800 != 0 {
				t.Fatalf("%s: %q has the UTF-8 flag", p.name, f.Name)
			}
		}
		if f.Name != want || f.Flags&0x8 == 0 || f.Method != zip.Deflate {
			t.Fatalf("%s: entry %d is %q (flags %#x, method %d), want %q deflated with a data descriptor", p.name, i, f.Name, f.Flags, f.Method, want)
		}
	}
	if last := zr.File[len(zr.File)-1].Name; last != p.manifest {
		t.Fatalf("%s: last entry %q, want %q", p.name, last, p.manifest)
	}
}

// cp437 encodes s, which holds ASCII, é and Ü only, in code page 437.
func cp437(t *testing.T, s string) []byte {
	var b []byte
	for _, r := range s {
		switch {
		case r < 0x80:
			b = append(b, byte(r))
		case r == 'é':
			b = append(b, 0x82)
		case r == 'Ü':
			b = append(b, 0x9a)
		default:
			t.Fatalf("cp437: %q", r)
		}
	}
	return b
}

// writeProducerDump writes a capability list and a Resource Dump listing
// the packages (name → bytes) with their lengths and hashes.
func writeProducerDump(t *testing.T, dir string, pkgs map[string][]byte) {
	t.Helper()
	var urls []string
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		b := pkgs[name]
		urls = append(urls, fmt.Sprintf(`<url><loc>%s%s.zip</loc><rs:md type="application/zip" length="%d" hash="md5:%s sha-256:%s"/></url>`,
			srcBase, name, len(b), hexMD5(b), hexSHA256(b)))
	}
	writeRaw(t, dir,
		srcFile{"capabilitylist.xml", doc("capabilitylist", "", `<url><loc>`+srcBase+`resourcedump.xml</loc><rs:md capability="resourcedump"/></url>`)},
		srcFile{"resourcedump.xml", doc("resourcedump", `at="2024-03-01T12:00:00Z"`, urls...)},
	)
}

// checkDelivered checks that the sink holds exactly want, and that the
// state records each resource as hash-verified, from its package.
func checkDelivered(t *testing.T, h *harness, want map[string][]byte, pkgOf map[string]string, base string) {
	t.Helper()
	held := h.held(context.Background())
	for uri, body := range want {
		if !bytes.Equal(held[uri], body) {
			t.Errorf("%s not delivered intact (%d bytes held, want %d)", uri, len(held[uri]), len(body))
		}
	}
	for uri := range held {
		if _, ok := want[uri]; !ok {
			t.Errorf("%s held, not expected", uri)
		}
	}
	recs := records(t, h.store)
	for uri := range want {
		r := recs[uri]
		if r.Verified != state.VerifiedHash || r.Package != base+pkgOf[uri]+".zip" {
			t.Errorf("%s: state records verified %q from %q", uri, r.Verified, r.Package)
		}
	}
}

// TestDSpacePackages: packages written as DSpace writes them — by Java's
// ZipOutputStream itself and by code — with "/" and "\" separators in the
// names and in the manifest's paths, names in CP437 without the UTF-8
// flag, and manifest.xml or /manifest.xml last, are synced in full, with
// streaming on (the manifest comes last: it falls back) and off, and every
// resource verified against its md5 and sha-256.
func TestDSpacePackages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pkgs := []*producerPkg{
		dspacePkg("java-slash", "/", "/", 4),
		dspacePkg("java-backslash", `\`, `\`, 4),
		dspacePkg("java-backslash-entries", `\`, "/", 3),
		dspacePkg("java-cp437", "/", "/", 3),
		dspacePkg("java-slash-manifest", "/", "/", 3),
		dspacePkg("go-slash", "/", "/", 3),
		dspacePkg("go-backslash", `\`, `\`, 3),
	}
	pkgs[3].charset = "IBM437"
	pkgs[4].manifest = "/manifest.xml"
	pkgs[5].java, pkgs[6].java = false, false
	want, pkgOf, files := map[string][]byte{}, map[string]string{}, map[string][]byte{}
	for _, p := range pkgs {
		files[p.name] = p.write(t, dir)
		for _, r := range p.res {
			want[r.uri], pkgOf[r.uri] = r.body, p.name
		}
	}
	writeProducerDump(t, dir, files)
	srv := serve(t, dir)
	for _, streaming := range []bool{true, false} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			h := newHarness(t)
			rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", func(o *pipeline.Options) { o.DisableStreaming = !streaming })
			r := rep.Resources
			if rep.Status != runreport.StatusOK || r.Written != int64(len(want)) || r.Failed != 0 || r.Unverified != 0 || r.Skipped != 0 ||
				rep.Packages.Done != int64(len(pkgs)) || len(rep.Skips) != 0 {
				t.Fatalf("%s\nfailures %+v\nskips %+v", rep.Summary(), rep.Failures, rep.Skips)
			}
			checkDelivered(t, h, want, pkgOf, srv.URL)
		})
	}
}

// TestDSpacePackageRefusedNames: in a package written as DSpace writes
// them, what stays unsafe or ambiguous after normalisation is refused —
// two names that agree once the leading "/" is removed, a ".." segment
// once "\" is read as "/", a drive letter, a name still absolute — each
// failing its resource alone with an error naming the package and what is
// wrong (a path with no entry too, named once), while the package's other
// resources are delivered.
func TestDSpacePackageRefusedNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := dspacePkg("java-refused", "/", "/", 3)
	good := map[string][]byte{}
	pkgOf := map[string]string{}
	for _, r := range p.res {
		good[r.uri], pkgOf[r.uri] = r.body, p.name
	}
	bad := func(name, entry, path string) string {
		uri := "http://example.org/bitstreams/java-refused/" + name
		p.res = append(p.res, producerRes{uri: uri, entry: entry, path: path, body: []byte("refused: " + name)})
		return uri
	}
	reasons := map[string]string{
		bad("dup", "/resources/dup.pdf", "/resources/dup.pdf"):                  `unzip: entry "resources/dup.pdf": unzip: duplicate entry name`,
		bad("dotdot", `\resources\..\..\evil.pdf`, `\resources\..\..\evil.pdf`): `".." segment`,
		bad("drive", "/C:/resources/x.pdf", "/C:/resources/x.pdf"):              "drive letter",
		bad("absolute", "//resources/abs.pdf", "//resources/abs.pdf"):           "absolute name",
		bad("missing", "", "/resources/missing.pdf"):                            `unzip: manifest path "/resources/missing.pdf": unzip: path not in package`,
	}
	// The copy of dup.pdf, as "resources/dup.pdf": not listed, ambiguous.
	p.extra = []javazip.Entry{{Name: "resources/dup.pdf", Body: []byte("the other copy")}}
	writeProducerDump(t, dir, map[string][]byte{p.name: p.write(t, dir)})
	srv := serve(t, dir)
	pkgURL := srv.URL + p.name + ".zip"
	for _, streaming := range []bool{true, false} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			h := newHarness(t)
			rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", func(o *pipeline.Options) { o.DisableStreaming = !streaming })
			if rep.Status != runreport.StatusPartial || rep.Resources.Written != int64(len(good)) || rep.Resources.Failed != int64(len(reasons)) ||
				rep.Packages.Done != 1 || len(rep.Skips) != 0 {
				t.Fatalf("%s\nfailures %+v\nskips %+v", rep.Summary(), rep.Failures, rep.Skips)
			}
			failures := map[string]runreport.Failure{}
			for _, f := range rep.Failures {
				failures[f.URI] = f
			}
			for uri, reason := range reasons {
				f, ok := failures[uri]
				switch {
				case !ok:
					t.Errorf("%s: no failure recorded", uri)
				case f.Package != pkgURL || f.Stage != "unzip" || !f.Permanent || !strings.Contains(f.Error, reason):
					t.Errorf("%s: failure %+v, want a permanent unzip failure in %s saying %q", uri, f, pkgURL, reason)
				case strings.Count(f.Error, "manifest path") > 1:
					t.Errorf("%s: the path is named twice: %s", uri, f.Error)
				}
			}
			checkDelivered(t, h, good, pkgOf, srv.URL)
		})
	}
}

// rawZip writes entries with their sizes and CRC-32 in their local headers
// (no data descriptors), deflated, in order: a package that can be read as
// it downloads.
func rawZip(t *testing.T, es []javazip.Entry) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, e := range es {
		var d bytes.Buffer
		w, err := flate.NewWriter(&d, flate.BestSpeed)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.Body)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		raw, err := zw.CreateRaw(&zip.FileHeader{Name: e.Name, Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(e.Body),
			CompressedSize64: uint64(d.Len()), UncompressedSize64: uint64(len(e.Body))})
		if err != nil {
			t.Fatal(err)
		}
		raw.Write(d.Bytes())
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// notifySink closes put at the first Put of a URI with the prefix.
type notifySink struct {
	sink.Sink
	prefix string
	once   sync.Once
	put    chan struct{}
}

func (n *notifySink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if strings.HasPrefix(r.URI, n.prefix) {
		n.once.Do(func() { close(n.put) })
	}
	return n.Sink.Put(ctx, r, body)
}

// TestDSpaceNamesStreamed: a package named as DSpace names its entries
// ("/" and "\" separators, in names and paths alike) but written with
// manifest.xml — as "/manifest.xml" — first and every entry's sizes in its
// local header is read as it downloads: the server holds back the central
// directory until the sink has taken one of its resources, which it can
// only have taken from the local headers, their names matched with the
// manifest's paths.
func TestDSpaceNamesStreamed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The first resource, which streaming must match to start, has "\"
	// in its name and its path; the others one of them each.
	p := dspacePkg("streamed", "/", "/", 4)
	back := func(s *string) { *s = strings.ReplaceAll(*s, "/", `\`) }
	back(&p.res[0].entry)
	back(&p.res[0].path)
	back(&p.res[1].path)
	back(&p.res[2].entry)
	want, pkgOf := map[string][]byte{}, map[string]string{}
	es := []javazip.Entry{{Name: "/manifest.xml", Body: p.manifestXML()}}
	for _, r := range p.res {
		want[r.uri], pkgOf[r.uri] = r.body, p.name
		es = append(es, javazip.Entry{Name: r.entry, Body: r.body})
	}
	b := rawZip(t, es)
	if err := os.WriteFile(filepath.Join(dir, p.name+".zip"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	writeProducerDump(t, dir, map[string][]byte{p.name: b})
	cdir := centralDirectoryOffset(t, b)

	sk := &notifySink{prefix: "http://example.org/bitstreams/streamed/", put: make(chan struct{})}
	var gated, streamed atomic.Bool
	gate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/"+p.name+".zip" || r.Header.Get("Range") != "" || !gated.CompareAndSwap(false, true) {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/zip")
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.Write(b[:cdir])
			http.NewResponseController(w).Flush()
			// Until a resource is delivered, or the client gives up
			// (its stall timeout) and asks again, served in full.
			select {
			case <-sk.put:
				streamed.Store(true)
			case <-r.Context().Done():
				return
			}
			w.Write(b[cdir:])
		})
	}
	srv, err := bench.Serve(ctx, dir, "127.0.0.1:0", bench.ServeOptions{Wrap: gate, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newHarness(t)
	sk.Sink = h.sink
	rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", func(o *pipeline.Options) { o.Sinks = []sink.Sink{sk} })
	if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(len(want)) || len(rep.Skips) != 0 {
		t.Fatalf("%s\nfailures %+v\nskips %+v", rep.Summary(), rep.Failures, rep.Skips)
	}
	if !streamed.Load() {
		t.Errorf("no resource was delivered before the central directory arrived: the local headers' names did not match the manifest's paths")
	}
	checkDelivered(t, h, want, pkgOf, srv.URL)
}

// centralDirectoryOffset reads where the central directory starts from the
// end-of-central-directory record of a small archive.
func centralDirectoryOffset(t *testing.T, b []byte) int {
	t.Helper()
	i := bytes.LastIndex(b, []byte("PK\x05\x06"))
	if i < 0 || len(b) < i+22 {
		t.Fatal("no end-of-central-directory record")
	}
	return int(binary.LittleEndian.Uint32(b[i+16:]))
}
