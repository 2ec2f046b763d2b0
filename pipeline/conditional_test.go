package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink/fs"
)

// staticServer counts a test server's answers by status and the body
// bytes it sends for packages.
type staticServer struct {
	mu       sync.Mutex
	status   map[int]int
	zipBytes int64
	etags    int // answers that carried an ETag
}

func (s *staticServer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&staticWriter{ResponseWriter: w, s: s, zip: strings.HasSuffix(r.URL.Path, ".zip")}, r)
	})
}

func (s *staticServer) counts() (map[int]int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := map[int]int{}
	for k, v := range s.status {
		st[k] = v
	}
	return st, s.zipBytes
}

type staticWriter struct {
	http.ResponseWriter
	s    *staticServer
	zip  bool
	code int
}

func (w *staticWriter) WriteHeader(code int) {
	if w.code != 0 {
		return
	}
	w.code = code
	w.s.mu.Lock()
	if w.s.status == nil {
		w.s.status = map[int]int{}
	}
	w.s.status[code]++
	if w.Header().Get("ETag") != "" {
		w.s.etags++
	}
	w.s.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *staticWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.zip {
		w.s.mu.Lock()
		w.s.zipBytes += int64(len(p))
		w.s.mu.Unlock()
	}
	return w.ResponseWriter.Write(p)
}

func (w *staticWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestConditionalResync: a Resource Dump that declares no package hashes
// (only lengths) and links no manifest copies, served by a static server
// with only Last-Modified, or with ETags too. A re-sync of the unchanged
// dump asks for every document and package conditionally, is answered 304,
// and downloads no package body; a package that changed is downloaded
// again, alone.
func TestConditionalResync(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		etag bool
	}{{"last-modified only", false}, {"etag", true}} {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			gen := bench.GenOptions{Dir: src, Resources: 120, Packages: 4, Seed: 11, MeanSize: 2 << 10, NoOddNames: true}
			if _, err := bench.Generate(ctx, gen); err != nil {
				t.Fatal(err)
			}
			// The dump declares lengths but no package hashes, and no
			// manifest copies, as many producers write it.
			dumpPath := filepath.Join(src, "resourcedump.xml")
			b, err := os.ReadFile(dumpPath)
			if err != nil {
				t.Fatal(err)
			}
			b = regexp.MustCompile(`<rs:ln rel="contents"[^>]*/>`).ReplaceAll(b, nil)
			b = regexp.MustCompile(`(<url>.*?<rs:md[^>]*?) hash="[^"]*"`).ReplaceAll(b, []byte("$1"))
			if strings.Contains(string(b), "hash=") || strings.Contains(string(b), `rel="contents"`) {
				t.Fatalf("dump still declares hashes or contents:\n%s", b)
			}
			if err := os.WriteFile(dumpPath, b, 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour).Truncate(time.Second)
			filepath.Walk(src, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, old, old) })

			// Without ETags, the server is a plain static one: Last-Modified,
			// no ETag, no Range.
			st := &staticServer{}
			srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: st.wrap, Static: !tt.etag})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			h := newHarness(t)
			first := h.baseline(ctx, srv.URL, nil)
			if first.Status != runreport.StatusOK || first.Resources.Written != 120 {
				t.Fatalf("first sync: %s", first.Summary())
			}
			_, firstZip := st.counts()
			if firstZip == 0 {
				t.Fatal("the first sync downloaded no package")
			}

			again := h.baseline(ctx, srv.URL, nil)
			status, zipBytes := st.counts()
			st.mu.Lock()
			if sent := st.etags > 0; sent != tt.etag {
				t.Errorf("the server sent %d ETags; static mode must send none", st.etags)
			}
			st.mu.Unlock()
			if again.Status != runreport.StatusOK || again.Resources.Unchanged != 120 || again.Resources.Written != 0 {
				t.Fatalf("re-sync: %s", again.Summary())
			}
			if zipBytes != firstZip || again.Bytes.Downloaded != 0 {
				t.Errorf("the re-sync downloaded %d bytes of package bodies (report: %d)", zipBytes-firstZip, again.Bytes.Downloaded)
			}
			// Documents (description, capability list, dump) and the 4
			// packages were all answered 304.
			if status[http.StatusNotModified] < 4+2 {
				t.Errorf("answers of both runs by status: %v; want every document and package of the re-sync answered 304", status)
			}

			// One package changes (a new file, a new date): it alone is
			// downloaded again.
			pkg := filepath.Join(src, "packages", "part-00002.zip")
			now := time.Now().Truncate(time.Second)
			if err := os.Chtimes(pkg, now, now); err != nil {
				t.Fatal(err)
			}
			third := h.baseline(ctx, srv.URL, nil)
			info, _ := os.Stat(pkg)
			if third.Status != runreport.StatusOK || third.Bytes.Downloaded != info.Size() || third.Resources.Unchanged != 120 {
				t.Errorf("after one package changed: downloaded %d package bytes, want %d (that package alone)\n%s", third.Bytes.Downloaded, info.Size(), third.Summary())
			}
		})
	}
}

