package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// codedFile is a file of a codedSource: its bytes as sent, the
// Content-Encoding sent with them unasked, and its ETag.
type codedFile struct {
	body     []byte
	encoding string
	etag     string
}

// codedSource serves files from memory on 127.0.0.1 with an ETag each,
// answering If-None-Match with 304 Not Modified. Every request must ask
// for identity: whatever comes compressed, the server chose to send so.
type codedSource struct {
	*httptest.Server
	t     *testing.T
	mu    sync.Mutex
	files map[string]codedFile
	hits  map[string]int // path → requests
	not   int            // 304s sent
}

func newCodedSource(t *testing.T) *codedSource {
	s := &codedSource{t: t, files: map[string]codedFile{}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *codedSource) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.URL.Path]
	s.hits[r.URL.Path]++
	if ok && f.etag != "" && r.Header.Get("If-None-Match") == f.etag {
		s.not++
	}
	s.mu.Unlock()
	if ae := r.Header.Get("Accept-Encoding"); ae != "identity" {
		s.t.Errorf("%s asked with Accept-Encoding %q, want identity", r.URL.Path, ae)
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	if f.etag != "" {
		w.Header().Set("ETag", f.etag)
		if r.Header.Get("If-None-Match") == f.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if f.encoding != "" {
		w.Header().Set("Content-Encoding", f.encoding)
	}
	w.Write(f.body)
}

// put serves body at path, sent as how says: "" plain, "gz" gzip with no
// header (the URL may end in .gz), "gzip"/"x-gzip" gzip with that
// Content-Encoding, "deflate" zlib with Content-Encoding deflate, "bomb" a
// gzip bomb of 4 MiB, "latin1"/"cp1252"/"utf16le"/"utf16be" recoded with
// that label declared.
func (s *codedSource) put(path, how string, body []byte) {
	s.t.Helper()
	f := codedFile{body: body, etag: fmt.Sprintf(`"%d-%s"`, time.Now().UnixNano(), how)}
	recode := func(enc interface{ Bytes([]byte) ([]byte, error) }, label string) []byte {
		b, err := enc.Bytes(bytes.Replace(body, []byte(`encoding="UTF-8"`), []byte(`encoding="`+label+`"`), 1))
		if err != nil {
			s.t.Fatal(err)
		}
		return b
	}
	switch how {
	case "":
	case "gz":
		f.body = gzipped(body)
	case "gzip", "x-gzip":
		f.body, f.encoding = gzipped(body), how
	case "deflate":
		f.body, f.encoding = zlibbed(body), how
	case "bomb":
		f.body = gzipped(bytes.Repeat([]byte("<!-- -->"), 4<<20/8))
	case "latin1":
		f.body = recode(charmap.ISO8859_1.NewEncoder(), "ISO-8859-1")
	case "cp1252":
		f.body = recode(charmap.Windows1252.NewEncoder(), "windows-1252")
	case "utf16le":
		f.body = recode(unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder(), "UTF-16")
	case "utf16be":
		f.body = recode(unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewEncoder(), "UTF-16")
	case "klingon":
		f.body = bytes.Replace(body, []byte(`encoding="UTF-8"`), []byte(`encoding="x-klingon"`), 1)
	default:
		s.t.Fatalf("put %s: unknown way %q", path, how)
	}
	s.mu.Lock()
	s.files[path] = f
	s.mu.Unlock()
}

func (s *codedSource) counts() (hits map[string]int, notModified int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hits = map[string]int{}
	for k, v := range s.hits {
		hits[k] = v
	}
	return hits, s.not
}

// codedEntry is the <url> of a resource: loc, and the rs:md of a list or
// manifest.
func codedEntry(loc, change, at, path string, body []byte) string {
	md := ""
	if change != "" {
		md += fmt.Sprintf(` change="%s" datetime="%s"`, change, at)
	}
	if path != "" {
		md += fmt.Sprintf(` path="%s"`, path)
	}
	if body != nil {
		md += fmt.Sprintf(` hash="md5:%s" length="%d"`, hexMD5(body), len(body))
	}
	return fmt.Sprintf(`<url><loc>%s</loc><lastmod>%s</lastmod><rs:md%s/></url>`, loc, at, md)
}

// sitemapIndex is a <sitemapindex> of the given capability listing locs.
func sitemapIndex(capability, attrs string, locs ...string) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">` + "\n" +
		`<rs:md capability="` + capability + `" ` + attrs + `/>` + "\n")
	for _, l := range locs {
		b.WriteString("<sitemap><loc>" + l + "</loc></sitemap>\n")
	}
	b.WriteString("</sitemapindex>\n")
	return []byte(b.String())
}

