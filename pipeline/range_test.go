package pipeline_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// rangeSource generates a source for the range re-sync tests and returns
// its options, the truth and the total size of its packages.
func rangeSource(t *testing.T) (bench.GenOptions, map[string][]byte, int64) {
	t.Helper()
	ctx := context.Background()
	gen := bench.GenOptions{Dir: t.TempDir(), Resources: 400, Packages: 4, Seed: 11, MeanSize: 48 << 10}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	want := truthAfter(t, gen, 0)
	var pkgBytes int64
	err := filepath.Walk(gen.Dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".zip") {
			pkgBytes += fi.Size()
		}
		return err
	})
	if err != nil || pkgBytes == 0 {
		t.Fatalf("packages: %d bytes, %v", pkgBytes, err)
	}
	return gen, want, pkgBytes
}

// staleRecords makes the state records of every 100th resource look
// changed (another md5) and returns their URIs.
func staleRecords(t *testing.T, h *harness, want map[string][]byte) []string {
	t.Helper()
	ctx := context.Background()
	uris := make([]string, 0, len(want))
	for u := range want {
		uris = append(uris, u)
	}
	slices.Sort(uris)
	var stale []string
	var recs []state.Resource
	for i := 0; i < len(uris); i += 100 {
		rec, ok, err := recordOf(ctx, h.store, uris[i])
		if err != nil || !ok || len(rec.Hashes.MD5) == 0 {
			t.Fatalf("%s: record %v %v %v", uris[i], ok, err, rec.Hashes)
		}
		rec.Hashes.MD5 = bytes.Repeat([]byte{0xAB}, len(rec.Hashes.MD5))
		recs = append(recs, rec)
		stale = append(stale, uris[i])
	}
	if err := h.store.PutResources(ctx, recs); err != nil {
		t.Fatal(err)
	}
	return stale
}

// checkResync runs the second baseline after staleRecords and checks that
// exactly the stale resources were rewritten, verified, and are correct.
func checkResync(t *testing.T, h *harness, url string, want map[string][]byte, stale []string) *runreport.Report {
	t.Helper()
	ctx := context.Background()
	mirror := filepath.Join(h.dir, "mirror")
	before := mtimes(t, mirror)
	rep := h.baseline(ctx, url, nil)
	if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(len(stale)) ||
		rep.Resources.Unchanged != int64(len(want)-len(stale)) || rep.Resources.Failed != 0 || rep.Packages.Done != 4 {
		t.Fatalf("re-sync: %s", rep.Summary())
	}
	rewritten := 0
	for p, m := range before {
		fi, err := os.Stat(p)
		if err != nil || !fi.ModTime().Equal(m) {
			rewritten++
		}
	}
	if rewritten != len(stale) {
		t.Errorf("%d files rewritten, want %d", rewritten, len(stale))
	}
	got := h.held(ctx)
	for uri, b := range want {
		if !bytes.Equal(got[uri], b) {
			t.Fatalf("%s: body differs", uri)
		}
	}
	for _, u := range stale {
		rec, _, err := recordOf(ctx, h.store, u)
		if err != nil || !bytes.Equal(rec.Hashes.MD5, sums(want[u]).MD5) || rec.Outcome != state.OutcomeWritten {
			t.Errorf("%s: record after re-sync %+v (%v)", u, rec, err)
		}
	}
	return rep
}

// TestRangeResync: a re-sync in which 1 % of the resources changed reads
// only those entries (plus manifests and central directories) by Range.
func TestRangeResync(t *testing.T) {
	gen, want, pkgBytes := rangeSource(t)
	srv := serve(t, gen.Dir)
	h := newHarness(t)
	rep := h.baseline(context.Background(), srv.URL, nil)
	if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(len(want)) || rep.Bytes.Downloaded != pkgBytes {
		t.Fatalf("first run: %s (downloaded %d of %d package bytes)", rep.Summary(), rep.Bytes.Downloaded, pkgBytes)
	}
	stale := staleRecords(t, h, want)
	sent := srv.Handler.Stats().BytesSent
	rep = checkResync(t, h, srv.URL, want, stale)
	served := srv.Handler.Stats().BytesSent - sent
	ratio := float64(rep.Bytes.Downloaded) / float64(pkgBytes)
	t.Logf("re-sync of %d/%d changed resources: %d of %d package bytes downloaded (%.2f %%), server sent %d bytes (%.2f %%, documents included), %d requests",
		len(stale), len(want), rep.Bytes.Downloaded, pkgBytes, 100*ratio, served, 100*float64(served)/float64(pkgBytes), rep.Fetch.Requests)
	if ratio > 0.05 || rep.Bytes.Downloaded == 0 {
		t.Errorf("downloaded %.2f %% of the package bytes, want < 5 %%", 100*ratio)
	}
	if served > pkgBytes/10 {
		t.Errorf("server sent %d bytes for %d package bytes", served, pkgBytes)
	}
}

