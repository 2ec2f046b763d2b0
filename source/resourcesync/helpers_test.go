package resourcesync_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// page is what a test site serves at one path. BASE in the body and the
// header values stands for the site's URL (no trailing slash).
type page struct {
	status int
	ctype  string
	body   string
	header []string // "Name: value"
}

// site is an httptest server on 127.0.0.1 serving pages by path (and
// query), 404 for the others, and counting requests.
type site struct {
	*httptest.Server
	mu    sync.Mutex
	pages map[string]page
	hits  map[string]int
}

func newSite(t testing.TB) *site {
	t.Helper()
	s := &site{pages: map[string]page{}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Path
	if r.URL.RawQuery != "" {
		key += "?" + r.URL.RawQuery
	}
	s.mu.Lock()
	s.hits[key]++
	p, ok := s.pages[key]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	for _, h := range p.header {
		k, v, _ := strings.Cut(h, ":")
		w.Header().Add(k, strings.TrimSpace(strings.ReplaceAll(v, "BASE", s.URL)))
	}
	if p.ctype != "" {
		w.Header().Set("Content-Type", p.ctype)
	}
	if p.status != 0 {
		w.WriteHeader(p.status)
	}
	fmt.Fprint(w, strings.ReplaceAll(p.body, "BASE", s.URL))
}

// add serves body at path with the given Content-Type and headers.
func (s *site) add(path, ctype, body string, header ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages[path] = page{ctype: ctype, body: body, header: header}
}

// xml serves a document at path as application/xml.
func (s *site) xml(path, body string) { s.add(path, "application/xml", body) }

func (s *site) status(path string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages[path] = page{status: code, body: http.StatusText(code)}
}

func (s *site) hitsOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *site) totalHits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.hits {
		n += h
	}
	return n
}

const nsDecl = `xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"`

