package pipeline_test

// After any run, every change the source published up to the checkpoint
// is held, or recorded as a permanent failure to retry (a state Retry):
// never passed silently.

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/sink/sinkfault"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// owed reports whether the change of uri at changed is still owed by the
// state after a run: the checkpoint of source (set "") is not past it, or
// a retry of it is outstanding.
func owed(t *testing.T, ctx context.Context, st *state.Store, source, uri string, changed time.Time) (cp state.Checkpoint, retried, covered bool) {
	t.Helper()
	cp, ok, err := st.Checkpoint(ctx, source, "")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := st.Retries(ctx, source, "")
	if err != nil {
		t.Fatal(err)
	}
	retried = slices.ContainsFunc(rs, func(r state.Retry) bool { return r.URI == uri })
	return cp, retried, !ok || !cp.Next.After(changed) || retried
}

// TestDeleteRefusedIsRetried: a sink refuses, for good, to delete a
// resource a Change Dump deletes (a 403 for that key). The run records the
// failure and keeps the delete as a retry, so the next run, with a healthy
// sink, applies it.
func TestDeleteRefusedIsRetried(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{{from: "2015-01-01T00:00:00Z", until: "2015-01-01T03:00:00Z", changes: []change{
		{uri: res(1), kind: manifest.Deleted, at: "2015-01-01T01:00:00Z"},
		{uri: res(2), kind: manifest.Created, at: "2015-01-01T02:00:00Z", body: "res2"},
	}}}, false)
	srv := serve(t, src)
	source := srv.URL + "changedump.xml"
	h := newHarness(t)
	h.holdAsBaseline(ctx, source, res(1), "res1 from the baseline")
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"permanent", sinkfault.Permanent("403 AccessDenied")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faulty := sinkfault.New(h.sink, sinkfault.Options{Rules: []sinkfault.Rule{
				sinkfault.Only(sinkfault.OpDelete, sinkfault.FailURIs(func(u string) bool { return u == res(1) }, tc.err))}})
			opts := h.options(source)
			opts.Sinks = []sink.Sink{faulty}
			opts.SinkBackoff = time.Millisecond
			rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{From: mustTime(t, "2015-01-01T00:00:00Z")})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Status != runreport.StatusPartial || rep.Resources.Failed != 1 {
				t.Fatalf("first run: %s", rep.Summary())
			}
			cp, retried, covered := owed(t, ctx, h.store, source, res(1), mustTime(t, "2015-01-01T01:00:00Z"))
			if !covered {
				t.Errorf("the delete of %s failed permanently, yet the checkpoint moved past it (next %s) and no retry is kept (retried %v)",
					res(1), cp.Next.Format(time.RFC3339), retried)
			}
			// The next run, with a healthy sink, must apply the delete.
			rep = h.incremental(ctx, source, pipeline.Range{})
			if _, still := h.held(ctx)[res(1)]; still {
				t.Errorf("after a second run with a healthy sink (%s), %s, deleted at the source, is still in the sink", rep.Summary(), res(1))
			}
		})
	}
}

