package pipeline_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
)

// TestPackageSkip: a re-sync of an unchanged dump skips every package the
// previous run delivered in full, reading nothing of it; a package with a
// failure, a new set of sinks, or records put outside a run make it read
// again.
func TestPackageSkip(t *testing.T) {
	ctx := context.Background()
	gen, want, _ := rangeSource(t)
	srv := serve(t, gen.Dir)
	h := newHarness(t)
	first := h.baseline(ctx, srv.URL, nil)
	if first.Status != runreport.StatusOK || first.Resources.Written != int64(len(want)) {
		t.Fatalf("first run: %s", first.Summary())
	}
	before := mtimes(t, filepath.Join(h.dir, "mirror"))

	again := h.baseline(ctx, srv.URL, nil)
	if again.Status != runreport.StatusOK || again.Packages.Done != 4 || again.Resources.Unchanged != int64(len(want)) ||
		again.Resources.Written != 0 || again.Bytes.Downloaded != 0 {
		t.Fatalf("unchanged re-sync: %s", again.Summary())
	}
	for p, m := range mtimes(t, filepath.Join(h.dir, "mirror")) {
		if !before[p].Equal(m) {
			t.Errorf("%s rewritten", p)
		}
	}
	reread := h.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.DisablePackageSkip = true })
	if reread.Status != runreport.StatusOK || reread.Resources.Unchanged != int64(len(want)) {
		t.Fatalf("re-read: %s", reread.Summary())
	}
	if again.Fetch.Requests >= reread.Fetch.Requests {
		t.Errorf("skipping made %d requests, reading the packages %d", again.Fetch.Requests, reread.Fetch.Requests)
	}
	t.Logf("unchanged re-sync: %d requests with package skip, %d without", again.Fetch.Requests, reread.Fetch.Requests)

	t.Run("other sinks", func(t *testing.T) {
		rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) {
			o.Sinks = []sink.Sink{h.sink}
			o.SinkNames = []string{"fs:elsewhere"}
		})
		if rep.Status != runreport.StatusOK || rep.Fetch.Requests <= again.Fetch.Requests {
			t.Errorf("new sink set: %s, %d requests", rep.Summary(), rep.Fetch.Requests)
		}
	})
	t.Run("records put outside a run", func(t *testing.T) {
		stale := staleRecords(t, h, want)
		rep := h.baseline(ctx, srv.URL, nil)
		if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(len(stale)) {
			t.Errorf("after PutResources: %s, want %d written", rep.Summary(), len(stale))
		}
	})
}

// TestPackageSkipAfterFailure: a package in which a resource failed is
// read again by the next run, which delivers that resource; the package
// delivered in full is skipped.
func TestPackageSkipAfterFailure(t *testing.T) {
	ctx := context.Background()
	srv, uris, h := sinkFixture(t, 60, 5)
	a := h.flaky("a")
	victim := uris[3]
	a.fail[victim] = true
	run := func() *runreport.Report {
		return h.baseline(ctx, srv.URL, func(o *pipeline.Options) {
			o.Sinks = []sink.Sink{a}
			o.SinkNames = []string{"fs:a"}
			o.SinkRetries = -1
		})
	}
	if rep := run(); rep.Status != runreport.StatusPartial || rep.Resources.Failed != 1 {
		t.Fatalf("first run: %s", rep.Summary())
	}
	a.mu.Lock()
	delete(a.fail, victim)
	a.mu.Unlock()
	rep := run()
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 1 || rep.Resources.Unchanged != int64(len(uris)-1) || rep.Bytes.Downloaded == 0 {
		t.Fatalf("second run: %s", rep.Summary())
	}
	third := run()
	if third.Bytes.Downloaded != 0 || third.Resources.Unchanged != int64(len(uris)) || third.Packages.Done != 2 {
		t.Fatalf("third run: %s", third.Summary())
	}
}
