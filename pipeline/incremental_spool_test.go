package pipeline_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// TestIncrementalSpoolBounded: an incremental run over a Change Dump whose
// packages link no manifest copy (rel="contents") must download each
// package to read its manifest; the spool directory nevertheless holds at
// most Concurrency+1 packages at any time, however many the range
// spans, and every change is applied.
func TestIncrementalSpoolBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bodySize int
		// ranged: packages are large enough to be read again by Range
		// (their winners only) rather than downloaded again.
		ranged bool
	}{
		{"small packages downloaded again", 40 << 10, false},
		{"large packages read again by Range", 640 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testIncrementalSpoolBounded(t, tc.bodySize, tc.ranged) })
	}
}

func testIncrementalSpoolBounded(t *testing.T, bodySize int, ranged bool) {
	const (
		packages    = 10
		perPackage  = 3
		concurrency = 2
	)
	rnd := rand.New(rand.NewPCG(7, 7))
	body := func() string {
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, bodySize)
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	day := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)
	var pkgs []pkgSpec
	want := map[string]string{}
	for i := range packages {
		from, until := day.AddDate(0, 0, i), day.AddDate(0, 0, i+1)
		p := pkgSpec{from: manifest.FormatDatetime(from), until: manifest.FormatDatetime(until)}
		for k := range perPackage {
			// Every third resource is updated again in the next package:
			// its first version loses.
			uri := res(1000 + i*perPackage + k)
			if k == 0 && i > 0 {
				uri = res(1000 + (i-1)*perPackage + 1)
			}
			b := body()
			kind := manifest.Created
			if _, ok := want[uri]; ok {
				kind = manifest.Updated
			}
			p.changes = append(p.changes, change{uri: uri, kind: kind, at: manifest.FormatDatetime(from.Add(time.Duration(k+1) * time.Hour)), body: b})
			want[uri] = b
		}
		pkgs = append(pkgs, p)
	}
	src := t.TempDir()
	writeChangeDump(t, src, pkgs, false)
	var biggest, total int64
	for i := range packages {
		fi, err := os.Stat(filepath.Join(src, "changes", fmt.Sprintf("c%d.zip", i)))
		if err != nil {
			t.Fatal(err)
		}
		biggest = max(biggest, fi.Size())
		total += fi.Size()
	}

	// Packages are served a little slowly, so that downloads overlap.
	srv, err := bench.Serve(context.Background(), src, "127.0.0.1:0", bench.ServeOptions{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, ".zip") {
				time.Sleep(5 * time.Millisecond)
			}
			next.ServeHTTP(w, r)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	h := newHarness(t)
	opts := h.options(srv.URL + "changedump.xml")
	opts.Concurrency = concurrency
	spool := opts.SpoolDir

	// Sample the packages on the spool disk while the run goes on.
	var peakBytes, peakFiles atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			var n, files int64
			// The run spools under a directory of its own in SpoolDir.
			filepath.WalkDir(spool, func(path string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() || !strings.HasPrefix(e.Name(), "rsharvest-pkg-") {
					return nil
				}
				if fi, err := e.Info(); err == nil {
					n += fi.Size()
					files++
				}
				return nil
			})
			if n > peakBytes.Load() {
				peakBytes.Store(n)
			}
			if files > peakFiles.Load() {
				peakFiles.Store(files)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	})
	rep, err := pipeline.Incremental(context.Background(), opts, pipeline.Range{From: day, Until: day.AddDate(0, 0, packages+1)})
	close(stop)
	sampler.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(len(want)) {
		t.Fatalf("want %d written: %s", len(want), rep.Summary())
	}
	for uri, b := range want {
		got, err := os.ReadFile(h.sink.Path(uri))
		if err != nil || string(got) != b {
			t.Errorf("%s: %d bytes, %v; want the newest version (%d bytes)", uri, len(got), err, len(b))
		}
	}
	limit := int64(concurrency+1) * biggest
	// Packages removed after planning are read again (their winners, by
	// Range here): the price of the bound, in bytes.
	t.Logf("downloaded %d bytes for %d bytes of packages", rep.Bytes.Downloaded, total)
	t.Logf("spool peak: %d bytes in %d package files (limit %d bytes: %d packages of at most %d bytes; %d packages in range)",
		peakBytes.Load(), peakFiles.Load(), limit, concurrency+1, biggest, packages)
	if peakBytes.Load() > limit || peakFiles.Load() > concurrency+1 {
		t.Errorf("the spool held %d bytes in %d package files; want at most %d packages (%d bytes)",
			peakBytes.Load(), peakFiles.Load(), concurrency+1, limit)
	}
	// A package downloaded again costs one more request; read again by
	// Range (a probe, then its directory and winners), several.
	var rangedPkgs int
	for i := range packages {
		if srv.Handler.Requests(fmt.Sprintf("/changes/c%d.zip", i)) > 2 {
			rangedPkgs++
		}
	}
	if ranged != (rangedPkgs > 0) {
		t.Errorf("%d packages read again by Range; want some: %v", rangedPkgs, ranged)
	}
	if peakFiles.Load() == 0 {
		t.Error("the sampler never saw a package on the spool: the measurement measured nothing")
	}
}
