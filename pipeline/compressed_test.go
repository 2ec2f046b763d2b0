package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// servedFile is a file of an in-memory test source: its body as sent, and
// the Content-Encoding header sent with it (unasked: rsharvest asks for
// identity).
type servedFile struct {
	body     []byte
	encoding string
}

// memSource serves files from memory on 127.0.0.1; the documents are built
// once the server's URL is known.
type memSource struct {
	*httptest.Server
	files map[string]servedFile
}

func newMemSource(t *testing.T) *memSource {
	m := &memSource{files: map[string]servedFile{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := m.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if f.encoding != "" {
			w.Header().Set("Content-Encoding", f.encoding)
		}
		w.Write(f.body)
	}))
	t.Cleanup(m.Close)
	return m
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zlibbed(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// TestCompressedAndEncodedDocuments: a Source Description whose resource
// sets are written as real producers write them — documents gzip-compressed
// with a ".gz" URL, with Content-Encoding gzip, x-gzip or deflate sent
// unasked, or compressed with no hint at all; documents in ISO-8859-1,
// windows-1252 and UTF-16 — is synced whole; a set whose Resource Dump is a
// gzip bomb fails alone with "larger than allowed". Discovery reads the
// compressed Source Description too.
func TestCompressedAndEncodedDocuments(t *testing.T) {
	ctx := context.Background()
	src := newMemSource(t)
	base := src.URL + "/"
	want := map[string][]byte{}
	// set adds a resource set: a capability list, a Resource Dump of one
	// package of three resources (manifest first), each document encoded by
	// enc and served as file with its Content-Encoding.
	type encode func(doc []byte) servedFile
	plain := func(doc []byte) servedFile { return servedFile{body: doc} }
	set := func(name string, capEnc, dumpEnc encode, dumpName string) string {
		var entries []string
		content := map[string][]byte{}
		for i := range 3 {
			uri := fmt.Sprintf("http://example.org/%s/%d", name, i)
			body := []byte(strings.Repeat(uri+" ", 40))
			want[uri] = body
			content[fmt.Sprintf("r/%d", i)] = body
			entries = append(entries, fmt.Sprintf(`<url><loc>%s</loc><rs:md path="/r/%d" hash="md5:%s" length="%d"/></url>`, uri, i, hexMD5(body), len(body)))
		}
		pkg := zipOf(t, doc("resourcedump-manifest", `at="2020-01-01T00:00:00Z"`, entries...), content)
		src.files["/"+name+"/part.zip"] = servedFile{body: pkg}
		src.files["/"+name+"/"+dumpName] = dumpEnc(doc("resourcedump", `at="2020-01-01T00:00:00Z"`,
			fmt.Sprintf(`<url><loc>%s%s/part.zip</loc><rs:md length="%d"/></url>`, base, name, len(pkg))))
		src.files["/"+name+"/capabilitylist.xml"] = capEnc(doc("capabilitylist", "",
			`<url><loc>`+base+name+"/"+dumpName+`</loc><rs:md capability="resourcedump"/></url>`))
		return `<url><loc>` + base + name + `/capabilitylist.xml</loc><rs:md capability="capabilitylist"/></url>`
	}
	withCE := func(ce string, compress func([]byte) []byte) encode {
		return func(d []byte) servedFile { return servedFile{body: compress(d), encoding: ce} }
	}
	recode := func(enc interface{ Bytes([]byte) ([]byte, error) }, label string) encode {
		return func(d []byte) servedFile {
			d = bytes.Replace(d, []byte(`encoding="UTF-8"`), []byte(`encoding="`+label+`"`), 1)
			b, err := enc.Bytes(d)
			if err != nil {
				t.Fatal(err)
			}
			return servedFile{body: b}
		}
	}
	bomb := func([]byte) servedFile {
		return servedFile{body: gzipped(bytes.Repeat([]byte(" "), 4<<20))}
	}
	sets := []string{
		set("dot-gz", plain, withCE("", gzipped), "resourcedump.xml.gz"),
		set("no-hint", withCE("", gzipped), withCE("", gzipped), "resourcedump.xml"),
		set("gzip-header", withCE("gzip", gzipped), withCE("x-gzip", gzipped), "resourcedump.xml"),
		set("deflate-header", withCE("deflate", zlibbed), plain, "resourcedump.xml"),
		set("latin1", recode(charmap.ISO8859_1.NewEncoder(), "ISO-8859-1"), recode(charmap.Windows1252.NewEncoder(), "windows-1252"), "resourcedump.xml"),
		set("utf16", recode(unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder(), "UTF-16"),
			recode(unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewEncoder(), "UTF-16"), "resourcedump.xml"),
	}
	bombed := map[string]bool{}
	for k := range want {
		bombed[k] = false
	}
	sets = append(sets, set("bomb", plain, bomb, "resourcedump.xml.gz"))
	for k := range want {
		if _, ok := bombed[k]; !ok {
			delete(want, k) // the bombed set's resources are never listed
		}
	}
	src.files["/.well-known/resourcesync"] = servedFile{body: gzipped(doc("description", "", sets...)), encoding: "gzip"}

	h := newHarness(t)
	rep := h.baseline(ctx, src.URL, func(o *pipeline.Options) { o.MaxDocumentSize = 1 << 20 })
	if rep.Status != runreport.StatusPartial || len(rep.Failures) != 1 {
		t.Fatalf("status %s, failures %+v; want partial with the bombed set's failure alone\n%s", rep.Status, rep.Failures, rep.Summary())
	}
	if f := rep.Failures[0]; f.URI != base+"bomb/capabilitylist.xml" || !strings.Contains(f.Error, "larger than allowed") || !strings.Contains(f.Error, "bomb/resourcedump.xml.gz") {
		t.Errorf("bomb failure %+v; want the set's failure naming the document and saying larger than allowed", f)
	}
	held := h.held(ctx)
	for uri, body := range want {
		if !bytes.Equal(held[uri], body) {
			t.Errorf("%s not delivered", uri)
		}
	}
	if len(held) != len(want) {
		t.Errorf("sink holds %d resources, want %d", len(held), len(want))
	}

	// Discovery reads the same compressed documents.
	found, err := resourcesync.Discover(ctx, fetch.New(fetch.Options{}), src.URL, resourcesync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if found.Description != base+".well-known/resourcesync" || len(found.Sets) != len(sets) {
		t.Errorf("discovery found %q with %d sets, want the description with %d", found.Description, len(found.Sets), len(sets))
	}
}
