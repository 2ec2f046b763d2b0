package pipeline_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// TestCatchUpInSteps: a baseline followed by incremental runs, as the
// source publishes one change package after another, ends equal to the
// source's later state (what a fresh baseline of it would hold): deletes
// applied, latest versions kept.
// changeSource generates gen — a snapshot and its Change Dump — for the
// URL of the server it then serves it on, so that documents, manifest
// copies and packages agree on every URI; nothing is published yet.
func changeSource(t *testing.T, gen bench.GenOptions) (*bench.Server, bench.GenOptions) {
	t.Helper()
	gen.Dir = t.TempDir()
	srv := serve(t, gen.Dir)
	gen.Base = srv.URL
	if _, err := bench.Generate(t.Context(), gen); err != nil {
		t.Fatal(err)
	}
	return srv, gen
}

func TestCatchUpInSteps(t *testing.T) {
	ctx := context.Background()
	srv, gen := changeSource(t, bench.GenOptions{Resources: 240, Packages: 3, Seed: 21, MeanSize: 2 << 10,
		ChangePackages: 5, ChangesPerPackage: 40, DeleteShare: 0.15, IndexThreshold: 2})
	h := newHarness(t)
	srv.Handler.Publish(0)
	if rep := h.baseline(ctx, srv.URL, nil); rep.Status != runreport.StatusOK {
		t.Fatalf("baseline: %s", rep.Summary())
	}
	for _, k := range []int{1, 3, 5} {
		srv.Handler.Publish(k)
		rep := h.incremental(ctx, srv.URL, pipeline.Range{})
		if rep.Status != runreport.StatusOK {
			t.Fatalf("step %d: %s", k, rep.Summary())
		}
		want := map[string][]byte{}
		if err := bench.TruthAfter(ctx, gen, k, func(uri string, body io.Reader) error {
			b, err := io.ReadAll(body)
			want[uri] = b
			return err
		}); err != nil {
			t.Fatal(err)
		}
		got := h.held(ctx)
		if len(got) != len(want) {
			t.Fatalf("step %d: sink holds %d resources, the source %d", k, len(got), len(want))
		}
		for uri, b := range want {
			if !bytes.Equal(got[uri], b) {
				t.Fatalf("step %d: %s differs", k, uri)
			}
		}
		n, err := h.store.CountResources(ctx, "", false)
		if err != nil || n != int64(len(want)) {
			t.Fatalf("step %d: state holds %d live resources (%v), want %d", k, n, err, len(want))
		}
	}
	// The change dump documents are recorded, open (the last package has
	// no until) …
	docs, err := h.store.ChangeDocuments(ctx, srv.URL)
	if err != nil || len(docs) == 0 || !docs[len(docs)-1].Open {
		t.Fatalf("change documents %+v %v", docs, err)
	}
	// … and a repeated catch-up changes nothing.
	rep := h.incremental(ctx, srv.URL, pipeline.Range{})
	if rep.Resources.Written != 0 || rep.Resources.Deleted != 0 {
		t.Fatalf("repeated catch-up: %s", rep.Summary())
	}
}