// TestDocumentCopyWhole: the copy of a document kept for the next run's
// conditional request is one the planner read whole. A Resource List
// served cut short (a body that ends early, under the whole list's
// validators; the resources read before its end may be fetched) fails its
// set and is not kept: the next run asks for it
// unconditionally, reads it whole, and keeps it; the run after asks
// conditionally, is answered 304 and reads the copy.
// With the protocol's own judgment of a body (source.Protocol.Whole) and
// without it, on the planner's word alone (source.ReadWhole).
func TestDocumentCopyWhole(t *testing.T) {
	for _, judged := range []bool{false, true} {
		t.Run(fmt.Sprintf("judged=%v", judged), func(t *testing.T) { testDocumentCopyWhole(t, judged) })
	}
}

func testDocumentCopyWhole(t *testing.T, judged bool) {
	ctx := context.Background()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 40, Packages: 1, Seed: 5, MeanSize: 1 << 10, NoOddNames: true, WriteResources: true}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	var (
		mu          sync.Mutex
		cut         = true
		conditional []bool // of each request for the list
		status      []int
	)
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/resourcelist.xml" {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			mu.Lock()
			conditional = append(conditional, r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "")
			status = append(status, rec.Code)
			short := cut && rec.Code == http.StatusOK
			mu.Unlock()
			for k, vs := range rec.Header() {
				if k != "Content-Length" {
					w.Header()[k] = vs
				}
			}
			w.WriteHeader(rec.Code)
			body := rec.Body.Bytes()
			if short {
				body = body[:len(body)*2/3]
			}
			w.Write(body)
		})
	}
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: wrap})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newHarness(t)
	list := func(o *pipeline.Options) {
		o.Settings.Options = map[string]string{"prefer": "list"}
		if !judged {
			o.Protocol.Whole = nil
		}
	}
	requests := func() ([]bool, []int) {
		mu.Lock()
		defer mu.Unlock()
		c, s := conditional, status
		conditional, status = nil, nil
		return c, s
	}

	opts := h.options(srv.URL)
	list(&opts)
	var se *pipeline.SourceError
	if _, err := pipeline.Baseline(ctx, opts); !errors.As(err, &se) {
		t.Fatalf("the list cut short: %v; want the source unreadable", err)
	}
	if c, s := requests(); len(c) != 1 || c[0] || s[0] != http.StatusOK {
		t.Fatalf("the first run asked for the list %d times (conditional %v, answered %v), want once, unconditionally", len(c), c, s)
	}
	mu.Lock()
	cut = false
	mu.Unlock()
	if rep := h.baseline(ctx, srv.URL, list); rep.Status != runreport.StatusOK || rep.Resources.Written+rep.Resources.Unchanged != 40 {
		t.Fatalf("the list whole: %s", rep.Summary())
	}
	if c, s := requests(); len(c) != 1 || c[0] || s[0] != http.StatusOK {
		t.Fatalf("after a list cut short, the run asked for it %d times (conditional %v, answered %v), want once, unconditionally: a copy cut short was kept", len(c), c, s)
	}
	if rep := h.baseline(ctx, srv.URL, list); rep.Status != runreport.StatusOK || rep.Resources.Unchanged != 40 {
		t.Fatalf("the list unchanged: %s", rep.Summary())
	}
	if c, s := requests(); len(c) != 1 || !c[0] || s[0] != http.StatusNotModified {
		t.Fatalf("after the list read whole, the run asked for it %d times (conditional %v, answered %v), want once, conditionally, answered 304: the whole copy was not kept", len(c), c, s)
	}
}

