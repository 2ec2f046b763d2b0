package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// Part names one part of a task spread over workers (state.CreateTask):
// the task, and the part's name as its planner's Parts gave it.
type Part struct {
	Task int64
	Name string
}

// Divide asks the planner of opts.Protocol to divide the task a run of
// mode over rng would plan (source.Parter): its parts, and the checkpoints
// (JSON, for state.Task.Checkpoints) the task reaches once every part has
// committed. No parts (nil) say the protocol, or this task, does not
// divide: run it whole.
func Divide(ctx context.Context, opts Options, mode source.Mode, rng Range) ([]string, []byte, error) {
	opts, cleanup, err := prepare(opts)
	if err != nil {
		return nil, nil, err
	}
	defer cleanup()
	r := newRun(opts)
	p, err := r.planner()
	if err != nil {
		return nil, nil, err
	}
	pr, ok := p.(source.Parter)
	if !ok {
		return nil, nil, nil
	}
	parts, cps, err := pr.Parts(ctx, r.task(mode, rng), holdings{r.opts.Store, r.opts.SourceKey})
	if err != nil || len(parts) == 0 {
		return nil, nil, err
	}
	js, err := json.Marshal(cps)
	if err != nil {
		return nil, nil, errclass.Fatalf("divide: %w", err)
	}
	return parts, js, nil
}

// partDone records, with the run's last batch, that the run executed its
// part whole: what it held back (its temporary failures by resource set),
// for CloseTask. It stands in for the checkpoints a whole task's run sets.
func (r *run) partDone(ctx context.Context, _ *runreport.Report) error {
	r.atMu.Lock()
	holds, err := json.Marshal(r.holds)
	r.atMu.Unlock()
	if err != nil {
		return errclass.Fatalf("part %q: %w", r.opts.Part.Name, err)
	}
	return r.commitBatch(ctx, state.Batch{Part: &state.PartDone{Task: r.opts.Part.Task, Name: r.opts.Part.Name, RunID: r.runID, Holds: holds}})
}

// ErrPartsLeft is wrapped by CloseTask's error when a part of the task has
// not been done.
var ErrPartsLeft = errors.New("parts of the task are not done")

// CloseTask ends task t once every part of it is done: each resource set's
// checkpoint is set as one run of the whole task would set it — the
// checkpoints the planner gave when dividing it, held at the earliest
// temporary failure any part met (a baseline's set not advanced at all,
// an incremental one at that failure) — the task's own run (t.RunID) is
// finished with the sum of its parts' reports, runs of its parts left
// running by workers that died are marked interrupted, and the task is
// closed. Closing a task again sets the same checkpoints. A part not done
// gives an error wrapping ErrPartsLeft, and nothing is set. opts needs
// Store, Source, SourceKey and the caller's Fence.
func CloseTask(ctx context.Context, opts Options, t state.Task) (*runreport.Report, error) {
	parts, err := opts.Store.TaskParts(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	opts.SourceKey = cmp.Or(opts.SourceKey, opts.Source)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &run{opts: opts, log: opts.Logger, runID: t.RunID}
	rep := &runreport.Report{Mode: t.Mode, Source: opts.Source, RunID: t.RunID, Started: t.Created}
	for _, p := range parts {
		if !p.Done {
			return nil, errclass.Retryablef("task %d: part %q: %w", t.ID, p.Name, ErrPartsLeft)
		}
		var holds map[string]time.Time
		if len(p.Holds) > 0 {
			if err := json.Unmarshal(p.Holds, &holds); err != nil {
				return nil, errclass.Fatalf("task %d: part %q: holds: %w", t.ID, p.Name, err)
			}
		}
		for set, at := range holds {
			r.noteHold(set, at, nil)
		}
		if p.RunID == 0 {
			rep.Failures = append(rep.Failures, runreport.Failure{URI: p.Name, Stage: "unit", Error: "the unit failed before its run began"})
			continue
		}
		run, err := opts.Store.Run(ctx, p.RunID)
		if err != nil {
			return nil, err
		}
		if prep, ok := runreport.Read(run.Report); ok {
			rep.Add(prep)
			if rep.Protocol == "" {
				rep.Protocol, rep.Sinks, rep.NoDigests = prep.Protocol, prep.Sinks, prep.NoDigests
			}
			if prep.Status == runreport.StatusFailed {
				rep.Failures = append(rep.Failures, runreport.Failure{URI: p.Name, Stage: "unit", Error: prep.Error})
			}
		}
	}
	if err := json.Unmarshal(t.Checkpoints, &r.checkpoints); err != nil {
		return nil, errclass.Fatalf("task %d: checkpoints: %w", t.ID, err)
	}
	switch source.Mode(t.Mode) {
	case source.Baseline:
		err = r.setBaselineCheckpoints(ctx, rep)
	case source.Incremental:
		err = r.setCheckpoints(ctx, rep)
	default:
		err = errclass.Fatalf("task %d: no such mode %q", t.ID, t.Mode)
	}
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	if n, err := opts.Store.MarkInterrupted(ctx, now, opts.Source); err != nil {
		return nil, err
	} else if n > 1 {
		r.log.Warn("parts of the task were begun by workers that stopped; others did them", "task", t.ID, "runs", n-1)
	}
	rep.Finished, rep.Status = now, runreport.StatusOK
	if rep.Resources.Failed > 0 || rep.Packages.Failed > 0 || len(rep.Failures) > 0 {
		rep.Status = runreport.StatusPartial
	}
	js, err := json.Marshal(rep)
	if err != nil {
		return nil, errclass.Fatalf("task %d: %w", t.ID, err)
	}
	if err := opts.Store.FinishRun(ctx, t.RunID, rep.Finished, rep.Status, js); err != nil {
		return nil, err
	}
	if err := opts.Store.CloseTask(ctx, t.ID); err != nil {
		return nil, fmt.Errorf("task %d: %w", t.ID, err)
	}
	return rep, nil
}

// GiveUpPart records part p done without its units — a run that failed for
// good (runID, 0 when none began) — holding every resource set of its task
// where the task began: CloseTask then advances no checkpoint, and the next
// harvest does the part's range again. A part another run did meanwhile
// stays done. It is fenced by fence, the part's lease (nil: not taken).
func GiveUpPart(ctx context.Context, store Store, fence *state.Lease, p Part, runID int64) error {
	holds, err := json.Marshal(map[string]time.Time{anySet: time.Unix(0, 0).UTC()})
	if err != nil {
		return errclass.Fatalf("part %q: %w", p.Name, err)
	}
	return store.Commit(ctx, state.Batch{Fence: fence, Part: &state.PartDone{Task: p.Task, Name: p.Name, RunID: runID, Holds: holds, GiveUp: true}})
}
