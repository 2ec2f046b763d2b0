package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveChanges generates a Source with a Change Dump and serves it.
func serveChanges(t *testing.T, opts GenOptions, sopts ServeOptions) *Server {
	t.Helper()
	opts.Dir = t.TempDir()
	if _, err := Generate(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	sopts.CacheDir = t.TempDir()
	s, err := Serve(t.Context(), opts.Dir, "", sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// servedDump is a Change Dump as a Destination sees it over HTTP.
type servedDump struct {
	root     xDoc
	etag     string
	docs     []string // documents of the index, as listed
	packages []xURL   // package entries, in order
}

func fetchChangeDump(t *testing.T, s *Server) servedDump {
	t.Helper()
	resp, body := get(t, s.URL+"changedump.xml", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("changedump.xml: status %d", resp.StatusCode)
	}
	d := servedDump{root: parseDoc(t, body), etag: resp.Header.Get("ETag")}
	d.packages = d.root.URLs
	for _, sm := range d.root.Sitemaps {
		d.docs = append(d.docs, sm.Loc)
		resp, body := get(t, sm.Loc, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", sm.Loc, resp.StatusCode)
		}
		sub := parseDoc(t, body)
		if sub.MD.Until != sm.MD.Until || sub.MD.From != sm.MD.From {
			t.Errorf("%s: [%s, %s], index says [%s, %s]", sm.Loc, sub.MD.From, sub.MD.Until, sm.MD.From, sm.MD.Until)
		}
		if n := len(sub.URLs); n > 0 && sub.URLs[n-1].MD.Until != sub.MD.Until && sub.MD.Until != "" {
			t.Errorf("%s: until %s, last package until %s", sm.Loc, sub.MD.Until, sub.URLs[n-1].MD.Until)
		}
		d.packages = append(d.packages, sub.URLs...)
	}
	return d
}

func TestServePublish(t *testing.T) {
	tests := []struct {
		name   string
		opts   GenOptions
		docsOf func(k int) int // documents listed at step k (index only)
	}{
		{"dump, open", GenOptions{Resources: 30, ChangePackages: 3, ChangesPerPackage: 4, MeanSize: 500, Seed: 2}, nil},
		{"index, closed", GenOptions{Resources: 30, ChangePackages: 5, ChangesPerPackage: 4, MeanSize: 500, Seed: 2,
			IndexThreshold: 2, ClosedLast: true}, func(k int) int { return (k + 1) / 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := serveChanges(t, tt.opts, ServeOptions{})
			total := tt.opts.ChangePackages
			final := fetchChangeDump(t, s)
			if len(final.packages) != total {
				t.Fatalf("%d packages listed before Publish, want %d", len(final.packages), total)
			}
			etags := map[string]int{final.etag: total}
			for _, k := range []int{0, 1, 2, total - 1, total, total + 3, -1} {
				s.Handler.Publish(k)
				want := k
				if k < 0 || k > total {
					want = total
				}
				d := fetchChangeDump(t, s)
				if len(d.packages) != want {
					t.Fatalf("Publish(%d): %d packages listed, want %d", k, len(d.packages), want)
				}
				for i, pu := range d.packages {
					if fmt.Sprint(pu) != fmt.Sprint(final.packages[i]) {
						t.Errorf("Publish(%d): package %d listed as %+v, finally %+v", k, i+1, pu, final.packages[i])
					}
				}
				if wantUntil := final.root.MD.Until; want < total && d.root.MD.Until != "" || want == total && d.root.MD.Until != wantUntil {
					t.Errorf("Publish(%d): root until %q", k, d.root.MD.Until)
				}
				if tt.docsOf != nil && want < total && len(d.docs) != tt.docsOf(want) {
					t.Errorf("Publish(%d): %d documents listed, want %d", k, len(d.docs), tt.docsOf(want))
				}
				if prev, ok := etags[d.etag]; ok && prev != want {
					t.Errorf("Publish(%d): ETag %s also served at step %d", k, d.etag, prev)
				}
				etags[d.etag] = want
				for j := 1; j <= total; j++ {
					for _, ext := range []string{".zip", ".manifest.xml"} {
						resp, _ := get(t, fmt.Sprintf("%schanges/change-%05d%s", s.URL, j, ext), nil)
						if got, published := resp.StatusCode, j <= want; (got == http.StatusOK) != published || (!published && got != http.StatusNotFound) {
							t.Errorf("Publish(%d): package %d%s status %d", k, j, ext, got)
						}
					}
				}
				for _, doc := range final.docs {
					resp, _ := get(t, doc, nil)
					listed := false
					for _, l := range d.docs {
						listed = listed || l == doc
					}
					if (resp.StatusCode == http.StatusOK) != listed {
						t.Errorf("Publish(%d): %s status %d, listed %v", k, doc, resp.StatusCode, listed)
					}
				}
			}
			for _, p := range []string{".steps/steps.json", ".steps/1/changedump.xml", ".steps", ".steps/"} {
				if resp, _ := get(t, s.URL+p, nil); resp.StatusCode != http.StatusNotFound {
					t.Errorf("%s: status %d, want 404", p, resp.StatusCode)
				}
			}
		})
	}
}

func TestServePublishRangeAndInitial(t *testing.T) {
	opts := GenOptions{Resources: 30, ChangePackages: 4, ChangesPerPackage: 3, MeanSize: 500, Seed: 5, IndexThreshold: 3}
	s := serveChanges(t, opts, ServeOptions{Publish: 2})
	d := fetchChangeDump(t, s)
	if len(d.packages) != 2 {
		t.Fatalf("ServeOptions.Publish 2: %d packages listed", len(d.packages))
	}
	doc := "changedump-0001.xml"
	resp, full := get(t, s.URL+doc, nil)
	tag := resp.Header.Get("ETag")
	if lm := resp.Header.Get("Last-Modified"); lm != "" {
		t.Errorf("step document with Last-Modified %s", lm)
	}
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if resp, _ := get(t, s.URL+"changedump.xml", map[string]string{"If-Modified-Since": future}); resp.StatusCode != http.StatusOK {
		t.Errorf("If-Modified-Since on a step document: status %d", resp.StatusCode)
	}
	if resp, _ := get(t, s.URL+"changes/change-00001.zip", nil); resp.Header.Get("Last-Modified") == "" {
		t.Error("published package without Last-Modified")
	}
	if bytes.Contains(full, []byte("PORTX")) {
		t.Error("step document not rewritten")
	}
	resp, part := get(t, s.URL+doc, map[string]string{"Range": "bytes=10-", "If-Range": tag})
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, full[10:]) {
		t.Errorf("range at step 2: status %d, %d bytes of %d", resp.StatusCode, len(part), len(full)-10)
	}
	s.Handler.Publish(3)
	resp, body := get(t, s.URL+doc, map[string]string{"Range": "bytes=10-", "If-Range": tag})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == tag || bytes.Equal(body, full) {
		t.Errorf("stale If-Range after Publish: status %d, ETag %s (was %s)", resp.StatusCode, resp.Header.Get("ETag"), tag)
	}
	// Package 3 is the last of the first document and closed: the document
	// is complete, the same as when everything is published.
	_, step3 := get(t, s.URL+doc, nil)
	s.Handler.Publish(-1)
	_, all := get(t, s.URL+doc, nil)
	if !bytes.Equal(step3, all) {
		t.Error("a complete document differs between step 3 and everything published")
	}
}

// TestServePublishConcurrent calls Publish while requests are served; every
// answer must be a whole Change Dump of some step.
func TestServePublishConcurrent(t *testing.T) {
	opts := GenOptions{Resources: 20, ChangePackages: 6, ChangesPerPackage: 2, MeanSize: 300, Seed: 8, IndexThreshold: 2}
	s := serveChanges(t, opts, ServeOptions{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 15 {
				for _, p := range []string{"changedump.xml", "changedump-0002.xml", "changes/change-00004.zip"} {
					resp, body := get(t, s.URL+p, nil)
					switch {
					case resp.StatusCode == http.StatusNotFound && p != "changedump.xml":
					case resp.StatusCode != http.StatusOK:
						t.Errorf("%s: status %d", p, resp.StatusCode)
					case strings.HasSuffix(p, ".xml") && !bytes.HasSuffix(body, []byte("</sitemapindex>\n")) && !bytes.HasSuffix(body, []byte("</urlset>\n")):
						t.Errorf("%s: truncated document", p)
					}
				}
			}
		})
	}
	for i := range 60 {
		s.Handler.Publish(i%(opts.ChangePackages+2) - 1)
	}
	wg.Wait()
}