// TestContentsCopyKept: the executor keeps the copy of a package's
// listing (its manifest copy, rel="contents") it read to its end, with
// no second reading (here the protocol does not judge bodies). A
// Resource Dump harvested into two sinks, then into one of them: the
// first run reads each package's copy only to the first resource not
// held, and keeps none; the second reads each whole (every resource it
// lists is held), skips the package, and keeps the copy.
func TestContentsCopyKept(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	if _, err := bench.Generate(ctx, bench.GenOptions{Dir: src, Resources: 60, Packages: 3, Seed: 6, MeanSize: 1 << 10, NoOddNames: true}); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		copies []string // the manifest copies answered 200
	)
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			if strings.HasSuffix(r.URL.Path, ".manifest.xml") && rec.Code == http.StatusOK {
				mu.Lock()
				copies = append(copies, r.URL.Path)
				mu.Unlock()
			}
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})
	}
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: wrap})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newHarness(t)
	other, err := fs.New(filepath.Join(t.TempDir(), "other"), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Into two sinks, then into one of them: the packages were delivered
	// to another set of sinks, so each package's copy is read.
	// On the executor's word alone: the protocol does not judge bodies.
	unjudged := func(o *pipeline.Options) { o.Protocol.Whole = nil }
	if rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) { unjudged(o); o.Sinks = append(o.Sinks, other) }); rep.Status != runreport.StatusOK || rep.Resources.Written != 60 {
		t.Fatalf("into two sinks: %s", rep.Summary())
	}
	mu.Lock()
	copies = nil
	mu.Unlock()
	if rep := h.baseline(ctx, srv.URL, unjudged); rep.Status != runreport.StatusOK || rep.Resources.Written != 0 {
		t.Fatalf("into one: %s", rep.Summary())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(copies) != 3 {
		t.Fatalf("manifest copies read: %v, want the 3 packages'", copies)
	}
	for _, p := range copies {
		u := strings.TrimSuffix(srv.URL, "/") + p
		if kept, ok, err := h.store.Document(ctx, u); err != nil || !ok || kept.ETag == "" {
			t.Errorf("%s: the copy %q, %v, %v; want it kept, read whole, with its ETag", u, kept.ETag, ok, err)
		}
	}
}

// TestDocumentCopyForgotten: a document read whole that listed something
// the planner could not use (a malformed entry) is not kept, so that the
// next run reads the document itself again rather than a copy that failed.
func TestDocumentCopyForgotten(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	if _, err := bench.Generate(ctx, bench.GenOptions{Dir: src, Resources: 30, Packages: 1, Seed: 8, MeanSize: 1 << 10, NoOddNames: true, WriteResources: true}); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(src, "resourcelist.xml")
	b, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	// The first entry names two locations.
	if b = bytes.Replace(b, []byte("</loc>"), []byte("</loc><loc>http://127.0.0.1:1/x</loc>"), 1); !bytes.Contains(b, []byte("127.0.0.1:1/x")) {
		t.Fatal("no entry to break")
	}
	if err := os.WriteFile(list, b, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newHarness(t)
	rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.Settings.Options = map[string]string{"prefer": "list"} })
	if rep.Resources.Written != 29 || len(rep.Failures) != 1 {
		t.Fatalf("%s", rep.Summary())
	}
	u := srv.URL + "resourcelist.xml"
	if kept, ok, err := h.store.Document(ctx, u); err != nil || ok {
		t.Errorf("the copy of %s: %q, %v, %v; want none kept: it listed a malformed entry", u, kept.ETag, ok, err)
	}
	if kept, ok, err := h.store.Document(ctx, srv.URL+"capabilitylist.xml"); err != nil || !ok {
		t.Errorf("the capability list's copy: %q, %v, %v; want it kept", kept.ETag, ok, err)
	}
}
