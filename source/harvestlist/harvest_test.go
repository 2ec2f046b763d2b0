package harvestlist_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/source/harvestlist"
	"github.com/rsharvest/rsharvest/state"
)

// TestHarvest: a harvest of a list through the executor fetches every
// document at its highest revision, fails the unreachable one and the
// element without a revision, skips the docid listed twice; once the
// site's revisions rose, the next harvest fetches only the documents
// whose revision rose, requests nothing of the others, and reports the
// one listed at a lower revision than held without applying it.
func TestHarvest(t *testing.T) {
	const n = 12
	srv, dir := site(t, n, 0)
	work := t.TempDir()
	mirror, err := fs.New(filepath.Join(work, "m"), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(t.Context(), filepath.Join(work, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	list := srv.URL + "harvestlist.xml"
	harvest := func() *runreport.Report {
		t.Helper()
		rep, err := pipeline.Baseline(t.Context(), pipeline.Options{Source: list, Protocol: harvestlist.Protocol(), Sinks: []sink.Sink{mirror}, Store: st,
			Client: fetch.New(fetch.Options{Retries: -1, StallTimeout: 5 * time.Second}), SpoolDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := harvest()
	r := rep.Resources
	if r.Written != n-1 || r.Failed != 2 || r.Skipped != 1 || r.Deleted != 0 {
		t.Fatalf("first harvest: %s", rep.Summary())
	}
	for _, f := range rep.Failures {
		if f.URI != bench.HarvestListDocID(bench.HarvestListUnreachable) && f.URI != bench.HarvestListScope+".999" {
			t.Errorf("failure %+v", f)
		}
	}
	held, ok, err := st.Resource(t.Context(), list, bench.HarvestListDocID(3))
	if err != nil || !ok || held.Version != "1" {
		t.Fatalf("document 3 held: %+v %v %v", held, ok, err)
	}

	// The site moves on: every third document at revision 2, document 7
	// listed at revision 0.
	if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: dir, Documents: n, Round: 1, Seed: 1, Odd: true}); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for i := range n {
		p := "/docs/" + strings.TrimPrefix(bench.HarvestListDocID(i), bench.HarvestListScope+".") + ".1.xml"
		before[p] = srv.Handler.Requests(p)
	}
	rep = harvest()
	r = rep.Resources
	if r.Written != 3 || r.Unchanged != n-5 || r.Failed != 2 || r.Skipped != 2 {
		t.Fatalf("second harvest: %s", rep.Summary())
	}
	for p, k := range before {
		if got := srv.Handler.Requests(p); got != k {
			t.Errorf("%s requested again (%d → %d): held at its revision", p, k, got)
		}
	}
	lower := false
	for _, s := range rep.Skips {
		lower = lower || (s.Entry == bench.HarvestListDocID(bench.HarvestListLower) && strings.Contains(s.Reason, "listed at version 0, older than the version 1 held"))
	}
	if !lower {
		t.Errorf("the lower revision is not reported: %+v", rep.Skips)
	}
	if held, _, _ := st.Resource(t.Context(), list, bench.HarvestListDocID(bench.HarvestListLower)); held.Version != "1" {
		t.Errorf("document 7 held at revision %s, want 1 (the lower one not applied)", held.Version)
	}
	if held, _, _ := st.Resource(t.Context(), list, bench.HarvestListDocID(3)); held.Version != "2" {
		t.Errorf("document 3 held at revision %s, want 2", held.Version)
	}
}
