package pipeline_test

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// previews collects what a dry run tells, by action.
type previews struct {
	mu sync.Mutex
	by map[string][]string
}

func (p *previews) add(v pipeline.Preview) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string][]string{}
	}
	p.by[v.Action] = append(p.by[v.Action], v.URI)
}

func (p *previews) sorted(action string) []string {
	out := append([]string(nil), p.by[action]...)
	sort.Strings(out)
	return out
}

// TestDryRun: a dry run tells what a baseline, then a catch-up, would
// fetch, write and delete — exactly what the real runs then do — and
// changes nothing: the sink and the state (its runs, checkpoints and
// resources) are as before it.
func TestDryRun(t *testing.T) {
	ctx := context.Background()
	srv, gen := changeSource(t, bench.GenOptions{Resources: 80, Packages: 2, Seed: 3, MeanSize: 1 << 10,
		ChangePackages: 2, ChangesPerPackage: 30, DeleteShare: 0.3})
	h := newHarness(t)
	srv.Handler.Publish(0)
	dry := func(incremental bool) (*runreport.Report, *previews) {
		t.Helper()
		var p previews
		opts := h.options(srv.URL)
		opts.DryRun, opts.Preview = true, p.add
		var rep *runreport.Report
		var err error
		if incremental {
			rep, err = pipeline.Incremental(ctx, opts, pipeline.Range{})
		} else {
			rep, err = pipeline.Baseline(ctx, opts)
		}
		if err != nil || rep.Status != runreport.StatusOK || !rep.DryRun {
			t.Fatalf("dry run: %v; %+v", err, rep)
		}
		return rep, &p
	}
	rep, p := dry(false)
	if len(p.by[pipeline.PreviewFetch]) != 2 || len(p.by[pipeline.PreviewWrite]) != 80 || len(p.by[pipeline.PreviewDelete]) != 0 || rep.Resources.Written != 80 {
		t.Fatalf("the baseline's dry run: fetch %d, write %d, delete %d; report %d written", len(p.by["fetch"]), len(p.by["write"]), len(p.by["delete"]), rep.Resources.Written)
	}
	if got := h.held(ctx); len(got) != 0 {
		t.Fatalf("the dry run wrote %d resources", len(got))
	}
	if runs, err := h.store.Runs(ctx, 10); err != nil || len(runs) != 0 {
		t.Fatalf("the dry run recorded runs: %+v %v", runs, err)
	}
	if has, err := h.store.HasCheckpoint(ctx, srv.URL); err != nil || has {
		t.Fatalf("the dry run set a checkpoint: %v %v", has, err)
	}
	wouldWrite := p.sorted(pipeline.PreviewWrite)
	real := h.baseline(ctx, srv.URL, nil)
	held := h.held(ctx)
	if len(held) != len(wouldWrite) || real.Resources.Written != int64(len(wouldWrite)) {
		t.Fatalf("the baseline wrote %d, the dry run said %d", len(held), len(wouldWrite))
	}
	for _, uri := range wouldWrite {
		if _, ok := held[uri]; !ok {
			t.Fatalf("the dry run said %s would be written; the baseline did not write it", uri)
		}
	}

	// A catch-up: the dry run's writes and deletes are the real run's.
	srv.Handler.Publish(2)
	cp, _, _ := h.store.Checkpoint(ctx, srv.URL, "")
	rep, p = dry(true)
	if len(p.by[pipeline.PreviewDelete]) == 0 || rep.Resources.Deleted != int64(len(p.by[pipeline.PreviewDelete])) {
		t.Fatalf("the catch-up's dry run deletes %d (report %d)", len(p.by["delete"]), rep.Resources.Deleted)
	}
	if got := h.held(ctx); len(sfDiff(got, held)) != 0 {
		t.Fatalf("the dry run changed the sink: %s", sfFirst(sfDiff(got, held)))
	}
	if after, _, _ := h.store.Checkpoint(ctx, srv.URL, ""); !after.Next.Equal(cp.Next) {
		t.Fatalf("the dry run moved the checkpoint: %v → %v", cp.Next, after.Next)
	}
	want := truthAfter(t, gen, 2)
	for _, uri := range p.by[pipeline.PreviewDelete] {
		if _, ok := want[uri]; ok {
			t.Errorf("the dry run would delete %s, which the source holds", uri)
		}
	}
	for _, uri := range p.by[pipeline.PreviewWrite] {
		if _, ok := want[uri]; !ok {
			t.Errorf("the dry run would write %s, which the source deleted", uri)
		}
	}
	real = h.incremental(ctx, srv.URL, pipeline.Range{})
	if real.Resources.Deleted != rep.Resources.Deleted || real.Resources.Written != rep.Resources.Written {
		t.Errorf("the catch-up wrote %d and deleted %d; its dry run said %d and %d", real.Resources.Written, real.Resources.Deleted, rep.Resources.Written, rep.Resources.Deleted)
	}
	if got := h.held(ctx); len(sfDiff(got, want)) != 0 {
		t.Errorf("after the catch-up: %s", sfFirst(sfDiff(got, want)))
	}
}