// rsdoc builds a ResourceSync document: root "urlset" or "sitemapindex",
// head the root's rs:ln and rs:md elements, entries "LOC ATTRS" with ATTRS
// those of the entry's rs:md (may be empty).
func rsdoc(root, head string, entries ...string) string {
	item := "url"
	if root == "sitemapindex" {
		item = "sitemap"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<%s %s>\n  %s\n", root, nsDecl, head)
	for _, e := range entries {
		loc, attrs, _ := strings.Cut(e, " ")
		fmt.Fprintf(&b, "  <%s><loc>%s</loc>", item, loc)
		if attrs != "" {
			fmt.Fprintf(&b, "<rs:md %s/>", attrs)
		}
		fmt.Fprintf(&b, "</%s>\n", item)
	}
	fmt.Fprintf(&b, "</%s>\n", root)
	return b.String()
}

func md(attrs string) string { return "<rs:md " + attrs + "/>" }

func ln(rel, href string) string { return `<rs:ln rel="` + rel + `" href="` + href + `"/>` }

// addSource serves a source with two resource sets whose Source
// Description is at descPath (its "up" target):
//
//	dataset1: a resource list, a resource dump, a change dump index of
//	          two change dumps (the second open)
//	dataset2: a resource list
//
// The resource list of dataset1 is truncated after its first entry: only
// its header may be read. The resource list of dataset2 is served as
// text/html.
func addSource(s *site, descPath string) {
	desc := "BASE" + descPath
	cl1, cl2 := "BASE/dataset1/capabilitylist.xml", "BASE/dataset2/capabilitylist.xml"
	idx := "BASE/dataset1/changedump-index.xml"
	s.xml(descPath, rsdoc("urlset", md(`capability="description"`),
		cl1+` capability="capabilitylist"`,
		cl2+` capability="capabilitylist"`))
	s.xml("/dataset1/capabilitylist.xml", rsdoc("urlset", ln("up", desc)+md(`capability="capabilitylist"`),
		`BASE/dataset1/resourcelist.xml capability="resourcelist"`,
		`BASE/dataset1/resourcedump.xml capability="resourcedump"`,
		idx+` capability="changedump"`))
	s.xml("/dataset1/resourcelist.xml", `<?xml version="1.0" encoding="UTF-8"?>
<urlset `+nsDecl+`>`+ln("up", cl1)+md(`capability="resourcelist" at="2024-01-01T00:00:00Z"`)+`
<url><loc>BASE/r1</loc></url>
<url><loc>BASE/r`)
	s.xml("/dataset1/resourcedump.xml", rsdoc("urlset", ln("up", cl1)+md(`capability="resourcedump" at="2024-01-02T00:00:00Z"`),
		`BASE/dataset1/p1.zip length="10"`))
	s.xml("/dataset1/changedump-index.xml", rsdoc("sitemapindex", ln("up", cl1)+md(`capability="changedump" from="2024-01-01T00:00:00Z"`),
		`BASE/dataset1/changedump-1.xml from="2024-01-01T00:00:00Z" until="2024-02-01T00:00:00Z"`,
		`BASE/dataset1/changedump-2.xml from="2024-02-01T00:00:00Z"`))
	s.xml("/dataset1/changedump-1.xml", rsdoc("urlset", ln("up", cl1)+ln("index", idx)+md(`capability="changedump" from="2024-01-01T00:00:00Z" until="2024-02-01T00:00:00Z"`),
		`BASE/dataset1/c1.zip`))
	s.xml("/dataset1/changedump-2.xml", rsdoc("urlset", ln("up", cl1)+ln("index", idx)+md(`capability="changedump" from="2024-02-01T00:00:00Z"`),
		`BASE/dataset1/c2.zip`))
	s.xml("/dataset2/capabilitylist.xml", rsdoc("urlset", ln("up", desc)+md(`capability="capabilitylist"`),
		`BASE/dataset2/resourcelist.xml capability="resourcelist"`))
	// Served as HTML by a misconfigured server: the root tells.
	s.add("/dataset2/resourcelist.xml", "text/html; charset=utf-8", rsdoc("urlset", ln("up", cl2)+md(`capability="resourcelist" at="2024-03-01T00:00:00Z"`),
		`BASE/r2`))
}

// sourceTree is the text of addSource's tree below "description …".
const sourceTree = `  capabilitylist BASE/dataset1/capabilitylist.xml set=dataset1
    resourcelist BASE/dataset1/resourcelist.xml at=2024-01-01T00:00:00Z
    resourcedump BASE/dataset1/resourcedump.xml at=2024-01-02T00:00:00Z
    changedump BASE/dataset1/changedump-index.xml index open from=2024-01-01T00:00:00Z
      changedump BASE/dataset1/changedump-1.xml from=2024-01-01T00:00:00Z until=2024-02-01T00:00:00Z
      changedump BASE/dataset1/changedump-2.xml open from=2024-02-01T00:00:00Z
  capabilitylist BASE/dataset2/capabilitylist.xml set=dataset2
    resourcelist BASE/dataset2/resourcelist.xml at=2024-03-01T00:00:00Z
`

// discover runs Discover against start with a client that does not retry,
// bounded by a timeout so that a loop fails the test instead of hanging it.
func discover(t testing.TB, start string, opts resourcesync.Options) (*resourcesync.Source, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := fetch.New(fetch.Options{Retries: -1, BackoffInitial: time.Millisecond, Timeout: 5 * time.Second})
	src, err := resourcesync.Discover(ctx, c, start, opts)
	if ctx.Err() != nil {
		t.Fatalf("Discover(%s) did not finish in time", start)
	}
	return src, err
}

// mustDiscover is discover that fails the test on an error.
func mustDiscover(t testing.TB, start string, opts resourcesync.Options) *resourcesync.Source {
	t.Helper()
	src, err := discover(t, start, opts)
	if err != nil {
		t.Fatalf("Discover(%s): %v", start, err)
	}
	return src
}

// text returns the source's WriteText output with the site URL as BASE.
func text(t testing.TB, s *site, src *resourcesync.Source) string {
	t.Helper()
	var b strings.Builder
	if err := src.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(b.String(), s.URL, "BASE")
}
