package resourcesync_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

func TestWellKnown(t *testing.T) {
	s := newSite(t)
	addSource(s, "/.well-known/resourcesync")
	for _, start := range []string{s.URL, s.URL + "/"} {
		src := mustDiscover(t, start, resourcesync.Options{})
		want := "source " + strings.ReplaceAll(start, s.URL, "BASE") + " found=well-known\n" +
			"description BASE/.well-known/resourcesync\n" + sourceTree
		if got := text(t, s, src); got != want {
			t.Errorf("text:\n%s\nwant:\n%s", got, want)
		}
	}
	if n := s.hitsOf("/robots.txt"); n != 0 {
		t.Errorf("robots.txt read %d times although the well-known URI answered", n)
	}
	if n := s.hitsOf("/dataset1/resourcelist.xml"); n != 2 {
		t.Errorf("resource list read %d times, want once per Discover", n)
	}
}

func TestRobots(t *testing.T) {
	s := newSite(t)
	addSource(s, "/rs/description.xml")
	s.add("/robots.txt", "text/plain", "# robots\r\nUser-agent: *\r\nDisallow: /tmp/\r\n"+
		"Sitemap: BASE/sitemap.xml\r\n"+
		"SITEMAP :   /dataset1/resourcelist.xml   # relative, odd case\r\n"+
		"Sitemap: BASE/missing.xml\r\n")
	s.xml("/sitemap.xml", `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>BASE/page</loc></url></urlset>`)
	src := mustDiscover(t, s.URL+"/", resourcesync.Options{})
	want := "source BASE/ found=robots.txt\ndescription BASE/rs/description.xml\n" + sourceTree
	if got := text(t, s, src); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if s.hitsOf("/.well-known/resourcesync") != 1 || s.hitsOf("/sitemap.xml") != 1 {
		t.Errorf("well-known and the plain sitemap should each be tried once: %v", s.hits)
	}
}

func TestHTMLLink(t *testing.T) {
	s := newSite(t)
	addSource(s, "/rs/description.xml")
	s.add("/", "text/html; charset=utf-8", `<!DOCTYPE html>
<html><head><title>A <link rel="resourcesync" href="/decoy-title.xml"></title>
<!-- <link rel="resourcesync" href="/decoy-comment.xml"> -->
<script>var s = '<link rel="resourcesync" href="/decoy-script.xml">';</script>
<link rel="stylesheet" href="/style.css">
<LINK TYPE="application/xml" HREF = dataset2/capabilitylist.xml Rel='Alternate  ResourceSync'>
</head><body><p>1 < 2</p></body></html>`)
	src := mustDiscover(t, s.URL, resourcesync.Options{})
	want := "source BASE found=html-link\ndescription BASE/rs/description.xml\n" + sourceTree
	if got := text(t, s, src); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	for _, p := range []string{"/decoy-title.xml", "/decoy-comment.xml", "/decoy-script.xml", "/style.css"} {
		if s.hitsOf(p) != 0 {
			t.Errorf("%s was requested", p)
		}
	}
	// The same page given as a document (not a bare site).
	s.add("/about.html", "text/html", `<html><head><link href="/dataset1/capabilitylist.xml" rel=resourcesync></head></html>`)
	src = mustDiscover(t, s.URL+"/about.html", resourcesync.Options{})
	if src.Found != resourcesync.FoundHTMLLink || src.Description != s.URL+"/rs/description.xml" || len(src.Sets) != 2 {
		t.Errorf("from a page: %+v", src)
	}
}

func TestLinkHeader(t *testing.T) {
	s := newSite(t)
	addSource(s, "/rs/description.xml")
	s.add("/", "text/html", "<html><head><title>home</title></head></html>",
		`Link: <BASE/other>; rel="next", </dataset1/capabilitylist.xml>; rel="resourcesync"; type="application/xml"`)
	src := mustDiscover(t, s.URL, resourcesync.Options{})
	want := "source BASE found=link-header\ndescription BASE/rs/description.xml\n" + sourceTree
	if got := text(t, s, src); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	// Any response may carry it: a PDF here.
	s.add("/paper.pdf", "application/pdf", "%PDF-1.4 …", `Link: <BASE/dataset2/capabilitylist.xml>; rel="ResourceSync"`)
	src = mustDiscover(t, s.URL+"/paper.pdf", resourcesync.Options{})
	if src.Found != resourcesync.FoundLinkHeader || len(src.Sets) != 2 || len(src.Warnings) != 0 {
		t.Errorf("from a PDF: %+v", src)
	}
}

