package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// Range is the interval of an incremental run, inclusive at both ends. A
// zero From means "from the checkpoint of each resource set"; a zero Until
// means "up to now".
type Range struct {
	From, Until time.Time
}

// ErrNoCheckpoint is wrapped by Incremental's error when no --from was
// given and the state holds no checkpoint for the source: run a baseline
// first.
var ErrNoCheckpoint = source.ErrNoCheckpoint

// Incremental applies the latest change in rng of every resource, as the
// planner of the source's protocol plans an incremental task (from a
// ResourceSync source's Change Dumps or Lists, an OAI-PMH repository's
// records by datestamp): created and updated resources are written,
// deleted ones removed from every sink. Only packages holding a winning
// change not held already are downloaded. The outcome does not depend on
// the order in which packages are read. Checkpoints advance to the range's end (or the newest change seen, for an open dump),
// held back at the earliest temporary failure.
func Incremental(ctx context.Context, opts Options, rng Range) (*runreport.Report, error) {
	opts, cleanup, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if !rng.From.IsZero() && !rng.Until.IsZero() && rng.From.After(rng.Until) {
		return nil, errclass.Fatalf("--from %s is later than --until %s", rng.From.UTC().Format(time.RFC3339Nano), rng.Until.UTC().Format(time.RFC3339Nano))
	}
	r := newRun(opts)
	rep := &runreport.Report{Mode: "incremental", Source: opts.Source, Started: time.Now().UTC()}
	if err := r.begin(ctx, rep); err != nil {
		return nil, err
	}
	r.onFinish = r.setCheckpoints
	if opts.Part != nil {
		r.onFinish = r.partDone
	}
	runErr := r.execute(ctx, r.task(source.Incremental, rng))
	if !rng.From.IsZero() {
		f := rng.From
		rep.From = &f
	}
	if !rng.Until.IsZero() {
		u := rng.Until
		rep.Until = &u
	}
	return r.finish(ctx, rep, runErr)
}

// heldWin reports whether the destination holds win, a winning change of
// an incremental plan, already — its exact version (length and hashes) in
// every sink, or a newer change — so that it is not fetched; the change's
// time is then recorded, so that an older change read by a later run can
// never overwrite this version.
func (r *run) heldWin(ctx context.Context, win *source.Record) (bool, error) {
	h, err := r.holding(ctx, win.URI, win.ChangeTime, fixity.Expect{Length: win.Length, Hashes: win.Hashes}, win.Version)
	if err != nil || !(h.superseded || h.all) {
		return false, err
	}
	if h.superseded {
		return true, r.send(ctx, r.superseded(win.URI))
	}
	rec := h.prev
	rec.ChangeTime, rec.Outcome, rec.RunID, rec.Updated = win.ChangeTime, state.OutcomeUnchanged, r.runID, time.Time{}
	return true, r.send(ctx, result{outcome: outUnchanged, resource: rec, hadRecord: true, delivered: len(h.deliveries) > 0})
}

// superseded is the result of a change of uri older than the version
// held: nothing to do, but a retry of an older change is resolved.
func (r *run) superseded(uri string) result {
	return result{outcome: outSuperseded, resource: state.Resource{Source: r.opts.SourceKey, URI: uri}}
}

// unheld returns the winners of change package j (j.Wins) that the
// destination does not hold already, by URI.
func (r *run) unheld(ctx context.Context, j source.Package) (map[string]*source.Record, error) {
	want := make(map[string]*source.Record, len(j.Wins))
	for i := range j.Wins {
		w := &j.Wins[i]
		held, err := r.heldWin(ctx, w)
		if err != nil {
			return nil, err
		}
		if !held {
			want[w.URI] = w
		}
	}
	return want, nil
}

