package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/resourcesync"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/testdata/hostile"
	"github.com/rsharvest/rsharvest/unzip"
)

// harness is one destination: an fs sink and a state store in a temp dir.
type harness struct {
	t     *testing.T
	dir   string
	sink  *fs.FS
	store *state.Store
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	s, err := fs.New(filepath.Join(dir, "mirror"), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &harness{t: t, dir: dir, sink: s, store: st}
}

// options returns the harness's pipeline options for a source.
func (h *harness) options(source string) pipeline.Options {
	return pipeline.Options{
		Source:      source,
		Protocol:    resourcesync.Protocol(),
		Sinks:       []sink.Sink{h.sink},
		Store:       h.store,
		Client:      fetch.New(fetch.Options{Retries: 2, BackoffInitial: time.Millisecond, BackoffMax: 10 * time.Millisecond, StallTimeout: 5 * time.Second}),
		Concurrency: 3,
		Workers:     3,
		SpoolDir:    h.t.TempDir(),
		Logger:      slog.New(slog.DiscardHandler),
	}
}

func sinkResource(uri, body string) *sink.Resource {
	return &sink.Resource{URI: uri, Length: int64(len(body)), Hashes: sums([]byte(body))}
}

func (h *harness) baseline(ctx context.Context, source string, mod func(*pipeline.Options)) *runreport.Report {
	h.t.Helper()
	opts := h.options(source)
	if mod != nil {
		mod(&opts)
	}
	rep, err := pipeline.Baseline(ctx, opts)
	if err != nil {
		h.t.Fatalf("baseline: %v", err)
	}
	return rep
}

// held returns every URI the sink holds with its body.
func (h *harness) held(ctx context.Context) map[string][]byte {
	h.t.Helper()
	return sinkBodies(ctx, h.t, h.sink)
}

// truthAfter returns what the generated source holds after Change Dump
// package k: URI → body.
func truthAfter(t *testing.T, gen bench.GenOptions, k int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	if err := bench.TruthAfter(t.Context(), gen, k, func(uri string, body io.Reader) error {
		b, err := io.ReadAll(body)
		want[uri] = b
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return want
}

// sinkBodies reads everything a sink holds through its Inventory: URI → body.
func sinkBodies(ctx context.Context, t *testing.T, inv sink.Inventory) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := inv.Walk(ctx, func(uri string) error {
		rc, err := inv.Get(ctx, uri)
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		out[uri] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func serve(t *testing.T, dir string) *bench.Server {
	t.Helper()
	srv, err := bench.Serve(context.Background(), dir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func TestBaselineEndToEnd(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 700, Packages: 7, Seed: 7, MeanSize: 4 << 10, IndexThreshold: 3}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, src)
	want := truthAfter(t, gen, 0)

	h := newHarness(t)
	rep := h.baseline(ctx, srv.URL, nil)
	if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(len(want)) || rep.Packages.Done != 7 || rep.Packages.Total != 7 {
		t.Fatalf("first run: %s", rep.Summary())
	}
	if rep.At == nil || !rep.At.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("report at = %v", rep.At)
	}
	got := h.held(ctx)
	if len(got) != len(want) {
		t.Fatalf("sink holds %d resources, want %d", len(got), len(want))
	}
	for uri, b := range want {
		if !bytes.Equal(got[uri], b) {
			t.Fatalf("%s: body differs (%d vs %d bytes)", uri, len(got[uri]), len(b))
		}
	}
	n, err := h.store.CountResources(ctx, "", false)
	if err != nil || n != int64(len(want)) {
		t.Fatalf("state holds %d resources (%v)", n, err)
	}

	// A repeated baseline rewrites nothing and reports everything unchanged.
	before := mtimes(t, filepath.Join(h.dir, "mirror"))
	rep2 := h.baseline(ctx, srv.URL+".well-known/resourcesync", nil)
	if rep2.Status != runreport.StatusOK || rep2.Resources.Written != 0 || rep2.Resources.Skipped != 0 || rep2.Resources.Unchanged != int64(len(want)) {
		t.Fatalf("second run: %s", rep2.Summary())
	}
	if rep2.Bytes.Downloaded != 0 {
		t.Errorf("second run downloaded %d bytes: the manifest copies show every package held", rep2.Bytes.Downloaded)
	}
	after := mtimes(t, filepath.Join(h.dir, "mirror"))
	for p, m := range before {
		if !after[p].Equal(m) {
			t.Fatalf("%s was rewritten", p)
		}
	}
}

func mtimes(t *testing.T, root string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fi.ModTime()
		// Make a rewrite visible even within the filesystem's time granularity.
		return os.Chtimes(p, time.Unix(1, 0), time.Unix(1, 0))
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range out {
		out[p] = time.Unix(1, 0)
	}
	return out
}

// TestBaselineStartingPoints starts from each kind of document.
func TestBaselineStartingPoints(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 120, Packages: 4, Seed: 3, MeanSize: 1 << 10, IndexThreshold: 2}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, src)
	for _, start := range []string{"", ".well-known/resourcesync", "capabilitylist.xml", "resourcedump.xml", "resourcedump-0002.xml"} {
		t.Run("from /"+start, func(t *testing.T) {
			h := newHarness(t)
			rep := h.baseline(ctx, srv.URL+start, nil)
			want := int64(120)
			if start == "resourcedump-0002.xml" {
				want = 60 // one of the two dumps the index lists
			}
			if rep.Status != runreport.StatusOK || rep.Resources.Written != want {
				t.Fatalf("%s", rep.Summary())
			}
		})
	}
}

func TestBaselineSourceErrors(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "page.html"), []byte("<html><body>not resourcesync</body></html>"), 0o644)
	os.WriteFile(filepath.Join(src, "sitemap.xml"), []byte(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://example.org/</loc></url></urlset>`), 0o644)
	os.WriteFile(filepath.Join(src, "truncated.xml"), []byte(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="resourcedump"/><url><loc>http://127.0.0.1:PORTX/x.zip`), 0o644)
	srv := serve(t, src)
	for _, doc := range []string{"missing.xml", "page.html", "sitemap.xml", "truncated.xml"} {
		t.Run(doc, func(t *testing.T) {
			h := newHarness(t)
			_, err := pipeline.Baseline(ctx, pipeline.Options{Source: srv.URL + doc, Protocol: resourcesync.Protocol(), Sinks: []sink.Sink{h.sink}, Store: h.store,
				Client: fetch.New(fetch.Options{Retries: 1, BackoffInitial: time.Millisecond})})
			var se *pipeline.SourceError
			if doc == "truncated.xml" {
				// The dump's header was read; its broken body fails the run's discovery too.
				if !errors.As(err, &se) {
					t.Fatalf("err = %v, want a SourceError", err)
				}
				return
			}
			if !errors.As(err, &se) || !strings.Contains(err.Error(), doc) {
				t.Fatalf("err = %v, want a SourceError naming %s", err, doc)
			}
		})
	}
}

// TestBaselineHostile runs one package per item of the hostile-input
// checklist: each item fails alone with a clear error naming it, nothing
// is written outside the sink, nothing unverified is in the sink, and
// everything else is delivered.
func TestBaselineHostile(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	hs, err := hostile.Build(src)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, src)
	h := newHarness(t)
	dump := strings.Replace(hs.Dump, hostile.Base, srv.URL, 1)
	rep := h.baseline(ctx, dump, func(o *pipeline.Options) {
		o.Limits = unzip.Limits{MaxEntries: hostile.MaxEntries, MaxRatio: hostile.MaxRatio}
	})
	if rep.Status != runreport.StatusPartial {
		t.Fatalf("status %s, want partial:\n%s", rep.Status, rep.Summary())
	}
	checkHostile(t, hs, srv.URL, rep, h.held(ctx), nil)
	checkCommitted(t, ctx, h.store, rep)
	// Nothing outside the sink: the harness dir holds only the mirror and the state.
	entries, _ := os.ReadDir(h.dir)
	for _, e := range entries {
		if e.Name() != "mirror" && !strings.HasPrefix(e.Name(), "state.db") {
			t.Errorf("unexpected %s next to the sink", e.Name())
		}
	}
	// The failures are in the state store too.
	fs, _, err := h.store.Failures(ctx, rep.RunID, 1000)
	if err != nil || len(fs) < len(rep.Failures) {
		t.Errorf("state has %d failures (%v), report %d", len(fs), err, len(rep.Failures))
	}
}

// TestBaselineInterop syncs the source written by the resync reference
// library (../shared/interop): manifest first, paths without a leading
// slash, raw spaces and non-ASCII in URIs, microsecond lastmods.
func TestBaselineInterop(t *testing.T) {
	orig := filepath.Join("..", "..", "shared", "interop", "resync-2.0.1")
	if _, err := os.Stat(orig); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("shared interop sample missing: %v", err)
		}
		t.Skip("../shared/interop not present")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(orig)); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, dir)
	h := newHarness(t)
	rep := h.baseline(context.Background(), srv.URL, nil)
	if rep.Status != runreport.StatusOK || rep.Resources.Written < 100 {
		t.Fatalf("%s", rep.Summary())
	}
	got := h.held(context.Background())
	want, err := os.ReadFile(filepath.Join(orig, "resources", "sub dir", "café über.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := got["http://127.0.0.1:PORTX/resources/sub dir/café über.txt"]; !ok || !bytes.Equal(b, want) {
		t.Errorf("non-ASCII resource not delivered intact")
	}
}

// sinkFixture generates and serves a small source and returns its URIs and
// a fresh destination.
func sinkFixture(t *testing.T, resources int, seed int64) (*bench.Server, []string, *harness) {
	t.Helper()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: resources, Packages: 2, Seed: seed, MeanSize: 1 << 10}
	if _, err := bench.Generate(context.Background(), gen); err != nil {
		t.Fatal(err)
	}
	var uris []string
	bench.Truth(context.Background(), gen, func(uri string, _ io.Reader) error { uris = append(uris, uri); return nil })
	return serve(t, src), uris, newHarness(t)
}