// TestRangeResyncIgnored: a server that ignores Range gets whole
// downloads, with the same result; so does DisableRangeResync.
func TestRangeResyncIgnored(t *testing.T) {
	gen, want, pkgBytes := rangeSource(t)
	// wholePackages re-syncs through a server wrapped by wrap and checks
	// that the packages holding a stale resource were downloaded whole
	// (those whose manifest copy shows every resource held are skipped).
	wholePackages := func(t *testing.T, wrap func(http.Handler) http.Handler) {
		srv, err := bench.Serve(context.Background(), gen.Dir, "127.0.0.1:0", bench.ServeOptions{Wrap: wrap})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		h := newHarness(t)
		h.baseline(context.Background(), srv.URL, nil)
		stale := staleRecords(t, h, want)
		rep := checkResync(t, h, srv.URL, want, stale)
		if rep.Bytes.Downloaded < pkgBytes/2 {
			t.Errorf("downloaded %d bytes of %d: not whole packages", rep.Bytes.Downloaded, pkgBytes)
		}
	}
	t.Run("range ignored", func(t *testing.T) {
		wholePackages(t, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Header.Del("Range")
				r.Header.Del("If-Range")
				next.ServeHTTP(w, r)
			})
		})
	})
	t.Run("probe only", func(t *testing.T) {
		// Honours the probe's Range, ignores every other: opening by
		// Range fails and the packages are downloaded.
		wholePackages(t, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Range") != "bytes=0-0" {
					r.Header.Del("Range")
				}
				next.ServeHTTP(w, r)
			})
		})
	})

	t.Run("disabled", func(t *testing.T) {
		srv := serve(t, gen.Dir)
		h := newHarness(t)
		h.baseline(context.Background(), srv.URL, nil)
		stale := staleRecords(t, h, want)
		mirror := filepath.Join(h.dir, "mirror")
		mtimes(t, mirror)
		rep := h.baseline(context.Background(), srv.URL, func(o *pipeline.Options) { o.DisableRangeResync = true })
		if rep.Resources.Written != int64(len(stale)) || rep.Bytes.Downloaded < pkgBytes/2 {
			t.Errorf("disabled: %s, downloaded %d of %d", rep.Summary(), rep.Bytes.Downloaded, pkgBytes)
		}
	})
}

// TestFirstSyncNeverRanged: a first sync downloads every package whole,
// so each package's hash is checked, even once its first outcomes are
// committed: packages answer slowly, so later ones start after the commit
// stage has recorded earlier ones.
func TestFirstSyncNeverRanged(t *testing.T) {
	ctx := context.Background()
	gen := bench.GenOptions{Dir: t.TempDir(), Resources: 48, Packages: 6, Seed: 3, MeanSize: 2 << 10}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ranged := 0
	srv, err := bench.Serve(ctx, gen.Dir, "127.0.0.1:0", bench.ServeOptions{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, ".zip") {
				if r.Header.Get("Range") != "" {
					mu.Lock()
					ranged++
					mu.Unlock()
				}
				time.Sleep(700 * time.Millisecond)
			}
			next.ServeHTTP(w, r)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := newHarness(t)
	rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.Concurrency = 1 })
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 48 {
		t.Fatalf("first sync: %s", rep.Summary())
	}
	if ranged != 0 {
		t.Errorf("%d Range requests during a first sync", ranged)
	}
}
