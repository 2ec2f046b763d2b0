package pipeline_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/testdata/javazip"
)

// dspacePackage is a Resource Dump package as DSpace's ResourceSync module
// writes one: entry names with a leading separator ("/", or "\" on
// Windows), manifest.xml last, and (with Java) every entry deflated with a
// data descriptor. The manifest's paths use sep too.
type dspacePackage struct {
	sep    string
	bodies map[string][]byte // URI → body
	names  []string          // entry names, in order, manifest.xml last
	data   map[string][]byte // entry name → bytes
}

func newDSpacePackage(set, sep string) *dspacePackage {
	p := &dspacePackage{sep: sep, bodies: map[string][]byte{}, data: map[string][]byte{}}
	var entries []string
	for i := range 4 {
		uri := fmt.Sprintf("http://example.org/bitstreams/%s/%d", set, i)
		body := []byte(strings.Repeat(fmt.Sprintf("bitstream %d of %s; ", i, set), 300))
		name := sep + strings.Join([]string{"resources", "123456789_101", fmt.Sprintf("%d_file %d.pdf", i+1, i)}, sep)
		p.bodies[uri] = body
		p.names = append(p.names, name)
		p.data[name] = body
		entries = append(entries, fmt.Sprintf(`<url><loc>%s</loc><lastmod>2024-03-01T10:00:00Z</lastmod><rs:md path="%s" hash="md5:%s" length="%d" type="application/pdf"/></url>`,
			uri, name, hexMD5(body), len(body)))
	}
	p.names = append(p.names, "manifest.xml")
	p.data["manifest.xml"] = doc("resourcedump-manifest", `at="2024-03-01T12:00:00Z"`, entries...)
	return p
}

// withGo writes the package with Go's archive/zip (data descriptors too).
func (p *dspacePackage) withGo(t *testing.T, out string) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range p.names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(p.data[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// withJava writes the package with java.util.zip.ZipOutputStream.
func (p *dspacePackage) withJava(t *testing.T, out string) {
	var es []javazip.Entry
	for _, n := range p.names {
		es = append(es, javazip.Entry{Name: n, Body: p.data[n]})
	}
	javazip.Write(t, out, es)
}

// TestDSpacePackages: packages written as DSpace writes them — by Java's
// ZipOutputStream itself and by code — with "/" and "\" separators, are
// synced in full, streamed or spooled, and every resource verified.
func TestDSpacePackages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	want := map[string][]byte{}
	var dumpEntries []string
	for _, v := range []struct {
		name, sep string
		java      bool
	}{
		{"java-slash", "/", true},
		{"java-backslash", `\`, true},
		{"go-slash", "/", false},
		{"go-backslash", `\`, false},
	} {
		p := newDSpacePackage(v.name, v.sep)
		out := filepath.Join(dir, v.name+".zip")
		if v.java {
			p.withJava(t, out)
		} else {
			p.withGo(t, out)
		}
		info, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		for k, b := range p.bodies {
			want[k] = b
		}
		dumpEntries = append(dumpEntries, fmt.Sprintf(`<url><loc>%s%s.zip</loc><rs:md type="application/zip" length="%d"/></url>`, srcBase, v.name, info.Size()))
	}
	writeRaw(t, dir,
		srcFile{"capabilitylist.xml", doc("capabilitylist", "", `<url><loc>`+srcBase+`resourcedump.xml</loc><rs:md capability="resourcedump"/></url>`)},
		srcFile{"resourcedump.xml", doc("resourcedump", `at="2024-03-01T12:00:00Z"`, dumpEntries...)},
	)
	srv := serve(t, dir)
	for _, streaming := range []bool{true, false} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			h := newHarness(t)
			rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", func(o *pipeline.Options) { o.DisableStreaming = !streaming })
			if rep.Status != pipeline.StatusOK || rep.Resources.Written != int64(len(want)) || len(rep.Skips) != 0 {
				t.Fatalf("%s\nfailures %+v\nskips %+v", rep.Summary(), rep.Failures, rep.Skips)
			}
			held := h.held(ctx)
			for uri, body := range want {
				if !bytes.Equal(held[uri], body) {
					t.Errorf("%s not delivered intact", uri)
				}
			}
		})
	}
}
