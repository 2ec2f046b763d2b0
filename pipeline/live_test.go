package pipeline_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/state"
)

// gateSink is an fs sink whose Puts after the first open wait until gate
// closes.
type gateSink struct {
	*flakySink
	open int64
	puts atomic.Int64
	gate chan struct{}
}

func (g *gateSink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if g.puts.Add(1) > g.open {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.flakySink.Put(ctx, r, body)
}

// TestLiveCounts: while a run goes, its counts so far are in its report in
// the state (a status page shows them); its final report replaces them.
// The run's resources planned (a display's total) are all it finished.
func TestLiveCounts(t *testing.T) {
	srv, uris, h := sinkFixture(t, 30, 7)
	g := &gateSink{flakySink: h.flaky("gated"), open: 10, gate: make(chan struct{})}
	done := make(chan *runreport.Report, 1)
	var counts pipeline.Counts
	go func() {
		done <- h.baseline(t.Context(), srv.URL+"/resourcedump.xml", func(o *pipeline.Options) {
			o.Sinks, o.Workers, o.LiveEvery, o.Counts = []sink.Sink{g}, 1, 10*time.Millisecond, &counts
		})
	}()
	var live runreport.Report
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(g.gate)
			t.Fatalf("no live counts of 10 written; last: %+v", live)
		}
		runs, err := h.store.Runs(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 && runs[0].Status == state.StatusRunning {
			if rep, ok := runreport.Read(runs[0].Report); ok {
				live = *rep
				if live.Resources.Written == 10 {
					break
				}
			}
		}
	}
	if live.Mode != "baseline" || live.RunID == 0 {
		t.Errorf("the live report: %+v", live)
	}
	close(g.gate)
	rep := <-done
	if rep.Resources.Written != int64(len(uris)) {
		t.Fatalf("written %d of %d", rep.Resources.Written, len(uris))
	}
	// The display's totals: every resource planned, the plan read whole.
	if counts.Planned.Load() != int64(len(uris)) || !counts.PlanRead.Load() || counts.Done() != int64(len(uris)) {
		t.Errorf("planned %d, plan read %v, done %d; want %d, true, %[4]d", counts.Planned.Load(), counts.PlanRead.Load(), counts.Done(), len(uris))
	}
	run, err := h.store.Run(t.Context(), rep.RunID)
	if final, ok := runreport.Read(run.Report); err != nil || !ok || final.Status != runreport.StatusOK || final.Resources.Written != int64(len(uris)) {
		t.Errorf("the final report: %+v, %v", final, err)
	}
}