// TestWinnerMissingFromManifestIsRetried: a Change Dump package's
// manifest copy (rel="contents") lists a winning change that the package's
// own manifest.xml lacks. It fails permanently, and is kept as a retry:
// the checkpoint may pass it, the next run asks for it.
func TestWinnerMissingFromManifestIsRetried(t *testing.T) {
	ctx := context.Background()
	copyPkgs := []pkgSpec{
		{from: "2016-01-01T00:00:00Z", until: "2016-01-01T03:00:00Z", changes: []change{
			{uri: res(1), kind: manifest.Created, at: "2016-01-01T01:00:00Z", body: "res1"},
			{uri: res(9), kind: manifest.Created, at: "2016-01-01T02:00:00Z", body: "res9, listed only in the copy"},
		}},
		{from: "2016-01-01T03:00:00Z", until: "2016-01-01T05:00:00Z", changes: []change{
			{uri: res(2), kind: manifest.Created, at: "2016-01-01T04:00:00Z", body: "res2"},
		}},
	}
	realPkgs := []pkgSpec{
		{from: copyPkgs[0].from, until: copyPkgs[0].until, changes: copyPkgs[0].changes[:1]},
		copyPkgs[1],
	}
	withCopy, src := t.TempDir(), t.TempDir()
	writeChangeDump(t, withCopy, copyPkgs, true)
	writeChangeDump(t, src, realPkgs, true)
	b, err := os.ReadFile(filepath.Join(withCopy, "changes", "c0.manifest.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "changes", "c0.manifest.xml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, src)
	source := srv.URL + "changedump.xml"
	h := newHarness(t)
	rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, "2016-01-01T00:00:00Z")})
	failed := false
	for _, f := range rep.Failures {
		if f.URI == res(9) {
			failed = true
			t.Logf("failure of %s: permanent %v, %s", f.URI, f.Permanent, f.Error)
		}
	}
	if !failed {
		t.Fatalf("%s did not fail: %s %+v", res(9), rep.Summary(), rep.Failures)
	}
	cp, retried, covered := owed(t, ctx, h.store, source, res(9), mustTime(t, "2016-01-01T02:00:00Z"))
	if !covered {
		t.Errorf("the winning change of %s at 02:00 was neither applied nor kept to retry (retried %v), and the checkpoint moved past it to %s",
			res(9), retried, cp.Next.Format(time.RFC3339))
	}
}

// TestRefusedChangeEntryIsRetried: a change entry that parses but is
// refused (a created change without a path in a Change Dump package, an
// unknown change type) fails permanently, and the resource its loc names
// is kept as a retry, as a malformed entry's is.
func TestRefusedChangeEntryIsRetried(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		bad  change
	}{
		{"created without a path", change{uri: res(3), kind: manifest.Created, at: "2017-01-01T03:00:00Z", body: "no path",
			raw: func(e *manifest.Entry) { e.Metadata.Path = "" }}},
		{"unknown change type", change{uri: res(3), kind: "renamed", at: "2017-01-01T03:00:00Z", body: "unknown change type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			writeChangeDump(t, src, []pkgSpec{{from: "2017-01-01T00:00:00Z", until: "2017-01-01T06:00:00Z", changes: []change{
				{uri: res(1), kind: manifest.Created, at: "2017-01-01T01:00:00Z", body: "ok"},
				tc.bad,
				{uri: res(5), kind: manifest.Created, at: "2017-01-01T05:00:00Z", body: "also ok"},
			}}}, false)
			srv := serve(t, src)
			source := srv.URL + "changedump.xml"
			h := newHarness(t)
			rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, "2017-01-01T00:00:00Z")})
			if rep.Resources.Failed != 1 {
				t.Fatalf("%s", rep.Summary())
			}
			cp, retried, covered := owed(t, ctx, h.store, source, res(3), mustTime(t, "2017-01-01T03:00:00Z"))
			if !covered {
				t.Errorf("the change of %s failed permanently, yet no retry is kept (retried %v) and the checkpoint moved past it to %s",
					res(3), retried, cp.Next.Format(time.RFC3339))
			}
		})
	}
}

// rejectingBatcher is a sink whose Puts only queue (sink.Batcher): a Put
// of a URI reject accepts is queued and then reported failed, permanently,
// by Flush (a search index rejecting the document), as es and solr do.
type rejectingBatcher struct {
	*fs.FS
	reject func(uri string) bool
	mu     sync.Mutex
	failed []sink.Failed
}

func (b *rejectingBatcher) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if b.reject(r.URI) {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
		b.mu.Lock()
		b.failed = append(b.failed, sink.Failed{URI: r.URI, Err: errclass.Permanentf("400 mapper_parsing_exception")})
		b.mu.Unlock()
		return nil
	}
	return b.FS.Put(ctx, r, body)
}

func (b *rejectingBatcher) Flush(context.Context) []sink.Failed {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.failed
	b.failed = nil
	return out
}

var _ sink.Batcher = (*rejectingBatcher)(nil)

