package pipeline_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/sink/sinkfault"
	"github.com/rsharvest/rsharvest/state"
)

// TestPartialDeleteHoldsNothing: two sinks; a delete that the first sink
// carries out and the second fails (temporarily) leaves the state saying
// so (the first sink's delivery holds no version): when the source then
// brings the resource back with the same bytes, the next run writes it to
// the first sink again, not taking it for held by every sink.
func TestPartialDeleteHoldsNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	list := func(t *testing.T) []*manifest.Entry { return []*manifest.Entry{listEntry(t, "r/x.txt", "x v1")} }
	listSource(t, dir, map[string]string{"r/x.txt": "x v1"}, list(t), nil)
	srv := serve(t, dir)
	source := srv.URL + "capabilitylist.xml"
	x := srv.URL + "r/x.txt"

	h := newHarness(t)
	bfs, err := fs.New(filepath.Join(h.dir, "mirror-b"), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var failDelete bool
	b := sinkfault.New(bfs, sinkfault.Options{Rules: []sinkfault.Rule{sinkfault.Only(sinkfault.OpDelete, func(c sinkfault.Call) error {
		if failDelete {
			return sinkfault.Temporary("b: delete refused for now")
		}
		return nil
	})}})
	two := func(o *pipeline.Options) {
		o.Sinks = []sink.Sink{h.sink, b}
		o.SinkNames = []string{"fs:a", "fs:b"}
	}
	if rep := h.baseline(ctx, source, two); rep.Status != runreport.StatusOK || rep.Resources.Written != 1 {
		t.Fatalf("baseline: %s", rep.Summary())
	}

	// x deleted at the source: a delivers the delete, b fails it.
	listSource(t, dir, nil, nil, []*manifest.Entry{changeEntry(t, "r/x.txt", "", manifest.Deleted, "2016-01-02T01:00:00Z")})
	failDelete = true
	opts := h.options(source)
	two(&opts)
	rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{})
	if err != nil {
		t.Fatal(err)
	}
	failDelete = false
	t.Logf("delete run: %s", rep.Summary())
	if _, ok := h.held(ctx)[x]; ok {
		t.Fatalf("a still holds x: the delete was not given to a first")
	}
	if rec, ok, _ := recordOf(ctx, h.store, x); ok && !rec.Deleted && (rec.Outcome == "written" || rec.Outcome == "unchanged") {
		// Held by b still: a's delivery must say a holds no version.
		ds, _ := h.store.Deliveries(ctx, source, x)
		if !slices.ContainsFunc(ds, func(d state.Delivery) bool { return d.Sink == "fs:a" && d.Length == -1 && d.Hashes.IsZero() }) {
			t.Errorf("after a delete a carried out and b failed, the state records x held (%s, deliveries %v) while a holds none of it", rec.Outcome, ds)
		}
	}

	// x comes back with the same bytes; the delete is still in the change
	// list (its time held the checkpoint).
	listSource(t, dir, map[string]string{"r/x.txt": "x v1"}, list(t), []*manifest.Entry{
		changeEntry(t, "r/x.txt", "", manifest.Deleted, "2016-01-02T01:00:00Z"),
		changeEntry(t, "r/x.txt", "x v1", manifest.Created, "2016-01-02T02:00:00Z"),
	})
	rep, err = pipeline.Incremental(ctx, opts, pipeline.Range{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recreate run: %s", rep.Summary())
	if got := string(h.held(ctx)[x]); got != "x v1" {
		t.Errorf("a holds x = %q after the run that saw x created again, want %q (the state counts it synced: %s)", got, "x v1", rep.Summary())
	}
	if got := string(sinkBodies(ctx, t, b)[x]); got != "x v1" {
		t.Errorf("b holds x = %q, want %q", got, "x v1")
	}
}

// TestFailingSinkStarvesNoOther: two sinks, the first of which refuses a
// resource for good (a search index rejecting a document, say). The
// mirror after it still gets the resource: each resource goes to every
// sink, and only the failing one is tried again.
func TestFailingSinkStarvesNoOther(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	listSource(t, dir, map[string]string{"r/x.txt": "x v1", "r/y.txt": "y v1"},
		[]*manifest.Entry{listEntry(t, "r/x.txt", "x v1"), listEntry(t, "r/y.txt", "y v1")}, nil)
	srv := serve(t, dir)
	source := srv.URL + "capabilitylist.xml"
	x := srv.URL + "r/x.txt"
	h := newHarness(t)
	bfs, err := fs.New(filepath.Join(h.dir, "index"), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad := sinkfault.New(bfs, sinkfault.Options{Rules: []sinkfault.Rule{sinkfault.Only(sinkfault.OpPut,
		sinkfault.FailURIs(func(uri string) bool { return uri == x }, sinkfault.Permanent("the index rejects x")))}})
	order := func(o *pipeline.Options) {
		o.Sinks = []sink.Sink{bad, h.sink}
		o.SinkNames = []string{"index", "mirror"}
	}
	for run := 1; run <= 2; run++ {
		rep := h.baseline(ctx, source, order)
		t.Logf("run %d: %s", run, rep.Summary())
		if got := string(h.held(ctx)[x]); got != "x v1" {
			t.Errorf("run %d: the mirror holds x = %q, want %q: only the index refused it", run, got, "x v1")
		}
	}
	if n := bad.Calls(sinkfault.OpPut, x); n < 2 {
		t.Logf("index asked %d times", n)
	}
}
