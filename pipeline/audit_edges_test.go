package pipeline_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinkfault"
	"github.com/rsharvest/rsharvest/state"
)

// TestRepairPartialListing: when part of the source's listing cannot
// be read (a package of the Resource Dump, a Resource List of an index),
// the audit reports it as a problem — and the resources only that part
// lists are not "extra". A repair does not remove them: it cannot replace
// them, and the source still lists them.
func TestRepairPartialListing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefer string
		gen    bench.GenOptions
		remove []string // files of the source removed after the baseline
	}{
		{"dump: one package gone", "dump",
			bench.GenOptions{Resources: 60, Packages: 3, Seed: 8, MeanSize: 256, WriteResources: true, NoOddNames: true},
			[]string{"packages/part-00002.zip", "packages/part-00002.manifest.xml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			src := t.TempDir()
			srv := serve(t, src)
			gen := tc.gen
			gen.Dir, gen.Base = src, srv.URL
			if _, err := bench.Generate(ctx, gen); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t)
			mod := func(o *pipeline.Options) { o.Settings.Options = map[string]string{"prefer": tc.prefer} }
			if rep := h.baseline(ctx, srv.URL, mod); rep.Status != runreport.StatusOK {
				t.Fatalf("baseline: %s", rep.Summary())
			}
			before := h.held(ctx)
			for _, f := range tc.remove {
				if err := os.Remove(filepath.Join(src, filepath.FromSlash(f))); err != nil {
					t.Fatal(err)
				}
			}
			opts := h.options(srv.URL)
			mod(&opts)
			ar, err := pipeline.Audit(ctx, opts, true)
			var b strings.Builder
			if ar != nil {
				ar.WriteText(&b)
			}
			if ar == nil {
				t.Fatalf("audit: %v", err)
			}
			if len(ar.Problems) == 0 {
				t.Fatalf("the audit saw no problem reading the source (%v):\n%s", err, b.String())
			}
			after := h.held(ctx)
			if len(after) != len(before) || ar.Removed != 0 {
				t.Errorf("a repair over a listing that failed in part removed %d resources (sink held %d, holds %d; err %v); it cannot replace them:\n%.1500s",
					ar.Removed, len(before), len(after), err, b.String())
			}
			if n, err := h.store.CountResources(ctx, "", true); err != nil || n != int64(len(before)) {
				t.Errorf("the state holds %d resources (%v), want the %d it held", n, err, len(before))
			}
		})
	}
}