func TestUpLinks(t *testing.T) {
	s := newSite(t)
	addSource(s, "/.well-known/resourcesync")
	for _, tc := range []struct{ start, found string }{
		{"/dataset1/resourcelist.xml", resourcesync.FoundUpLinks},
		{"/dataset1/changedump-2.xml", resourcesync.FoundUpLinks}, // a child of a change dump index
		{"/dataset1/changedump-index.xml", resourcesync.FoundUpLinks},
		{"/dataset2/capabilitylist.xml", resourcesync.FoundUpLinks},
		{"/.well-known/resourcesync", resourcesync.FoundGiven},
	} {
		t.Run(tc.start, func(t *testing.T) {
			src := mustDiscover(t, s.URL+tc.start, resourcesync.Options{})
			want := "source BASE" + tc.start + " found=" + tc.found + "\ndescription BASE/.well-known/resourcesync\n" + sourceTree
			if got := text(t, s, src); got != want {
				t.Errorf("text:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestUpViaIndexLink climbs from a change dump that has no up link, only
// an index link to its index.
func TestUpViaIndexLink(t *testing.T) {
	s := newSite(t)
	addSource(s, "/.well-known/resourcesync")
	s.xml("/dataset1/changedump-2.xml", rsdoc("urlset", ln("index", "BASE/dataset1/changedump-index.xml")+md(`capability="changedump" from="2024-02-01T00:00:00Z"`)))
	src := mustDiscover(t, s.URL+"/dataset1/changedump-2.xml", resourcesync.Options{})
	if src.Found != resourcesync.FoundUpLinks || src.Description == "" || len(src.Warnings) != 0 {
		t.Errorf("%+v", src)
	}
}

func TestSets(t *testing.T) {
	s := newSite(t)
	addSource(s, "/.well-known/resourcesync")
	src := mustDiscover(t, s.URL, resourcesync.Options{})
	for _, name := range []string{"dataset1", "dataset2"} {
		st, err := src.Set(name)
		if err != nil || st.Name != name || st.CapabilityList != s.URL+"/"+name+"/capabilitylist.xml" {
			t.Errorf("Set(%q) = %+v, %v", name, st, err)
		}
		if byURL, err := src.Set(st.CapabilityList); err != nil || byURL != st {
			t.Errorf("Set(%q) = %+v, %v", st.CapabilityList, byURL, err)
		}
	}
	for _, name := range []string{"nope", ""} {
		_, err := src.Set(name)
		if err == nil || !strings.Contains(err.Error(), "dataset1, dataset2") || !errclass.IsPermanent(err) {
			t.Errorf("Set(%q) error = %v, want one listing the names", name, err)
		}
	}
	st, _ := src.Set("dataset1")
	cd, ok := st.Find(manifest.ChangeDump)
	if !ok || !cd.Index || !cd.Open || len(cd.Children) != 2 || cd.Children[0].Open || !cd.Children[1].Open ||
		!cd.Children[0].Until.Equal(time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Find(changedump) = %+v, %v", cd, ok)
	}
	rd, ok := st.Find(manifest.ResourceDump)
	if !ok || rd.Index || rd.Open || !rd.At.Equal(time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Find(resourcedump) = %+v, %v", rd, ok)
	}
	if _, ok := st.Find(manifest.ChangeList); ok {
		t.Error("Find(changelist) found one")
	}
}

// TestNoDescription: without a Source Description above, the Source has
// one set built from what was found.
func TestNoDescription(t *testing.T) {
	s := newSite(t)
	// A capability list without up link.
	s.xml("/cl.xml", rsdoc("urlset", md(`capability="capabilitylist"`),
		`BASE/rl.xml capability="resourcelist"`, `BASE/missing.xml capability="resourcedump"`))
	s.xml("/rl.xml", rsdoc("urlset", ln("up", "BASE/cl.xml")+md(`capability="resourcelist" at="2024-01-01T00:00:00Z"`)))
	// A resource list without any up link, one whose up link is broken.
	s.xml("/alone.xml", rsdoc("urlset", md(`capability="resourcelist"`)))
	s.xml("/orphan.xml", rsdoc("urlset", ln("up", "BASE/gone.xml")+md(`capability="resourcelist"`)))

	src := mustDiscover(t, s.URL+"/rl.xml", resourcesync.Options{})
	want := `source BASE/rl.xml found=given
capabilitylist BASE/cl.xml set=cl
  resourcelist BASE/rl.xml at=2024-01-01T00:00:00Z
  resourcedump BASE/missing.xml error="GET BASE/missing.xml: HTTP 404 Not Found"
`
	if got := text(t, s, src); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}

	src = mustDiscover(t, s.URL+"/alone.xml", resourcesync.Options{})
	want = "source BASE/alone.xml found=given\ncapabilitylist - set=default\n  resourcelist BASE/alone.xml\n"
	if got := text(t, s, src); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}

	src = mustDiscover(t, s.URL+"/orphan.xml", resourcesync.Options{})
	if len(src.Sets) != 1 || src.Sets[0].CapabilityList != s.URL+"/gone.xml" || !strings.Contains(src.Sets[0].Err, "404") ||
		len(src.Sets[0].Capabilities) != 1 || src.Sets[0].Capabilities[0].URL != s.URL+"/orphan.xml" ||
		len(src.Warnings) != 1 || !strings.Contains(src.Warnings[0], "up link") {
		t.Errorf("orphan: %+v", src)
	}
}

// TestUpLoop: A up→B up→A is reported, not followed forever.
func TestUpLoop(t *testing.T) {
	s := newSite(t)
	s.xml("/a.xml", rsdoc("urlset", ln("up", "BASE/b.xml")+md(`capability="resourcelist"`)))
	s.xml("/b.xml", rsdoc("urlset", ln("up", "BASE/a.xml")+md(`capability="capabilitylist"`), `BASE/a.xml capability="resourcelist"`))
	src := mustDiscover(t, s.URL+"/a.xml", resourcesync.Options{})
	if len(src.Sets) != 1 || src.Sets[0].CapabilityList != s.URL+"/b.xml" || len(src.Sets[0].Capabilities) != 1 {
		t.Errorf("%+v", src)
	}
	if len(src.Warnings) != 1 || !strings.Contains(src.Warnings[0], "link loop") || !strings.Contains(src.Warnings[0], "/a.xml") {
		t.Errorf("warnings = %q", src.Warnings)
	}
	if s.hitsOf("/a.xml") != 1 || s.hitsOf("/b.xml") != 1 {
		t.Errorf("hits = %v", s.hits)
	}

	// Two capability lists pointing up at each other.
	s.xml("/c.xml", rsdoc("urlset", ln("up", "BASE/d.xml")+md(`capability="capabilitylist"`)))
	s.xml("/d.xml", rsdoc("urlset", ln("up", "BASE/c.xml")+md(`capability="capabilitylist"`)))
	src = mustDiscover(t, s.URL+"/c.xml", resourcesync.Options{})
	if len(src.Sets) != 1 || src.Sets[0].CapabilityList != s.URL+"/c.xml" || len(src.Warnings) != 1 || !strings.Contains(src.Warnings[0], "not above it") {
		t.Errorf("%+v", src)
	}
}

// TestDownLoop: an index that lists itself, or an index above it.
func TestDownLoop(t *testing.T) {
	s := newSite(t)
	s.xml("/cl.xml", rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/i1.xml capability="resourcedump"`, `BASE/cl.xml capability="resourcelist"`))
	s.xml("/i1.xml", rsdoc("sitemapindex", md(`capability="resourcedump"`), `BASE/i1.xml`, `BASE/i2.xml`))
	s.xml("/i2.xml", rsdoc("sitemapindex", md(`capability="resourcedump"`), `BASE/i1.xml`, `BASE/d.xml`))
	s.xml("/d.xml", rsdoc("urlset", md(`capability="resourcedump" at="2024-01-01T00:00:00Z"`)))
	src := mustDiscover(t, s.URL+"/cl.xml", resourcesync.Options{})
	want := `source BASE/cl.xml found=given
capabilitylist BASE/cl.xml set=cl
  resourcedump BASE/i1.xml index
    resourcedump BASE/i1.xml error="link loop: the document is above this one in the tree; not read again"
    resourcedump BASE/i2.xml index
      resourcedump BASE/i1.xml error="link loop: the document is above this one in the tree; not read again"
      resourcedump BASE/d.xml at=2024-01-01T00:00:00Z
  resourcelist BASE/cl.xml error="link loop: the document is above this one in the tree; not read again"
warning: link loop: BASE/i1.xml lists BASE/i1.xml, which is above it; not followed again
warning: link loop: BASE/i2.xml lists BASE/i1.xml, which is above it; not followed again
warning: link loop: BASE/cl.xml lists BASE/cl.xml, which is above it; not followed again
`
	if got := text(t, s, src); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	for _, p := range []string{"/cl.xml", "/i1.xml", "/i2.xml", "/d.xml"} {
		if n := s.hitsOf(p); n != 1 {
			t.Errorf("%s read %d times", p, n)
		}
	}
}

// TestLimits: nesting deeper than MaxDepth and more documents than
// MaxDocuments stop the walk with warnings.
func TestLimits(t *testing.T) {
	s := newSite(t)
	var entries []string
	for i := range 50 {
		p := "/wide/" + string(rune('a'+i/26)) + string(rune('a'+i%26)) + ".xml"
		s.xml(p, rsdoc("urlset", md(`capability="changedump" from="2024-01-01T00:00:00Z"`)))
		entries = append(entries, "BASE"+p)
	}
	s.xml("/wide.xml", rsdoc("sitemapindex", md(`capability="changedump"`), entries...))
	s.xml("/cl.xml", rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/wide.xml capability="changedump"`, `BASE/deep/0.xml capability="resourcedump"`))
	for i := range 30 {
		s.xml("/deep/"+strconv.Itoa(i)+".xml", rsdoc("sitemapindex", md(`capability="resourcedump"`), "BASE/deep/"+strconv.Itoa(i+1)+".xml"))
	}

	src := mustDiscover(t, s.URL+"/cl.xml", resourcesync.Options{MaxDocuments: 10})
	if n := s.totalHits(); n > 10 {
		t.Errorf("%d requests with MaxDocuments 10", n)
	}
	wide, _ := src.Sets[0].Find(manifest.ChangeDump)
	if len(wide.Children) != 10 || !wide.Children[7].Open || wide.Children[7].Err != "" || !strings.Contains(wide.Children[9].Err, "limit of 10") {
		t.Errorf("wide index: %d children, last %+v", len(wide.Children), wide.Children[len(wide.Children)-1])
	}
	if !slices.ContainsFunc(src.Warnings, func(w string) bool { return strings.Contains(w, "after 10") }) {
		t.Errorf("warnings = %q", src.Warnings)
	}

	src = mustDiscover(t, s.URL+"/cl.xml", resourcesync.Options{MaxDepth: 5})
	deep, _ := src.Sets[0].Find(manifest.ResourceDump)
	depth := 0
	for c := deep; c != nil; depth++ {
		if len(c.Children) == 0 {
			if !strings.Contains(c.Err, "nested more than 5") {
				t.Errorf("deepest: %+v", c)
			}
			break
		}
		c = &c.Children[0]
	}
	if depth != 5 {
		t.Errorf("depth %d, want 5", depth)
	}
}

// TestNotResourceSync: a start that leads to no ResourceSync document
// fails with an error naming the URL and what was expected.
func TestNotResourceSync(t *testing.T) {
	s := newSite(t)
	s.add("/page.html", "text/html", "<html><head><title>no link</title></head><body>hello</body></html>")
	s.xml("/sitemap.xml", `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://example.org/</loc></url></urlset>`)
	s.xml("/truncated.xml", `<?xml version="1.0" encoding="UTF-8"?>
<urlset `+nsDecl+`><rs:md capabil`)
	s.add("/plain.txt", "text/plain", "just text")
	s.xml("/manifest.xml", rsdoc("urlset", md(`capability="resourcedump-manifest"`), `BASE/r1 path="/r1"`))
	s.add("/bad-link.html", "text/html", `<link rel="resourcesync" href="/sitemap.xml">`)
	for _, tc := range []struct{ path, says string }{
		{"/page.html", `an HTML page without <link rel="resourcesync">`},
		{"/sitemap.xml", "not a ResourceSync document"},
		{"/truncated.xml", "not a well-formed XML document"},
		{"/plain.txt", "not a well-formed XML document"},
		{"/manifest.xml", "is a resourcedump-manifest document"},
		{"/bad-link.html", `links lead to no usable document (BASE/sitemap.xml is not a ResourceSync document`},
		{"/missing.xml", "HTTP 404"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, err := discover(t, s.URL+tc.path, resourcesync.Options{})
			if err == nil {
				t.Fatal("no error")
			}
			msg := strings.ReplaceAll(err.Error(), s.URL, "BASE")
			if !errors.Is(err, resourcesync.ErrNotFound) || !errclass.IsPermanent(err) ||
				!strings.Contains(msg, "BASE"+tc.path) || !strings.Contains(msg, tc.says) {
				t.Errorf("err = %s (class %v), want ErrNotFound naming BASE%s and saying %q", msg, errclass.Of(err), tc.path, tc.says)
			}
			if tc.path != "/missing.xml" && !strings.Contains(msg, "expected a ResourceSync Source Description") {
				t.Errorf("err = %s, want it to say what was expected", msg)
			}
			if n := strings.Count(msg, "BASE"+tc.path+" ") + strings.Count(msg, "BASE"+tc.path+":"); n != 1 {
				t.Errorf("err = %s names BASE%s %d times, want once", msg, tc.path, n)
			}
			if strings.Count(msg, "not a ResourceSync document") > 1 || strings.Count(msg, "malformed document") > 0 {
				t.Errorf("err = %s says the same thing twice", msg)
			}
		})
	}

	// A bare site with nothing: every way tried is named.
	s.add("/", "text/html", "<html></html>")
	_, err := discover(t, s.URL, resourcesync.Options{})
	msg := strings.ReplaceAll(fmtErr(err), s.URL, "BASE")
	for _, want := range []string{"BASE/.well-known/resourcesync", "404", "BASE/robots.txt", "BASE/ is an HTML page", "expected a Source Description at /.well-known/resourcesync"} {
		if !errors.Is(err, resourcesync.ErrNotFound) || !strings.Contains(msg, want) {
			t.Errorf("bare site: err = %s, want it to contain %q", msg, want)
		}
	}
	// Each URL tried is named once; the site is the home page, named so.
	for _, u := range []string{"BASE/.well-known/resourcesync:", "BASE/robots.txt:", "BASE/ "} {
		if n := strings.Count(msg, u); n != 1 {
			t.Errorf("bare site: err = %s names %q %d times, want once", msg, u, n)
		}
	}
	// A temporary failure makes the error retryable.
	s.status("/.well-known/resourcesync", http.StatusServiceUnavailable)
	if _, err := discover(t, s.URL, resourcesync.Options{}); !errclass.IsRetryable(err) || !errors.Is(err, resourcesync.ErrNotFound) {
		t.Errorf("bare site with a 503: err = %v (class %v)", err, errclass.Of(err))
	}
	if _, err := discover(t, "ftp://"+s.Listener.Addr().String()+"/", resourcesync.Options{}); err == nil || !errclass.IsPermanent(err) {
		t.Errorf("ftp URL: err = %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestWarnings: documents that are not what their listing says.
func TestWarnings(t *testing.T) {
	s := newSite(t)
	s.xml("/.well-known/resourcesync", rsdoc("urlset", md(`capability="description"`),
		`BASE/a/capabilitylist.xml capability="capabilitylist"`, `BASE/rl.xml capability="resourcelist"`, `BASE/a/capabilitylist.xml`))
	s.xml("/a/capabilitylist.xml", rsdoc("urlset", md(`capability="capabilitylist"`),
		`BASE/rl.xml capability="resourcedump"`, `BASE/page.html capability="changelist"`, `relative.xml capability="changelist"`, `mailto:x@example.org`))
	s.xml("/rl.xml", rsdoc("urlset", md(`capability="resourcelist"`)))
	s.add("/page.html", "text/html", "<p>hi</p>")
	s.xml("/a/relative.xml", rsdoc("urlset", md(`capability="changelist" until="2024-05-01T00:00:00Z"`)))
	src := mustDiscover(t, s.URL, resourcesync.Options{})
	want := `source BASE found=well-known
description BASE/.well-known/resourcesync
  capabilitylist BASE/a/capabilitylist.xml set=capabilitylist
    resourcelist BASE/rl.xml
    changelist BASE/page.html error="an HTML page without <link rel=\"resourcesync\">"
    changelist BASE/a/relative.xml until=2024-05-01T00:00:00Z
warning: BASE/.well-known/resourcesync lists BASE/rl.xml as a resourcelist, expected a capabilitylist; skipped
warning: BASE/.well-known/resourcesync lists BASE/a/capabilitylist.xml twice
warning: BASE/a/capabilitylist.xml lists BASE/rl.xml as a resourcedump, but it is a resourcelist document
warning: BASE/a/capabilitylist.xml: entry "mailto:x@example.org" is not a usable http(s) URL; skipped
`
	if got := text(t, s, src); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
}

func TestJSON(t *testing.T) {
	s := newSite(t)
	addSource(s, "/.well-known/resourcesync")
	src := mustDiscover(t, s.URL+"/dataset2/resourcelist.xml", resourcesync.Options{})
	var b strings.Builder
	if err := src.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	out := strings.ReplaceAll(b.String(), s.URL, "BASE")
	for _, want := range []string{
		`"start": "BASE/dataset2/resourcelist.xml"`,
		`"description": "BASE/.well-known/resourcesync"`,
		`"found": "up-links"`,
		`"warnings": []`,
		`"name": "dataset1"`,
		`"capability_list": "BASE/dataset1/capabilitylist.xml"`,
		`"kind": "changedump",
          "url": "BASE/dataset1/changedump-index.xml",
          "index": true,
          "from": "2024-01-01T00:00:00Z",
          "open": true,
          "children": [`,
		`"kind": "resourcelist",
          "url": "BASE/dataset2/resourcelist.xml",
          "index": false,
          "at": "2024-03-01T00:00:00Z",
          "open": false
        }`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("JSON lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"until"`) && strings.Count(out, `"until"`) != 1 {
		t.Errorf("absent times must be left out:\n%s", out)
	}
	var back resourcesync.Source
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil {
		t.Fatal(err)
	}
	back.Warnings = nil
	if !jsonEqual(t, &back, src) {
		t.Errorf("JSON does not read back into the same Source")
	}
}

func jsonEqual(t *testing.T, a, b *resourcesync.Source) bool {
	t.Helper()
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// TestCancel: Discover returns ctx.Err() promptly when ctx ends during a
// request.
func TestCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := resourcesync.Discover(ctx, fetch.New(fetch.Options{}), srv.URL+"/cl.xml", resourcesync.Options{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(begin) > 5*time.Second {
		t.Errorf("err = %v after %v, want the context's error at once", err, time.Since(begin))
	}
}

// TestMaxDocumentSize: a document longer than Options.MaxDocumentSize is
// read no further than the cap and reported as too large; one of exactly
// the cap is read in full. The capability list is read to its end, so its
// padding, after the entries, counts; the entry before it is kept.
func TestMaxDocumentSize(t *testing.T) {
	s := newSite(t)
	pad := "<!--" + strings.Repeat("padding ", 20_000) + "-->"
	cl := rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/rd.xml capability="resourcedump"`) + pad
	s.xml("/cl.xml", cl)
	s.xml("/rd.xml", rsdoc("urlset", md(`capability="resourcedump" at="2024-01-01T00:00:00Z"`), `BASE/p1.zip`))
	s.xml("/desc.xml", rsdoc("urlset", md(`capability="description"`), `BASE/cl.xml capability="capabilitylist"`))
	size := int64(len(strings.ReplaceAll(cl, "BASE", s.URL)))
	tests := []struct {
		max     int64
		tooLong bool
	}{
		{max: size},
		{max: -1},
		{max: size - 1, tooLong: true},
		{max: 4096, tooLong: true},
	}
	for _, tc := range tests {
		t.Run(strconv.FormatInt(tc.max, 10), func(t *testing.T) {
			src := mustDiscover(t, s.URL+"/desc.xml", resourcesync.Options{MaxDocumentSize: tc.max})
			if len(src.Sets) != 1 {
				t.Fatalf("sets %+v", src.Sets)
			}
			// The entries read before the cap are kept; the rest of the
			// document is reported as a warning.
			got := strings.Join(append([]string{src.Sets[0].Err}, src.Warnings...), "; ")
			if strings.Contains(got, fetch.ErrTooLarge.Error()) != tc.tooLong {
				t.Fatalf("capability list of %d bytes, cap %d: error %q; %+v", size, tc.max, got, src)
			}
			if tc.tooLong && !strings.Contains(got, "cl.xml") {
				t.Errorf("error %q does not name the document", got)
			}
			if c := src.Sets[0].Capabilities; len(c) != 1 || c[0].Kind != manifest.ResourceDump {
				t.Errorf("capabilities %+v, want the resource dump listed before the cap", c)
			}
		})
	}
}
