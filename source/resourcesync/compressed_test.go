package resourcesync_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// rawFile is what a rawSite serves at one path: bytes as sent, and the
// Content-Encoding sent with them (unasked: rsharvest asks for identity).
type rawFile struct {
	body     []byte
	encoding string
}

// rawSite serves bytes as they are on 127.0.0.1, for documents that are
// compressed or not in UTF-8; files are added once its URL is known.
func rawSite(t *testing.T) (*httptest.Server, map[string]rawFile) {
	files := map[string]rawFile{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if ae := r.Header.Get("Accept-Encoding"); ae != "identity" {
			t.Errorf("%s asked with Accept-Encoding %q, want identity", r.URL.Path, ae)
		}
		w.Header().Set("Content-Type", "application/xml")
		if f.encoding != "" {
			w.Header().Set("Content-Encoding", f.encoding)
		}
		w.Write(f.body)
	}))
	t.Cleanup(srv.Close)
	return srv, files
}

func gzipOf(s string) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write([]byte(s))
	w.Close()
	return buf.Bytes()
}

func zlibOf(s string) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write([]byte(s))
	w.Close()
	return buf.Bytes()
}

func encoded(t *testing.T, enc interface{ Bytes([]byte) ([]byte, error) }, label, s string) []byte {
	t.Helper()
	b, err := enc.Bytes([]byte(strings.Replace(s, `encoding="UTF-8"`, `encoding="`+label+`"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDiscoverCompressedAndEncoded: rsharvest discover reads documents
// served gzip-compressed in each way a server does it (a .gz URL, the gzip
// bytes with no hint, Content-Encoding gzip, x-gzip or deflate sent
// unasked) and documents in ISO-8859-1, windows-1252 and UTF-16; a gzip
// bomb and an encoding nobody knows fail their own set, naming the
// document, and the other sets are found whole.
func TestDiscoverCompressedAndEncoded(t *testing.T) {
	srv, files := rawSite(t)
	base := srv.URL
	capList := func(set string, kinds ...string) string {
		var entries []string
		for _, k := range kinds {
			name, kind, _ := strings.Cut(k, "=")
			entries = append(entries, base+"/"+set+"/"+name+` capability="`+kind+`"`)
		}
		return rsdoc("urlset", md(`capability="capabilitylist"`), entries...)
	}
	capDoc := func(kind, at string) string {
		return rsdoc("urlset", md(`capability="`+kind+`" at="`+at+`"`), base+"/r/caf%C3%A9/é/€/“quoted”")
	}
	const at = "2024-01-02T03:04:05Z"
	// gz: a .gz URL, gzip body, no header; gz-hint: none at all; ce-*:
	// Content-Encoding sent unasked.
	files["/gz/capabilitylist.xml.gz"] = rawFile{body: gzipOf(capList("gz", "resourcelist.xml.gz=resourcelist", "resourcedump.xml=resourcedump", "changedump.xml=changedump", "changelist.xml=changelist"))}
	files["/gz/resourcelist.xml.gz"] = rawFile{body: gzipOf(capDoc("resourcelist", at))}
	files["/gz/resourcedump.xml"] = rawFile{body: gzipOf(capDoc("resourcedump", at))}
	files["/gz/changedump.xml"] = rawFile{body: gzipOf(capDoc("changedump", at)), encoding: "gzip"}
	files["/gz/changelist.xml"] = rawFile{body: zlibOf(capDoc("changelist", at)), encoding: "deflate"}
	files["/ce/capabilitylist.xml"] = rawFile{body: gzipOf(capList("ce", "resourcedump-index.xml=resourcedump")), encoding: "x-gzip"}
	files["/ce/resourcedump-index.xml"] = rawFile{body: gzipOf(rsdoc("sitemapindex", md(`capability="resourcedump" at="`+at+`"`),
		base+"/ce/resourcedump-1.xml.gz", base+"/ce/resourcedump-2.xml")), encoding: "gzip"}
	files["/ce/resourcedump-1.xml.gz"] = rawFile{body: gzipOf(capDoc("resourcedump", at)), encoding: "gzip"}
	files["/ce/resourcedump-2.xml"] = rawFile{body: gzipOf(capDoc("resourcedump", at)), encoding: "x-gzip"}
	files["/latin/capabilitylist.xml"] = rawFile{body: encoded(t, unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder(), "UTF-16",
		capList("latin", "resourcelist.xml=resourcelist", "changelist.xml=changelist"))}
	files["/latin/resourcelist.xml"] = rawFile{body: encoded(t, charmap.ISO8859_1.NewEncoder(), "ISO-8859-1", strings.ReplaceAll(capDoc("resourcelist", at), "/€/“quoted”", ""))}
	files["/latin/changelist.xml"] = rawFile{body: encoded(t, charmap.Windows1252.NewEncoder(), "windows-1252", capDoc("changelist", at))}
	files["/be/capabilitylist.xml"] = rawFile{body: encoded(t, unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewEncoder(), "UTF-16",
		capList("be", "resourcelist.xml=resourcelist"))}
	files["/be/resourcelist.xml"] = rawFile{body: gzipOf(string(encoded(t, unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewEncoder(), "UTF-16", capDoc("resourcelist", at)))), encoding: "gzip"}
	files["/bomb/capabilitylist.xml.gz"] = rawFile{body: gzipOf(strings.Repeat(" ", 4<<20))}
	files["/klingon/capabilitylist.xml"] = rawFile{body: []byte(strings.Replace(capList("klingon", "resourcelist.xml=resourcelist"), `encoding="UTF-8"`, `encoding="x-klingon"`, 1))}
	sets := []string{"gz/capabilitylist.xml.gz", "ce/capabilitylist.xml", "latin/capabilitylist.xml", "be/capabilitylist.xml", "bomb/capabilitylist.xml.gz", "klingon/capabilitylist.xml"}
	var entries []string
	for _, s := range sets {
		entries = append(entries, base+"/"+s+` capability="capabilitylist"`)
	}
	files["/.well-known/resourcesync"] = rawFile{body: gzipOf(rsdoc("urlset", md(`capability="description"`), entries...)), encoding: "gzip"}

	src := mustDiscover(t, base, resourcesync.Options{MaxDocumentSize: 1 << 20})
	if src.Description != base+"/.well-known/resourcesync" || len(src.Sets) != len(sets) {
		var b strings.Builder
		src.WriteText(&b)
		t.Fatalf("found %q with %d sets, want the description with %d:\n%s", src.Description, len(src.Sets), len(sets), b.String())
	}
	want := map[string][]manifest.Capability{
		"gz":    {manifest.ResourceList, manifest.ResourceDump, manifest.ChangeDump, manifest.ChangeList},
		"ce":    {manifest.ResourceDump},
		"latin": {manifest.ResourceList, manifest.ChangeList},
		"be":    {manifest.ResourceList},
	}
	for name, kinds := range want {
		st, err := src.Set(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Err != "" || len(st.Capabilities) != len(kinds) {
			t.Errorf("set %s: error %q, %d capabilities, want %d", name, st.Err, len(st.Capabilities), len(kinds))
			continue
		}
		for i, c := range st.Capabilities {
			if c.Kind != kinds[i] || c.Err != "" || !c.At.Equal(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)) {
				t.Errorf("set %s: capability %d is %+v, want a %s at %s", name, i, c, kinds[i], at)
			}
			for _, ch := range c.Children {
				if ch.Kind != kinds[i] || ch.Err != "" {
					t.Errorf("set %s: child %+v", name, ch)
				}
			}
			if name == "ce" && len(c.Children) != 2 {
				t.Errorf("set ce: the index has %d children read, want 2", len(c.Children))
			}
		}
	}
	for name, says := range map[string][]string{
		"bomb":    {"larger than allowed", base + "/bomb/capabilitylist.xml.gz"},
		"klingon": {`"x-klingon"`},
	} {
		st, err := src.Set(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range says {
			if !strings.Contains(st.Err, s) {
				t.Errorf("set %s: error %q, want one saying %q", name, st.Err, s)
			}
		}
		if strings.Count(st.Err, base+"/"+name) > 1 {
			t.Errorf("set %s: error %q names the document more than once", name, st.Err)
		}
	}
}