// TestSinkRejectionIsRetried: a sink rejects one resource of an
// incremental run for good, at once (Put's error) or when its queued
// writes are flushed (a batching sink): either way the resource is kept
// as a retry.
func TestSinkRejectionIsRetried(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{{from: "2018-01-01T00:00:00Z", until: "2018-01-01T04:00:00Z", changes: []change{
		{uri: res(1), kind: manifest.Created, at: "2018-01-01T01:00:00Z", body: "res1"},
		{uri: res(2), kind: manifest.Created, at: "2018-01-01T02:00:00Z", body: "res2, rejected"},
		{uri: res(3), kind: manifest.Created, at: "2018-01-01T03:00:00Z", body: "res3"},
	}}}, false)
	srv := serve(t, src)
	source := srv.URL + "changedump.xml"
	bad := func(u string) bool { return u == res(2) }
	for _, tc := range []struct {
		name string
		sink func(h *harness) sink.Sink
	}{
		{"put fails", func(h *harness) sink.Sink {
			return sinkfault.New(h.sink, sinkfault.Options{Rules: []sinkfault.Rule{sinkfault.FailURIs(bad, sinkfault.Permanent("403 AccessDenied"))}})
		}},
		{"batched write fails at flush", func(h *harness) sink.Sink { return &rejectingBatcher{FS: h.sink, reject: bad} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			opts := h.options(source)
			opts.Sinks = []sink.Sink{tc.sink(h)}
			opts.SinkBackoff = time.Millisecond
			rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{From: mustTime(t, "2018-01-01T00:00:00Z")})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Resources.Failed != 1 {
				t.Fatalf("%s %+v", rep.Summary(), rep.Failures)
			}
			cp, retried, covered := owed(t, ctx, h.store, source, res(2), mustTime(t, "2018-01-01T02:00:00Z"))
			if !covered {
				t.Errorf("the write of %s failed permanently, yet no retry is kept (retried %v) and the checkpoint moved past it to %s",
					res(2), retried, cp.Next.Format(time.RFC3339))
			}
		})
	}
}

// TestSupersededRetryResolved: an outstanding retry of a change older
// than the version the destination holds is found superseded by the next
// run, and cleared: later runs do not ask for it again.
func TestSupersededRetryResolved(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{{from: "2020-01-01T00:00:00Z", until: "2020-01-01T10:00:00Z", changes: []change{
		{uri: res(1), kind: manifest.Created, at: "2020-01-01T08:00:00Z", body: "res1"},
	}}}, false)
	srv := serve(t, src)
	source := srv.URL + "changedump.xml"
	h := newHarness(t)
	// The destination holds res7 as changed at 07:00; a retry of its
	// change at 05:00 is outstanding (recorded by a run over an older
	// range).
	h.holdAsBaseline(ctx, source, res(7), "res7 at 07:00")
	held, _, err := recordOf(ctx, h.store, res(7))
	if err != nil {
		t.Fatal(err)
	}
	held.ChangeTime = mustTime(t, "2020-01-01T07:00:00Z")
	old := retryRecord(res(7), mustTime(t, "2020-01-01T05:00:00Z"))
	if err := h.store.Commit(ctx, state.Batch{Resources: []state.Resource{held}}); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Commit(ctx, state.Batch{Retries: []state.Retry{{Source: source, URI: res(7), Record: old, ChangeTime: mustTime(t, "2020-01-01T05:00:00Z")}}}); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, "2020-01-01T06:00:00Z")})
		if rep.Status != runreport.StatusOK {
			t.Fatalf("run %d: %s %+v", run, rep.Summary(), rep.Failures)
		}
		t.Logf("run %d: %s", run, rep.Summary())
		if got := h.held(ctx)[res(7)]; string(got) != "res7 at 07:00" {
			t.Fatalf("run %d: res7 = %q", run, got)
		}
	}
	rs, err := h.store.Retries(ctx, source, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) > 0 {
		t.Errorf("after two runs found the retry of res7 at 05:00 superseded by the version held (07:00), it is still outstanding: %+v", rs)
	}
}

// retryRecord is the JSON of the record a retry keeps.
func retryRecord(uri string, changed time.Time) string {
	b, _ := json.Marshal(source.Record{URI: uri, ChangeTime: changed, Length: -1})
	return string(b)
}
