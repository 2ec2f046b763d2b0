package pipeline_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/state"
)

// finishHook is a store whose FinishRun first calls before: what another
// process (the harvest waiting for the units) does at that instant.
type finishHook struct {
	pipeline.Store
	before func(id int64)
}

func (s finishHook) FinishRun(ctx context.Context, id int64, finished time.Time, status string, report []byte) error {
	if s.before != nil {
		s.before(id)
	}
	return s.Store.FinishRun(ctx, id, finished, status, report)
}

// TestCloseTaskSumsTheLastUnitsReport: the harvest waiting for the units
// may see the last part done at any moment after the unit's last batch,
// even before the unit's own FinishRun: CloseTask then still sums that
// unit's whole report, so the task's report (the site's run, what is
// mailed and logged) counts every record the units wrote.
func TestCloseTaskSumsTheLastUnitsReport(t *testing.T) {
	ctx := context.Background()
	const records = 40
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: records, PageSize: 10})
	srv := httptest.NewServer(repo)
	defer srv.Close()
	h := newHarness(t)
	opts := oaiOptions(h, srv.URL, &oaipmh.Planner{})
	d, err := pipeline.Divide(ctx, opts, source.Baseline, pipeline.Range{})
	if err != nil || d == nil {
		t.Fatalf("Divide: %v, %v", d, err)
	}
	defer d.Close()
	run, err := h.store.BeginRun(ctx, state.Run{Mode: "baseline", Source: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	task := state.Task{Source: srv.URL, Mode: "baseline", RunID: run, Checkpoints: d.Checkpoints}
	if task.ID, err = h.store.CreateTask(ctx, task, d.Parts, d.Plan, nil); err != nil {
		t.Fatal(err)
	}
	var (
		written int64
		closed  *runreport.Report
	)
	// The parts in reverse: the first (which holds the records) is the
	// last to finish.
	for i := len(d.Parts) - 1; i >= 0; i-- {
		name := d.Parts[i]
		plan, err := h.store.TaskPartPlan(ctx, task.ID, name)
		if err != nil {
			t.Fatal(err)
		}
		o := oaiOptions(h, srv.URL, &oaipmh.Planner{})
		o.Part = &pipeline.Part{Task: task.ID, Name: name, Plan: plan, Fresh: true}
		if i == 0 {
			// The waiting harvest polls right after the last unit's
			// last batch, before its FinishRun.
			o.Store = finishHook{Store: h.store, before: func(int64) {
				if closed != nil {
					return
				}
				if closed, err = pipeline.CloseTask(ctx, pipeline.Options{Store: h.store, Source: srv.URL}, task); err != nil {
					t.Errorf("CloseTask: %v", err)
				}
			}}
		}
		rep, err := pipeline.Baseline(ctx, o)
		if err != nil {
			t.Fatalf("unit %s: %v", name, err)
		}
		written += rep.Resources.Written
	}
	if written != records {
		t.Fatalf("the units wrote %d records, want %d", written, records)
	}
	if closed == nil {
		t.Fatal("CloseTask was not called")
	}
	if closed.Resources.Written != written {
		t.Errorf("the task's report: %d written; the units wrote %d", closed.Resources.Written, written)
	}
}
