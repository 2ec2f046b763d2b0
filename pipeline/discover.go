package pipeline

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// planner returns the planner of the run's protocol, served by the run:
// its documents are read by openDocument, its packages by the reader (unpack.Reader.OpenForPlan).
func (r *run) planner() (source.Planner, error) {
	p, err := r.opts.Protocol.New(r.opts.Settings, source.Services{
		Client:          r.opts.Client,
		Log:             r.log,
		OpenDocument:    r.openDocument,
		OpenPackage:     r.reader.OpenForPlan,
		MaxDocumentSize: r.opts.MaxDocumentSize,
		Concurrency:     r.opts.Concurrency,
		ScratchDir:      r.opts.SpoolDir,
	})
	if err != nil {
		return nil, errclass.Fatalf("%s: %w", r.opts.Protocol.Name, err)
	}
	return p, nil
}

// task is the run's task in mode.
func (r *run) task(mode source.Mode, rng Range) source.Task {
	t := source.Task{Source: r.opts.Source, Key: r.opts.SourceKey, Mode: mode, From: rng.From, Until: rng.Until, Set: r.opts.Set}
	if r.opts.Part != nil {
		t.Part, t.PartPlan = r.opts.Part.Name, r.opts.Part.Plan
	}
	for _, s := range r.sinks {
		t.Sinks = append(t.Sinks, s.name)
	}
	return t
}

// planTask plans task with the run's planner. Packages and records go to work;
// what the planner could not plan is recorded as the run's failures (a
// resource set it could not read holds that set's checkpoint), and the
// change documents it read are recorded in the state store (both through
// the commit stage).
func (r *run) planTask(ctx context.Context, task source.Task, work func(context.Context, source.Unit) error) ([]source.Checkpoint, error) {
	p, err := r.planner()
	if err != nil {
		return nil, err
	}
	cps, err := p.Plan(ctx, task, holdings{r.opts.Store, r.opts.SourceKey}, func(ctx context.Context, u source.Unit) error {
		u = source.Bounded(u) // no identifier of megabytes goes further
		if r.listed != nil {
			// Named, if badly or twice: not "no longer listed".
			switch {
			case u.Failure != nil:
				r.listed.add(u.Failure.URI)
			case u.Skip != nil:
				r.listed.add(u.Skip.URI)
			}
		}
		switch {
		case u.Failure != nil:
			r.planFailed(ctx, *u.Failure)
			return nil
		case u.Document != nil:
			d := u.Document
			return r.send(ctx, result{ep: r.marks.enter(), document: &state.ChangeDocument{URL: d.URL, Source: r.opts.SourceKey, ResourceSet: d.ResourceSet,
				Capability: d.Capability, From: d.From, Until: d.Until, Open: d.Until.IsZero(), RunID: r.runID}})
		case u.Skip != nil:
			return r.send(ctx, result{ep: r.marks.enter(), skip: &runreport.Skip{Package: u.Skip.Listed, Entry: u.Skip.URI, Reason: u.Skip.Reason}})
		case u.Mark != nil:
			r.marks.mark(*u.Mark) // an audit's listing never commits them
			return nil
		}
		return work(ctx, u)
	})
	// A document the source could not be read from is not read from its
	// copy next time either, if one was kept (it may be the copy that
	// failed).
	var se *source.SourceError
	if errors.As(err, &se) && se.URL != "" {
		r.forgetCopy(context.WithoutCancel(ctx), se.URL)
	}
	return cps, err
}

// planFailed records a failure the planner met. The copy kept of the
// document that listed what failed (for conditional requests) is
// forgotten, so that the next run reads the document itself again rather
// than the copy that failed.
func (r *run) planFailed(ctx context.Context, f source.Failure) {
	ep := r.marks.enter()
	for _, doc := range []string{f.Listed, f.Document} {
		if doc != "" {
			r.forgetCopy(ctx, doc)
		}
	}
	if f.WholeSet {
		set := f.ResourceSet
		if set == "" {
			set = anySet // which set is not known: it holds them all
		}
		r.setBroken(ctx, set, f.Err, f.At, ep)
		return
	}
	c := countsNone
	switch {
	case f.Package:
		c = countsPackage
	case f.Resource:
		c = countsResource
	}
	set := f.ResourceSet
	if set == "" {
		set = anySet
	}
	r.failIn(ctx, runreport.Failure{URI: f.URI, Package: f.Listed, Stage: f.Stage, Error: f.Err.Error(), Permanent: errclass.IsPermanent(f.Err)}, set, f.At, c, ep, f.Retry)
}

// forgetCopy forgets the copy of doc kept for conditional requests, once
// a run; a copy of doc this run would keep later is not kept (keepCopy).
func (r *run) forgetCopy(ctx context.Context, doc string) {
	r.docMu.Lock()
	defer r.docMu.Unlock()
	if r.forgotten[doc] {
		return
	}
	if r.forgotten == nil {
		r.forgotten = map[string]bool{}
	}
	r.forgotten[doc] = true
	if err := r.opts.Store.PutDocument(ctx, state.Document{URL: doc}); err != nil {
		r.log.Warn("could not forget a document's copy", "document", doc, "error", err)
	}
}

// keepCopy keeps d as the copy of its document for the next run's
// conditional request, unless this run forgot that document's copy: what
// it listed failed.
func (r *run) keepCopy(ctx context.Context, d state.Document) error {
	r.docMu.Lock()
	defer r.docMu.Unlock()
	if r.forgotten[d.URL] {
		return nil
	}
	return r.opts.Store.PutDocument(ctx, d)
}

// retryOf is the state's retry of record rec.
func (r *run) retryOf(rec *source.Record) state.Retry {
	js, _ := json.Marshal(rec)
	return state.Retry{Source: r.opts.SourceKey, URI: rec.URI, ResourceSet: rec.ResourceSet, Record: string(js), ChangeTime: rec.ChangeTime, RunID: r.runID}
}

// Retries returns the records of set whose own permanent failure is
// outstanding.
func (h holdings) Retries(ctx context.Context, set string) ([]source.Record, error) {
	rs, err := h.store.Retries(ctx, h.key, set)
	if err != nil {
		return nil, err
	}
	out := make([]source.Record, 0, len(rs))
	for _, r := range rs {
		rec := source.Record{URI: r.URI, ResourceSet: set, Length: -1}
		if err := json.Unmarshal([]byte(r.Record), &rec); err != nil || rec.URI != r.URI {
			rec = source.Record{URI: r.URI, ResourceSet: set, Length: -1} // asked for by its URI alone
		}
		out = append(out, rec)
	}
	return out, nil
}

func (h holdings) Checkpoint(ctx context.Context, set string) (source.Checkpoint, bool, error) {
	cp, ok, err := h.store.Checkpoint(ctx, h.key, set)
	if err != nil || !ok {
		return source.Checkpoint{}, ok, err
	}
	return source.Checkpoint{ResourceSet: set, Next: cp.Next, Baseline: cp.Baseline, Open: cp.Open}, true, nil
}

func (h holdings) Progress(ctx context.Context, set string) (map[string]string, error) {
	return h.store.Progress(ctx, h.key, set)
}