// TestCompressedDocumentsSync: a source whose every kind of document — the
// Source Description, Capability Lists, Resource List and Resource Dump
// indexes and their children, a Change Dump, a Change List, the manifest
// copies that rel="contents" links — comes gzip-compressed in each of the
// ways servers send it (a .gz URL with no header, the gzip bytes with no
// hint at all, Content-Encoding gzip, x-gzip or deflate sent although
// rsharvest asked for identity) or in ISO-8859-1, windows-1252 or UTF-16,
// is synced whole through the real pipeline into an fs sink: a baseline,
// a repeated baseline that reads the kept (compressed) copies of the
// documents on 304, then the changes. A child of a Resource Dump index
// that is a gzip bomb fails alone, with "larger than allowed" naming it; a
// document declaring an encoding nobody knows fails its own set, naming
// the label. A resource that is itself a gzip file, from a list or inside
// a package, is delivered byte for byte, never decompressed.
func TestCompressedDocumentsSync(t *testing.T) {
	ctx := context.Background()
	src := newCodedSource(t)
	base := src.URL
	const at, from, mid, until = "2020-01-01T00:00:00Z", "2020-01-01T00:00:00Z", "2020-01-15T00:00:00Z", "2020-02-01T00:00:00Z"
	want := map[string][]byte{}    // what the sink holds after the baseline
	changed := map[string][]byte{} // … after the changes (nil: deleted)
	resource := func(set string, i int, version string) (string, []byte) {
		return fmt.Sprintf("%s/res/%s/%d-café", base, set, i), []byte(strings.Repeat(fmt.Sprintf("%s %d %s\n", set, i, version), 30))
	}
	// serveResource serves a resource of a list at its loc, plain (the
	// server sees the path unescaped).
	serveResource := func(loc string, body []byte) { src.put(strings.TrimPrefix(loc, base), "", body) }

	// Set "lists": a Resource List index and a Change List; no dumps.
	gzRes := gzipped([]byte(strings.Repeat("a resource that is a gzip file\n", 50)))
	var rl [3][]string
	for i := range 6 {
		loc, body := resource("lists", i, "v1")
		serveResource(loc, body)
		want[loc], changed[loc] = body, body
		rl[i%3] = append(rl[i%3], codedEntry(loc, "", at, "", body))
	}
	gzLoc := base + "/res/lists/data.xml.gz"
	src.put("/res/lists/data.xml.gz", "", gzRes)
	want[gzLoc], changed[gzLoc] = gzRes, gzRes
	rl[1] = append(rl[1], codedEntry(gzLoc, "", at, "", gzRes))
	src.put("/lists/rl-1.xml.gz", "gz", doc("resourcelist", `at="`+at+`"`, rl[0]...))
	src.put("/lists/rl-2.xml", "gz", doc("resourcelist", `at="`+at+`"`, rl[1]...))
	src.put("/lists/rl-3.xml", "deflate", doc("resourcelist", `at="`+at+`"`, rl[2]...))
	src.put("/lists/resourcelist-index.xml", "x-gzip", sitemapIndex("resourcelist", `at="`+at+`"`,
		base+"/lists/rl-1.xml.gz", base+"/lists/rl-2.xml", base+"/lists/rl-3.xml"))
	newLoc, newBody := resource("lists", 6, "v1")
	serveResource(newLoc, newBody)
	changed[newLoc] = newBody
	gone, _ := resource("lists", 2, "")
	changed[gone] = nil
	src.put("/lists/changelist.xml.gz", "gzip", doc("changelist", `from="`+from+`" until="`+until+`"`,
		codedEntry(newLoc, "created", mid, "", newBody),
		codedEntry(gone, "deleted", mid, "", nil)))
	src.put("/lists/capabilitylist.xml.gz", "gz", doc("capabilitylist", "",
		`<url><loc>`+base+`/lists/resourcelist-index.xml</loc><rs:md capability="resourcelist"/></url>`,
		`<url><loc>`+base+`/lists/changelist.xml.gz</loc><rs:md capability="changelist"/></url>`))

	// Set "dumps": a Resource Dump index of two dumps (one a bomb), a
	// Change Dump of two packages with gzip manifest copies.
	pkg := func(name string, entries []string, content map[string][]byte, capability, attrs string) []byte {
		man := doc(capability, attrs, entries...)
		z := zipOf(t, man, content)
		src.put("/dumps/"+name+".zip", "", z)
		return man
	}
	var entries []string
	content := map[string][]byte{"r/gz": gzRes}
	for i := range 3 {
		loc, body := resource("dumps", i, "v1")
		want[loc], changed[loc] = body, body
		content[fmt.Sprintf("r/%d", i)] = body
		entries = append(entries, codedEntry(loc, "", at, fmt.Sprintf("/r/%d", i), body))
	}
	dumpGz := base + "/res/dumps/inside.gz"
	want[dumpGz], changed[dumpGz] = gzRes, gzRes
	entries = append(entries, codedEntry(dumpGz, "", at, "/r/gz", gzRes))
	pkg("p1", entries, content, "resourcedump-manifest", `at="`+at+`"`)
	dumpEntry := func(name, attrs, contents string) string {
		f := src.files["/dumps/"+name+".zip"]
		ln := ""
		if contents != "" {
			ln = `<rs:ln rel="contents" href="` + base + "/dumps/" + contents + `" type="application/xml"/>`
		}
		return fmt.Sprintf(`<url><loc>%s/dumps/%s.zip</loc><rs:md type="application/zip" length="%d" %s/>%s</url>`, base, name, len(f.body), attrs, ln)
	}
	src.put("/dumps/rd-1.xml", "x-gzip", doc("resourcedump", `at="`+at+`"`, dumpEntry("p1", "", "")))
	src.put("/dumps/rd-2.xml.gz", "bomb", nil)
	src.put("/dumps/resourcedump-index.xml.gz", "gz", sitemapIndex("resourcedump", `at="`+at+`"`,
		base+"/dumps/rd-1.xml", base+"/dumps/rd-2.xml.gz"))
	upd, updBody := resource("dumps", 0, "v2")
	created, createdBody := resource("dumps", 3, "v1")
	deleted, _ := resource("dumps", 1, "")
	changed[upd], changed[created], changed[deleted] = updBody, createdBody, nil
	c1 := pkg("c1", []string{codedEntry(upd, "updated", mid, "/r/0", updBody), codedEntry(created, "created", mid, "/r/3", createdBody)},
		map[string][]byte{"r/0": updBody, "r/3": createdBody}, "changedump-manifest", `from="`+from+`" until="`+mid+`"`)
	c2 := pkg("c2", []string{codedEntry(deleted, "deleted", until, "", nil)}, nil, "changedump-manifest", `from="`+mid+`" until="`+until+`"`)
	src.put("/dumps/c1.manifest.xml.gz", "gz", c1)
	src.put("/dumps/c2.manifest.xml", "deflate", c2)
	src.put("/dumps/changedump.xml", "gz", doc("changedump", `from="`+from+`" until="`+until+`"`,
		dumpEntry("c1", `from="`+from+`" until="`+mid+`"`, "c1.manifest.xml.gz"),
		dumpEntry("c2", `from="`+mid+`" until="`+until+`"`, "c2.manifest.xml")))
	src.put("/dumps/capabilitylist.xml", "gzip", doc("capabilitylist", "",
		`<url><loc>`+base+`/dumps/resourcedump-index.xml.gz</loc><rs:md capability="resourcedump"/></url>`,
		`<url><loc>`+base+`/dumps/changedump.xml</loc><rs:md capability="changedump"/></url>`))

	// Sets whose documents are in other encodings, each with one
	// resource: a Capability List in UTF-16 and a Resource List in
	// ISO-8859-1, windows-1252 or UTF-16; and one in an unknown encoding.
	var sets []string
	for _, enc := range [][2]string{{"utf16le", "latin1"}, {"utf16be", "cp1252"}, {"", "utf16le"}, {"", "klingon"}} {
		set := "enc-" + enc[1]
		loc, body := resource(set, 0, "v1")
		if enc[1] != "latin1" {
			loc += "/€–“quoted”" // not in ISO-8859-1
		}
		serveResource(loc, body)
		if enc[1] != "klingon" {
			want[loc], changed[loc] = body, body
		}
		src.put("/"+set+"/resourcelist.xml", enc[1], doc("resourcelist", `at="`+at+`"`, codedEntry(loc, "", at, "", body)))
		src.put("/"+set+"/capabilitylist.xml", enc[0], doc("capabilitylist", "",
			`<url><loc>`+base+"/"+set+`/resourcelist.xml</loc><rs:md capability="resourcelist"/></url>`))
		sets = append(sets, `<url><loc>`+base+"/"+set+`/capabilitylist.xml</loc><rs:md capability="capabilitylist"/></url>`)
	}
	sets = append(sets,
		`<url><loc>`+base+`/lists/capabilitylist.xml.gz</loc><rs:md capability="capabilitylist"/></url>`,
		`<url><loc>`+base+`/dumps/capabilitylist.xml</loc><rs:md capability="capabilitylist"/></url>`)
	src.put("/.well-known/resourcesync", "gzip", doc("description", "", sets...))

	h := newHarness(t)
	small := func(o *pipeline.Options) { o.MaxDocumentSize = 1 << 20 }
	checkFailures := func(what string, rep *runreport.Report) {
		t.Helper()
		if rep.Status != runreport.StatusPartial || len(rep.Failures) != 2 {
			t.Fatalf("%s: status %s, failures %+v; want partial with the bomb's and the unknown encoding's\n%s", what, rep.Status, rep.Failures, rep.Summary())
		}
		for _, f := range rep.Failures {
			switch f.URI {
			case base + "/dumps/capabilitylist.xml":
				if !strings.Contains(f.Error, "larger than allowed") || !strings.Contains(f.Error, base+"/dumps/rd-2.xml.gz") || !f.Permanent {
					t.Errorf("%s: bomb failure %+v; want a permanent one naming rd-2.xml.gz and saying larger than allowed", what, f)
				}
			case base + "/enc-klingon/capabilitylist.xml":
				if !strings.Contains(f.Error, `"x-klingon"`) || !strings.Contains(f.Error, base+"/enc-klingon/resourcelist.xml") || !f.Permanent {
					t.Errorf("%s: encoding failure %+v; want a permanent one naming the document and the label", what, f)
				}
			default:
				t.Errorf("%s: unexpected failure %+v", what, f)
			}
		}
	}
	checkHeld := func(what string, want map[string][]byte) {
		t.Helper()
		held := h.held(ctx)
		for uri, body := range want {
			if body != nil && !bytes.Equal(held[uri], body) {
				t.Errorf("%s: %s not delivered (%d bytes held, want %d)", what, uri, len(held[uri]), len(body))
			}
			if body == nil && held[uri] != nil {
				t.Errorf("%s: %s not deleted", what, uri)
			}
		}
		n := 0
		for _, b := range want {
			if b != nil {
				n++
			}
		}
		if len(held) != n {
			t.Errorf("%s: sink holds %d resources, want %d: %v", what, len(held), n, keys(held))
		}
	}

	rep := h.baseline(ctx, base, small)
	checkFailures("baseline", rep)
	checkHeld("baseline", want)

	// The documents are unchanged: every one is answered 304, and its kept
	// copy, compressed as it came, is decompressed again.
	_, notBefore := src.counts()
	rep = h.baseline(ctx, base, small)
	checkFailures("repeated baseline", rep)
	if _, notAfter := src.counts(); notAfter-notBefore < 15 {
		t.Errorf("repeated baseline: %d documents answered 304, want every document read", notAfter-notBefore)
	}
	if rep.Resources.Written != 0 || rep.Resources.Unchanged == 0 {
		t.Errorf("repeated baseline: %s", rep.Summary())
	}
	checkHeld("repeated baseline", want)

	// The changes of each set, from its Change List and its Change Dump
	// with gzip- and deflate-compressed manifest copies.
	for _, set := range []string{"lists", "dumps"} {
		opts := h.options(base)
		small(&opts)
		opts.Set = set
		rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{From: mustTime(t, from), Until: mustTime(t, until)})
		if err != nil {
			t.Fatal(err)
		}
		if wrote := map[string]int64{"lists": 1, "dumps": 2}[set]; rep.Status != runreport.StatusOK || rep.Resources.Deleted != 1 || rep.Resources.Written != wrote {
			t.Errorf("changes of %s: %s", set, rep.Summary())
		}
	}
	checkHeld("changes", changed)
	if hits, _ := src.counts(); hits["/dumps/c1.manifest.xml.gz"] == 0 || hits["/dumps/c2.manifest.xml"] == 0 {
		t.Errorf("the manifest copies were not read: %v", hits)
	}
}
