package pipeline_test

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
)

// TestAudit: after a baseline the audit finds nothing; planted missing,
// extra and corrupted resources are found, and --repair mends them.
func TestAudit(t *testing.T) {
	for _, prefer := range []string{"dump", "list"} {
		t.Run(prefer, func(t *testing.T) {
			ctx := context.Background()
			src := t.TempDir()
			srv := serve(t, src)
			gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: 90, Packages: 3, Seed: 8, MeanSize: 1 << 10, WriteResources: true, NoOddNames: true}
			if _, err := bench.Generate(ctx, gen); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t)
			mod := func(o *pipeline.Options) { o.Settings.Options = map[string]string{"prefer": prefer} }
			if rep := h.baseline(ctx, srv.URL, mod); rep.Status != runreport.StatusOK {
				t.Fatalf("%s", rep.Summary())
			}
			audit := func(repair bool) *pipeline.AuditReport {
				opts := h.options(srv.URL)
				mod(&opts)
				ar, err := pipeline.Audit(ctx, opts, repair)
				if err != nil {
					t.Fatal(err)
				}
				return ar
			}
			if ar := audit(false); !ar.Clean() || ar.Listed != 90 || ar.Sinks[0].Held != 90 {
				var b strings.Builder
				ar.WriteText(&b)
				t.Fatalf("fresh audit not clean:\n%s", b.String())
			}
			// Plant the three kinds of difference.
			var uris []string
			bench.Truth(ctx, gen, func(uri string, _ io.Reader) error { uris = append(uris, uri); return nil })
			missing, corrupt, extra := uris[3], uris[10], srv.URL+"resources/gone.txt"
			if err := os.Remove(h.sink.Path(missing)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(h.sink.Path(corrupt), []byte("flipped bytes"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := h.sink.Put(ctx, sinkResource(extra, "no longer at the source"), strings.NewReader("no longer at the source")); err != nil {
				t.Fatal(err)
			}
			ar := audit(false)
			s := ar.Sinks[0]
			if s.Missing != 1 || s.Extra != 1 || s.Mismatched != 1 || s.MissingURI[0] != missing || s.ExtraURI[0] != extra || s.Mismatch[0] != corrupt {
				var b strings.Builder
				ar.WriteText(&b)
				t.Fatalf("audit:\n%s", b.String())
			}
			ar = audit(true)
			if ar.Repair == nil || ar.Repair.Resources.Written != 2 || ar.Removed != 1 {
				var b strings.Builder
				ar.WriteText(&b)
				t.Fatalf("repair:\n%s", b.String())
			}
			if ar := audit(false); !ar.Clean() {
				var b strings.Builder
				ar.WriteText(&b)
				t.Fatalf("after repair:\n%s", b.String())
			}
		})
	}
}

// TestAuditByRange: an audit is a listing run of the one executor. A
// package whose manifest copy cannot be read is listed from its own
// manifest.xml, read in place by Range: the audit reads a small part of
// the packages' bytes, finds everything held, and writes nothing.
func TestAuditByRange(t *testing.T) {
	ctx := context.Background()
	gen, want, pkgBytes := rangeSource(t)
	srv := serve(t, gen.Dir)
	h := newHarness(t)
	if rep := h.baseline(ctx, srv.URL, nil); rep.Status != runreport.StatusOK {
		t.Fatalf("%s", rep.Summary())
	}
	copies, err := filepath.Glob(filepath.Join(gen.Dir, "*", "*.manifest.xml"))
	if err != nil || len(copies) == 0 {
		copies, err = filepath.Glob(filepath.Join(gen.Dir, "*.manifest.xml"))
	}
	if err != nil || len(copies) == 0 {
		t.Fatalf("no manifest copies in %s (%v)", gen.Dir, err)
	}
	for _, c := range copies {
		if err := os.Remove(c); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := h.store.Runs(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	sent := srv.Handler.Stats().BytesSent
	ar, err := pipeline.Audit(ctx, h.options(srv.URL), false)
	if err != nil {
		t.Fatal(err)
	}
	served := srv.Handler.Stats().BytesSent - sent
	if !ar.Clean() || ar.Listed != int64(len(want)) || ar.Sinks[0].Held != int64(len(want)) {
		var b strings.Builder
		ar.WriteText(&b)
		t.Fatalf("audit:\n%s", b.String())
	}
	t.Logf("audit of %d resources in %d package bytes: the server sent %d bytes (%.2f %%)", len(want), pkgBytes, served, 100*float64(served)/float64(pkgBytes))
	if served > pkgBytes/10 {
		t.Errorf("the server sent %d bytes for %d package bytes: the packages were downloaded", served, pkgBytes)
	}
	if after, err := h.store.Runs(ctx, 10); err != nil || len(after) != len(runs) {
		t.Errorf("the audit recorded a run: %d runs before, %d after (%v)", len(runs), len(after), err)
	}
}

// queuedDeletes is an fs sink whose deletes only queue (a sink.Batcher,
// as a bulk API's), and whose Flush reports them failed.
type queuedDeletes struct {
	*fs.FS
	queued []string
}

func (q *queuedDeletes) Delete(_ context.Context, uri string) error {
	q.queued = append(q.queued, uri)
	return nil
}

func (q *queuedDeletes) Flush(context.Context) []sink.Failed {
	var failed []sink.Failed
	for _, uri := range q.queued {
		failed = append(failed, sink.Failed{URI: uri, Delete: true, Err: errclass.Retryablef("bulk item: 503")})
	}
	q.queued = nil
	return failed
}

// TestAuditRepairBatching: a repair's removals from a sink that only
// queues its writes are applied (flushed) before the state forgets them;
// one the sink then reports failed fails the repair, and the state still
// knows what it holds.
func TestAuditRepairBatching(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	srv := serve(t, src)
	gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: 20, Packages: 1, Seed: 3, MeanSize: 512, WriteResources: true, NoOddNames: true}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	if rep := h.baseline(ctx, srv.URL, nil); rep.Status != runreport.StatusOK {
		t.Fatalf("%s", rep.Summary())
	}
	extra := srv.URL + "resources/gone.txt"
	if err := h.sink.Put(ctx, sinkResource(extra, "no longer at the source"), strings.NewReader("no longer at the source")); err != nil {
		t.Fatal(err)
	}
	opts := h.options(srv.URL)
	q := &queuedDeletes{FS: h.sink}
	opts.Sinks = []sink.Sink{q}
	_, err := pipeline.Audit(ctx, opts, true)
	if err == nil || !strings.Contains(err.Error(), "repair: removing "+extra) {
		t.Fatalf("a repair whose removal the sink failed: %v", err)
	}
	if n, err := h.store.CountResources(ctx, "", true); err != nil || n != 20 {
		t.Errorf("the state holds %d resources (%v), want the 20 it held", n, err)
	}
}

// TestAuditNewerThanSnapshot: after a baseline and the changes a Change
// Dump published later (creates, updates, deletes), the Resource Dump is
// an older snapshot than what the destination holds. The audit counts
// what changed after it as newer than the snapshot — not missing, extra
// or mismatched — and a repair (dry run, then real) rolls nothing back.
func TestAuditNewerThanSnapshot(t *testing.T) {
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
	rep := h.incremental(ctx, srv.URL, pipeline.Range{})
	if rep.Status != runreport.StatusOK || rep.Resources.Written == 0 || rep.Resources.Deleted == 0 {
		t.Fatalf("incremental: %s", rep.Summary())
	}
	before := h.held(ctx)
	audit := func(repair, dryRun bool) *pipeline.AuditReport {
		opts := h.options(srv.URL)
		opts.DryRun = dryRun
		ar, err := pipeline.Audit(ctx, opts, repair)
		if err != nil {
			t.Fatal(err)
		}
		return ar
	}
	show := func(ar *pipeline.AuditReport) string {
		var b strings.Builder
		ar.WriteText(&b)
		return b.String()
	}
	ar := audit(false, false)
	s := ar.Sinks[0]
	if !ar.Clean() || s.Newer != rep.Resources.Written+rep.Resources.Deleted {
		t.Fatalf("audit after the changes (%s):\n%s", rep.Summary(), show(ar))
	}
	for _, dry := range []bool{true, false} {
		audit(true, dry)
		if after := h.held(ctx); !maps.EqualFunc(before, after, bytes.Equal) {
			t.Fatalf("repair (dry run %v) changed the sink: %d held before, %d after", dry, len(before), len(after))
		}
	}
	// A difference that is one stays one: a resource unchanged since
	// the snapshot, removed from the sink behind the state's back, is
	// missing; the dry run says it would fetch it and does not, the
	// repair does.
	var victim string
	var oldest time.Time
	for uri := range before {
		rec, ok, err := h.store.Resource(ctx, srv.URL, uri)
		if err != nil || !ok {
			t.Fatalf("%s held: %v %v", uri, ok, err)
		}
		if victim == "" || rec.ChangeTime.Before(oldest) {
			victim, oldest = uri, rec.ChangeTime
		}
	}
	if err := os.Remove(h.sink.Path(victim)); err != nil {
		t.Fatal(err)
	}
	var previewed []pipeline.Preview
	opts := h.options(srv.URL)
	opts.DryRun, opts.Preview = true, func(p pipeline.Preview) { previewed = append(previewed, p) }
	ar, err := pipeline.Audit(ctx, opts, true)
	if err != nil {
		t.Fatal(err)
	}
	if s := ar.Sinks[0]; s.Missing != 1 || s.MissingURI[0] != victim || !ar.DryRun || len(previewed) != 1 || previewed[0].URI != victim {
		t.Fatalf("dry run of a repair: previewed %+v\n%s", previewed, show(ar))
	}
	if _, err := os.Stat(h.sink.Path(victim)); err == nil {
		t.Fatal("the dry run fetched the missing resource")
	}
	if ar := audit(true, false); ar.Repair == nil || ar.Repair.Resources.Written != 1 {
		t.Fatalf("repair:\n%s", show(ar))
	}
	if after := h.held(ctx); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatalf("after the repair the sink holds %d, before the removal %d", len(after), len(before))
	}
}