// flaky opens a flakySink over an fs sink in the harness dir.
func (h *harness) flaky(name string) *flakySink {
	s, err := fs.New(filepath.Join(h.dir, name), fs.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	return &flakySink{FS: s, fail: map[string]bool{}, puts: map[string]int{}}
}

// flakySink fails Put for the URIs in fail, and counts Puts per URI.
type flakySink struct {
	*fs.FS
	mu   sync.Mutex
	fail map[string]bool
	puts map[string]int
}

func (f *flakySink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	f.mu.Lock()
	f.puts[r.URI]++
	bad := f.fail[r.URI]
	f.mu.Unlock()
	if bad {
		io.Copy(io.Discard, body)
		return errors.New("flaky sink: connection reset")
	}
	return f.FS.Put(ctx, r, body)
}

// TestSeveralSinks: each resource goes to every sink; a failure in one sink
// is recorded for that sink, holds the checkpoint, and the next run
// delivers to that sink only.
func TestSeveralSinks(t *testing.T) {
	ctx := context.Background()
	srv, uris, h := sinkFixture(t, 60, 11)
	victim := uris[7]
	mk := h.flaky
	a, b := mk("a"), mk("b")
	b.fail[victim] = true
	run := func() *runreport.Report {
		opts := h.options(srv.URL)
		opts.Sinks = []sink.Sink{a, b}
		opts.SinkNames = []string{"fs:a", "fs:b"}
		opts.SinkBackoff = time.Millisecond
		rep, err := pipeline.Baseline(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := run()
	if rep.Status != runreport.StatusPartial || rep.Resources.Failed != 1 || rep.Resources.Written != int64(len(uris)-1) {
		t.Fatalf("%s", rep.Summary())
	}
	if f := rep.Failures[0]; f.URI != victim || !strings.Contains(f.Error, "sink fs:b") || f.Permanent {
		t.Fatalf("failure %+v", f)
	}
	if cp, ok, _ := h.store.Checkpoint(ctx, srv.URL, srv.URL+"capabilitylist.xml"); ok {
		t.Fatalf("a temporary sink failure must hold the checkpoint, got %+v", cp)
	}
	b.fail[victim] = false
	rep = run()
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 1 || rep.Resources.Unchanged != int64(len(uris)-1) {
		t.Fatalf("second run: %s", rep.Summary())
	}
	if a.puts[victim] != 1 || b.puts[victim] != 5 {
		t.Fatalf("puts of the victim: a=%d b=%d; want a=1 (not re-delivered) b=5 (4 tries, then one)", a.puts[victim], b.puts[victim])
	}
	if ds, _ := deliveriesOf(ctx, h.store, victim); len(ds) != 0 {
		t.Fatalf("deliveries left after every sink took it: %+v", ds)
	}
	if _, ok, _ := h.store.Checkpoint(ctx, srv.URL, srv.URL+"capabilitylist.xml"); !ok {
		t.Fatal("checkpoint not set once every sink took everything")
	}
}

// batchingSink queues writes (Put returns nil) and reports at Flush that
// the writes of the URIs in fail did not apply (like a bulk API rejecting
// some items).
type batchingSink struct {
	*flakySink
	failed []sink.Failed
}

func (b *batchingSink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	b.mu.Lock()
	bad := b.fail[r.URI]
	b.puts[r.URI]++
	b.mu.Unlock()
	if bad {
		io.Copy(io.Discard, body)
		b.mu.Lock()
		b.failed = append(b.failed, sink.Failed{URI: r.URI, Err: errclass.Retryablef("bulk item: 503")})
		b.mu.Unlock()
		return nil // queued; the failure shows at Flush
	}
	return b.FS.Put(ctx, r, body)
}

func (b *batchingSink) Flush(context.Context) []sink.Failed {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.failed
	b.failed = nil
	return out
}

// TestBatchingSinkFailures: a write a batching sink accepted but failed to
// apply is never recorded as synced: it is a failure, holds the checkpoint,
// and the next run delivers it to that sink only.
func TestBatchingSinkFailures(t *testing.T) {
	ctx := context.Background()
	srv, uris, h := sinkFixture(t, 40, 12)
	victim := uris[5]
	mk := h.flaky
	a := mk("a")
	b := &batchingSink{flakySink: mk("b")}
	b.fail[victim] = true
	run := func() *runreport.Report {
		opts := h.options(srv.URL)
		opts.Sinks = []sink.Sink{a, b}
		opts.SinkNames = []string{"fs:a", "bulk:b"}
		rep, err := pipeline.Baseline(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := run()
	if rep.Status != runreport.StatusPartial || rep.Resources.Failed != 1 || rep.Resources.Written != int64(len(uris)-1) {
		t.Fatalf("%s", rep.Summary())
	}
	if rec, ok, _ := recordOf(ctx, h.store, victim); ok && rec.Outcome == "written" {
		t.Fatal("a write the batching sink failed is recorded as synced")
	}
	checkCommitted(t, ctx, h.store, rep)
	b.fail[victim] = false
	rep = run()
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 1 {
		t.Fatalf("second run: %s", rep.Summary())
	}
	if a.puts[victim] != 1 || b.puts[victim] != 2 {
		t.Fatalf("puts a=%d b=%d, want 1 and 2", a.puts[victim], b.puts[victim])
	}
}

// checkHostile checks, case by case, how a run of the hostile source ended:
// each item fails with an error naming it (the package, or the bad
// resources, which the sink does not hold), every good resource is
// delivered intact, every unreferenced entry is reported, and the sink holds
// exactly the good resources. kept, when set, tells whether the sink may
// hold a resource all the same that failed, or whose package failed: it was
// delivered as it arrived, each entry verified against its manifest entry,
// before its package's central directory refused it or its download failed
// (see TestStreamingHostile).
func checkHostile(t *testing.T, hs *hostile.Source, base string, rep *runreport.Report, got map[string][]byte, kept func(uri string) bool) {
	t.Helper()
	failures := map[string]runreport.Failure{}
	for _, f := range rep.Failures {
		failures[f.URI] = f
	}
	wantHeld := 0
	for _, c := range hs.Cases {
		t.Run(c.Name, func(t *testing.T) {
			pkgURL := strings.Replace(c.Package, hostile.Base, base, 1)
			if c.PackageError != "" {
				f, ok := failures[pkgURL]
				if !ok {
					t.Fatalf("no failure recorded for package %s", pkgURL)
				}
				if !strings.Contains(strings.ToLower(f.Error), strings.ToLower(c.PackageError)) || !f.Permanent {
					t.Errorf("package failure %q (permanent=%v), want it to mention %q", f.Error, f.Permanent, c.PackageError)
				}
			} else if f, ok := failures[pkgURL]; ok {
				t.Errorf("package failed: %s", f.Error)
			}
			for uri, reason := range c.Failed {
				f, ok := failures[uri]
				if !ok {
					t.Errorf("no failure recorded for %s", uri)
					continue
				}
				if f.Package != pkgURL || !strings.Contains(strings.ToLower(f.Error), strings.ToLower(reason)) {
					t.Errorf("%s: failure %q in package %q, want %q in %s", uri, f.Error, f.Package, reason, pkgURL)
				}
				if _, held := got[uri]; held && (kept == nil || !kept(uri)) {
					t.Errorf("%s: failed but the sink holds it", uri)
				}
			}
			for uri, body := range c.Good {
				if !bytes.Equal(got[uri], body) {
					t.Errorf("%s: not delivered intact", uri)
				}
			}
			for _, name := range c.Unreferenced {
				found := false
				for _, s := range rep.Skips {
					found = found || (s.Package == pkgURL && s.Entry == name)
				}
				if !found {
					t.Errorf("unreferenced entry %s not reported (skips: %v)", name, rep.Skips)
				}
			}
		})
		wantHeld += len(c.Good)
	}
	extra := 0 // held, not good, and not kept
	for uri := range got {
		if kept != nil && kept(uri) {
			wantHeld++
		} else if !isGood(hs, uri) {
			extra++
		}
	}
	if len(got) != wantHeld || extra > 0 {
		t.Errorf("sink holds %d resources, want exactly the %d good (or kept) ones", len(got), wantHeld)
	}
}

// isGood reports whether uri is a good resource of one of hs's cases.
func isGood(hs *hostile.Source, uri string) bool {
	for _, c := range hs.Cases {
		if _, ok := c.Good[uri]; ok {
			return true
		}
	}
	return false
}

// recordOf returns the record of uri whatever source it belongs to (the
// tests' state files hold one source).
func recordOf(ctx context.Context, st *state.Store, uri string) (state.Resource, bool, error) {
	var rec state.Resource
	var ok bool
	err := st.WalkResources(ctx, "", func(r state.Resource) error {
		if r.URI == uri {
			rec, ok = r, true
		}
		return nil
	})
	return rec, ok, err
}

// deliveriesOf returns the partial deliveries of uri whatever source it
// belongs to.
func deliveriesOf(ctx context.Context, st *state.Store, uri string) ([]state.Delivery, error) {
	rec, ok, err := recordOf(ctx, st, uri)
	if err != nil || !ok {
		return nil, err
	}
	return st.Deliveries(ctx, rec.Source, uri)
}

// checkCommitted checks that a report's figures are those of what its run
// committed to the state store: the resources it recorded written,
// deleted and unverified, and the failures it logged.
func checkCommitted(t *testing.T, ctx context.Context, st *state.Store, rep *runreport.Report) {
	t.Helper()
	var written, deleted, unverified, bytes int64
	if err := st.WalkResources(ctx, "", func(r state.Resource) error {
		if r.RunID != rep.RunID {
			return nil
		}
		switch r.Outcome {
		case state.OutcomeWritten:
			written++
			bytes += r.Length
			if r.Verified != state.VerifiedHash {
				unverified++
			}
		case state.OutcomeDeleted:
			deleted++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fs, _, err := st.Failures(ctx, rep.RunID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// Every version a change produced has its last modification, as its
	// source gave it or when it was fetched; a deletion has none.
	changes, err := st.Changes(ctx, rep.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.Lastmod.IsZero() != (c.Change == state.ChangeDeleted) {
			t.Errorf("change %s of %s: lastmod %v", c.Change, c.URI, c.Lastmod)
		}
	}
	got := [5]int64{rep.Resources.Written, rep.Resources.Deleted, rep.Resources.Unverified, rep.Bytes.Written, int64(len(rep.Failures)) + rep.FailuresTruncated}
	want := [5]int64{written, deleted, unverified, bytes, int64(len(fs))}
	if got != want {
		t.Errorf("report says written, deleted, unverified, bytes written, failures = %v; the state store committed %v", got, want)
	}
}

// planned is a protocol whose planner is p (a test's own).
func planned(p source.Planner) source.Protocol {
	return source.Protocol{Name: "test", New: func(source.Settings, source.Services) (source.Planner, error) { return p, nil }}
}

// TestFillFromHeldCopy: a sink that failed to take a resource is filled at
// the next run from the copy another sink holds, verified as any source
// is, with no request to the origin for it; a held copy that does not
// match is passed over for the origin.
func TestFillFromHeldCopy(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	srv := serve(t, src)
	gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: 40, Packages: 2, Seed: 12, MeanSize: 1 << 10, WriteResources: true}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	var uris []string
	bench.Truth(ctx, gen, func(uri string, _ io.Reader) error { uris = append(uris, uri); return nil })
	h := newHarness(t)
	victim, spoilt := uris[3], uris[9]
	a, b := h.flaky("a"), h.flaky("b")
	b.fail[victim], b.fail[spoilt] = true, true
	run := func() *runreport.Report {
		opts := h.options(srv.URL)
		opts.Sinks = []sink.Sink{a, b}
		opts.SinkNames = []string{"fs:a", "fs:b"}
		opts.SinkBackoff = time.Millisecond
		opts.Settings.Options = map[string]string{"prefer": "list"} // each resource its own GET
		rep, err := pipeline.Baseline(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := run(); rep.Resources.Failed != 2 {
		t.Fatalf("first run: %s", rep.Summary())
	}
	// a's copy of spoilt is damaged: it no longer matches the listing.
	if err := a.FS.Put(ctx, sinkResource(spoilt, "not the bytes listed"), strings.NewReader("not the bytes listed")); err != nil {
		t.Fatal(err)
	}
	b.fail[victim], b.fail[spoilt] = false, false
	path := func(uri string) string { return "/" + strings.TrimPrefix(uri, srv.URL) }
	before := map[string]int{victim: srv.Handler.Requests(path(victim)), spoilt: srv.Handler.Requests(path(spoilt))}
	rep := run()
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 2 {
		t.Fatalf("second run: %s", rep.Summary())
	}
	if n := srv.Handler.Requests(path(victim)) - before[victim]; n != 0 {
		t.Errorf("the origin was asked %d times for %s, which sink a holds", n, victim)
	}
	if n := srv.Handler.Requests(path(spoilt)) - before[spoilt]; n != 1 {
		t.Errorf("the origin was asked %d times for %s, whose held copy does not match; want 1", n, spoilt)
	}
	truth := map[string][]byte{}
	for _, u := range []string{victim, spoilt} {
		rc, err := b.Get(ctx, u)
		if err != nil {
			t.Fatalf("sink b lacks %s: %v", u, err)
		}
		truth[u], _ = io.ReadAll(rc)
		rc.Close()
		if string(truth[u]) == "not the bytes listed" {
			t.Errorf("sink b took the damaged copy of %s", u)
		}
	}
}
