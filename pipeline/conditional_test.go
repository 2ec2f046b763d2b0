package pipeline_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/runreport"
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