// TestRepairMaxDelete: audit takes --max-delete (every setting of a
// sync), and a run that would delete more than it allows stops before
// deleting any. A source that suddenly lists a third less (a package
// dropped from its Resource Dump) makes a third of what is held "extra":
// a repair with --max-delete 5 removes none of the 20.
func TestRepairMaxDelete(t *testing.T) {
	ctx := t.Context()
	src := t.TempDir()
	srv := serve(t, src)
	gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: 60, Packages: 3, Seed: 8, MeanSize: 256, NoOddNames: true}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	if rep := h.baseline(ctx, srv.URL, nil); rep.Status != runreport.StatusOK {
		t.Fatalf("baseline: %s", rep.Summary())
	}
	before := h.held(ctx)
	dump := filepath.Join(src, "resourcedump.xml")
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if !strings.Contains(line, "part-00002.zip") {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(dump, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := h.options(srv.URL)
	if opts.MaxDelete, err = pipeline.ParseDeleteLimit("5"); err != nil {
		t.Fatal(err)
	}
	ar, err := pipeline.Audit(ctx, opts, true)
	var out strings.Builder
	if ar != nil {
		ar.WriteText(&out)
	}
	if ar == nil || ar.Sinks[0].Extra != 20 {
		t.Fatalf("audit (%v):\n%s", err, out.String())
	}
	if after := h.held(ctx); len(after) != len(before) {
		t.Errorf("repair with --max-delete 5 removed %d of %d held resources (err %v)", len(before)-len(after), len(before), err)
	}
}

// TestRepairMismatchedNewer: a resource updated after the snapshot (by an
// incremental run) whose held body is then damaged is counted mismatched,
// and the repair has the next harvest fetch it again, as it does a missing
// one newer than the snapshot: fetching it from the snapshot would roll it
// back to the version the later change replaced ("audit --repair never
// writes an older version"). The next harvest restores the version held.
func TestRepairMismatchedNewer(t *testing.T) {
	ctx := t.Context()
	src := t.TempDir()
	srv := serve(t, src)
	gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: 60, Packages: 2, Seed: 9, MeanSize: 512, NoOddNames: true,
		ChangePackages: 2, ChangesPerPackage: 12, ClosedLast: true}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	if rep := h.baseline(ctx, srv.URL, nil); rep.Status != runreport.StatusOK {
		t.Fatalf("baseline: %s", rep.Summary())
	}
	if rep := h.incremental(ctx, srv.URL, pipeline.Range{}); rep.Status != runreport.StatusOK || rep.Resources.Written == 0 {
		t.Fatalf("incremental: %s", rep.Summary())
	}
	old, now := truthAfter(t, gen, 0), truthAfter(t, gen, gen.ChangePackages)
	var victim string
	for uri, body := range now {
		if o, ok := old[uri]; ok && !bytes.Equal(o, body) && (victim == "" || uri < victim) {
			victim = uri // updated after the snapshot
		}
	}
	if victim == "" {
		t.Fatal("no resource updated by the changes")
	}
	before, ok, err := h.store.Resource(ctx, srv.URL, victim)
	if err != nil || !ok {
		t.Fatalf("%s not held: %v", victim, err)
	}
	if err := os.WriteFile(h.sink.Path(victim), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	ar, err := pipeline.Audit(ctx, h.options(srv.URL), true)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	ar.WriteText(&out)
	if body, ok := h.held(ctx)[victim]; ok && bytes.Equal(body, old[victim]) {
		t.Errorf("the repair rolled %s back to the snapshot's version (%d bytes; the version held was %d bytes)", victim, len(old[victim]), len(now[victim]))
	}
	if retries, err := h.store.Retries(ctx, srv.URL, before.ResourceSet); err != nil || !slices.ContainsFunc(retries, func(r state.Retry) bool {
		return r.URI == victim && r.ChangeTime.Equal(before.ChangeTime)
	}) {
		t.Errorf("the repair left no retry of %s at its change time %v (%v)", victim, before.ChangeTime, err)
	}
	if ar.NotRepaired != 1 {
		t.Errorf("NotRepaired = %d, want 1", ar.NotRepaired)
	}
	if rep := h.incremental(ctx, srv.URL, pipeline.Range{}); rep.Status != runreport.StatusOK {
		t.Errorf("the next harvest: %s", rep.Summary())
	}
	if body := h.held(ctx)[victim]; !bytes.Equal(body, now[victim]) {
		t.Errorf("after the next harvest %s holds %d bytes, want the current version's %d", victim, len(body), len(now[victim]))
	}
	if t.Failed() {
		t.Logf("%.2000s", out.String())
	}
}

// TestAuditPassesOverFailedRecords: a resource that failed (its record
// holds nothing) and that the source no longer lists is not counted
// missing by an audit: no sink was ever to hold it.
func TestAuditPassesOverFailedRecords(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	listSource(t, dir, map[string]string{"r/x.txt": "x v1", "r/y.txt": "y v1"},
		[]*manifest.Entry{listEntry(t, "r/x.txt", "x v1"), listEntry(t, "r/y.txt", "y v1")}, nil)
	srv := serve(t, dir)
	source := srv.URL + "capabilitylist.xml"
	h := newHarness(t)
	refuseX := sinkfault.New(h.sink, sinkfault.Options{Rules: []sinkfault.Rule{sinkfault.Only(sinkfault.OpPut, func(c sinkfault.Call) error {
		if strings.HasSuffix(c.URI, "/r/x.txt") {
			return sinkfault.Permanent("x refused")
		}
		return nil
	})}})
	h.baseline(ctx, source, func(o *pipeline.Options) { o.Sinks = []sink.Sink{refuseX} })
	if rec, ok, _ := recordOf(ctx, h.store, srv.URL+"r/x.txt"); !ok || rec.Outcome != "failed" {
		t.Fatalf("x's record after its refusal: %+v, %v; want failed", rec, ok)
	}
	listSource(t, dir, map[string]string{"r/y.txt": "y v1"}, []*manifest.Entry{listEntry(t, "r/y.txt", "y v1")}, nil)
	ar, err := pipeline.Audit(ctx, h.options(source), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ar.Sinks {
		if s.Missing != 0 {
			t.Errorf("%s: %d missing (%v), want none: x failed, and is no longer listed", s.Sink, s.Missing, s.MissingURI)
		}
	}
}
