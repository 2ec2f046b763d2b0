package pipeline_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

func TestParseDeleteLimit(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true}, {"0", "0", true}, {"100", "100", true}, {"5%", "5%", true}, {" 12.5 % ", "12.5%", true}, {"0%", "0%", true},
		{"-1", "", false}, {"101%", "", false}, {"ten", "", false}, {"5%%", "", false}, {"NaN%", "", false},
	} {
		l, err := pipeline.ParseDeleteLimit(tt.in)
		if (err == nil) != tt.ok || (tt.ok && l.String() != tt.want) {
			t.Errorf("ParseDeleteLimit(%q) = %q, %v; want %q, ok %v", tt.in, l.String(), err, tt.want, tt.ok)
		}
	}
}

// TestMaxDelete: a catch-up whose changes would delete more than
// --max-delete allows (a count, or a share of what is held) stops before
// deleting anything — what the state and the sink hold is as before its
// deletions, and its checkpoint stays — and says why; with a limit it
// stays within, it deletes them all.
func TestMaxDelete(t *testing.T) {
	ctx := context.Background()
	srv, gen := changeSource(t, bench.GenOptions{Resources: 200, Packages: 2, Seed: 5, MeanSize: 1 << 10,
		ChangePackages: 2, ChangesPerPackage: 60, DeleteShare: 0.3})
	h := newHarness(t)
	srv.Handler.Publish(0)
	if rep := h.baseline(ctx, srv.URL, nil); rep.Status != runreport.StatusOK {
		t.Fatalf("baseline: %s", rep.Summary())
	}
	srv.Handler.Publish(2)
	want := truthAfter(t, gen, 2)
	before := h.held(ctx)
	deletes := 0
	for uri := range before {
		if _, ok := want[uri]; !ok {
			deletes++
		}
	}
	if deletes < 10 {
		t.Fatalf("the changes delete %d resources: too few to test", deletes)
	}
	heldBefore, _ := h.store.CountResources(ctx, "", false)
	for _, limit := range []string{"5", "2%"} {
		l, err := pipeline.ParseDeleteLimit(limit)
		if err != nil {
			t.Fatal(err)
		}
		opts := h.options(srv.URL)
		opts.MaxDelete = l
		rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{})
		if !errors.Is(err, pipeline.ErrTooManyDeletes) || rep == nil || rep.Status != runreport.StatusFailed || rep.Resources.Deleted != 0 {
			t.Fatalf("--max-delete %s: %v; %+v", limit, err, rep)
		}
		got := h.held(ctx)
		for uri := range before {
			if _, ok := got[uri]; !ok {
				t.Fatalf("--max-delete %s: %s deleted from the sink", limit, uri)
			}
		}
		if n, _ := h.store.CountResources(ctx, "", false); n < heldBefore {
			t.Fatalf("--max-delete %s: the state holds %d live resources, %d before", limit, n, heldBefore)
		}
	}
	l, _ := pipeline.ParseDeleteLimit("50%")
	opts := h.options(srv.URL)
	opts.MaxDelete = l
	rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{})
	if err != nil || rep.Status != runreport.StatusOK || rep.Resources.Deleted != int64(deletes) {
		t.Fatalf("--max-delete 50%%: %v; %s", err, rep.Summary())
	}
	if got := h.held(ctx); len(sfDiff(got, want)) != 0 {
		t.Errorf("after the catch-up the sink differs from the source: %s", sfFirst(sfDiff(got, want)))
	}
}
