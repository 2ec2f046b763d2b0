package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// Part names one part of a task spread over workers (state.CreateTask):
// the task, and the part's name and plan as its planner's Parts gave them
// (state.Store.TaskPartPlan); Fresh says the source held nothing when the
// task was divided (state.Task.Fresh): the part's run is a first load,
// whatever the other parts commit meanwhile.
type Part struct {
	Task  int64
	Name  string
	Plan  []byte
	Fresh bool
}

// Division is a task divided into parts (Divide): their names, each
// one's plan, kept on disk until Close, and the checkpoints the task
// reaches once every part has committed.
type Division struct {
	// Parts are the parts' names, in the order the planner gave them.
	Parts []string
	// Checkpoints are the task's checkpoints (JSON, for
	// state.Task.Checkpoints).
	Checkpoints []byte
	file        *os.File
	at          []int64 // where each part's plan begins in file, and its end
	cleanup     func()
}

// Plan returns part i's plan (nil when it has none), read from disk.
func (d *Division) Plan(i int) ([]byte, error) {
	if d.at[i+1] == d.at[i] {
		return nil, nil
	}
	b := make([]byte, d.at[i+1]-d.at[i])
	if _, err := d.file.ReadAt(b, d.at[i]); err != nil {
		return nil, errclass.Fatalf("divide: the plan of part %q: %w", d.Parts[i], err)
	}
	return b, nil
}

// Close removes the plans from disk.
func (d *Division) Close() {
	if d.file != nil {
		d.file.Close()
	}
	d.cleanup()
}

// Divide asks the planner of opts.Protocol to divide the task a run of
// mode over rng would plan (source.Parter), keeping each part's plan on
// disk (in opts.SpoolDir) as it comes, so that memory holds its names
// only: the caller closes the Division once the task is recorded. A nil
// Division (and no error) says the protocol, or this task, does not
// divide: run it whole.
func Divide(ctx context.Context, opts Options, mode source.Mode, rng Range) (_ *Division, err error) {
	opts, cleanup, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	d := &Division{cleanup: cleanup, at: []int64{0}}
	defer func() {
		if err != nil || d.Parts == nil {
			d.Close()
		}
	}()
	r := newRun(opts)
	p, err := r.planner()
	if err != nil {
		return nil, err
	}
	pr, ok := p.(source.Parter)
	if !ok {
		return nil, nil
	}
	if d.file, err = os.CreateTemp(opts.SpoolDir, "plans-"); err != nil {
		return nil, errclass.Fatalf("divide: %w", err)
	}
	cps, err := pr.Parts(ctx, r.task(mode, rng), holdings{r.opts.Store, r.opts.SourceKey}, func(ctx context.Context, name string, plan []byte) error {
		if _, err := d.file.Write(plan); err != nil {
			return errclass.Fatalf("divide: the plan of part %q: %w", name, err)
		}
		d.Parts = append(d.Parts, name)
		d.at = append(d.at, d.at[len(d.at)-1]+int64(len(plan)))
		return ctx.Err()
	})
	if errors.Is(err, source.ErrIndivisible) {
		r.log.Debug("the task does not divide", "why", err)
		d.Parts = nil
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(d.Parts) == 0 {
		return nil, errclass.Fatalf("divide: %s gave no part", opts.Protocol.Name)
	}
	if d.Checkpoints, err = json.Marshal(cps); err != nil {
		return nil, errclass.Fatalf("divide: %w", err)
	}
	return d, nil
}

// partDone records, with the run's last batch, that the run executed its
// part whole: what it held back (its temporary failures by resource set),
// for CloseTask, and the run's end (rep). It stands in for the checkpoints
// a whole task's run sets.
func (r *run) partDone(ctx context.Context, rep *runreport.Report) error {
	r.atMu.Lock()
	holds, err := json.Marshal(r.holds)
	r.atMu.Unlock()
	if err != nil {
		return errclass.Fatalf("part %q: %w", r.opts.Part.Name, err)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		return errclass.Fatalf("part %q: %w", r.opts.Part.Name, err)
	}
	// The run's report goes with the part: the harvest waiting for the
	// units sums it as soon as it sees the part done.
	return r.commitBatch(ctx, state.Batch{Part: &state.PartDone{Task: r.opts.Part.Task, Name: r.opts.Part.Name, RunID: r.runID, Holds: holds,
		Finished: rep.Finished, Status: rep.Status, Report: js}})
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
	if n, err := opts.Store.MarkInterrupted(ctx, now, opts.Source, opts.Fence); err != nil {
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