// deleteSuperseded reports whether delete c of a resource the state holds
// as prev changes nothing: a newer change is applied, or this very delete
// already was.
func deleteSuperseded(prev state.Resource, c *source.Record) bool {
	return !prev.ChangeTime.IsZero() && (prev.ChangeTime.After(c.ChangeTime) || (prev.Deleted && prev.ChangeTime.Equal(c.ChangeTime)))
}

// deleteRecord removes a resource whose winning change is a delete from
// every sink.
func (r *run) deleteRecord(ctx context.Context, c *source.Record, ep *epoch) result {
	prev, had, err := r.opts.Store.Resource(ctx, r.opts.SourceKey, c.URI)
	if err != nil {
		return result{fatal: err}
	}
	if had && deleteSuperseded(prev, c) {
		return r.superseded(c.URI)
	}
	rec := state.Resource{URI: c.URI, Source: r.opts.SourceKey, ResourceSet: c.ResourceSet, Length: -1, ChangeTime: c.ChangeTime,
		Package: c.Listed, RunID: r.runID, Outcome: state.OutcomeDeleted, Deleted: true}
	var failed error // a sink's failure: the others delete it all the same
	var gone []state.Delivery
	for _, s := range r.sinks {
		if err := r.deleteFrom(ctx, s, c.URI); err != nil {
			if errclass.IsFatal(err) {
				return result{fatal: err}
			}
			failed = sinksFailure(failed, err)
			continue
		}
		// This sink holds no version now: a delivery without length nor
		// digest, which holds nothing (see holds), for when another fails.
		gone = append(gone, state.Delivery{Source: r.opts.SourceKey, URI: c.URI, Sink: s.name, Length: -1, ChangeTime: c.ChangeTime})
	}
	if failed != nil {
		f := runreport.Failure{URI: c.URI, Package: c.Listed, Stage: "deliver", Error: failed.Error(), Permanent: errclass.IsPermanent(failed)}
		res := result{outcome: outFailed, hadRecord: true, failure: &f, changeTime: c.ChangeTime}
		if len(r.sinks) > 1 && had && !prev.Deleted {
			res.deliveries = gone
		}
		if f.Permanent {
			res.retry = c // the next run deletes it again
		} else {
			r.noteHold(c.ResourceSet, c.ChangeTime, ep)
		}
		return res
	}
	// A delete of what the destination never held, or holds deleted
	// already, changes nothing there: it is recorded (so that an older
	// change cannot bring the resource back) but not counted as deleted.
	return result{outcome: outDeleted, resource: rec, change: string(source.Deleted), nothingHeld: !had || prev.Deleted}
}

// deleteFrom deletes uri from one sink, within its concurrency and with
// its retries (see boundSink).
func (r *run) deleteFrom(ctx context.Context, s boundSink, uri string) error {
	if err := s.Delete(ctx, uri); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

var _ sink.Sink = boundSink{}

// setCheckpoints advances each resource set's checkpoint to where the plan
// leaves it (the range's end when --until was given, else the newest
// change seen, or where the run started when nothing was seen), held at
// the earliest temporary failure but never before where this run started.
func (r *run) setCheckpoints(ctx context.Context, rep *runreport.Report) error {
	now := time.Now().UTC()
	for _, sr := range r.checkpoints {
		next, held := sr.Next, false
		if hold, ok := r.holdOf(sr.ResourceSet); ok && hold.Before(next) {
			next, held = hold, true
			if next.Before(sr.From) {
				next = sr.From
			}
		}
		// A set held is not done: its progress marks stay, so that the
		// next run goes on from them rather than from the hold.
		cp := state.Checkpoint{Source: r.opts.SourceKey, ResourceSet: sr.ResourceSet, Next: next, Baseline: sr.Baseline, Open: sr.Open, RunID: r.runID, Updated: now,
			DescribedBy: sr.DescribedBy, KeepProgress: held}
		if err := r.commitBatch(ctx, state.Batch{Checkpoint: &cp}); err != nil {
			return err
		}
	}
	return nil
}
