package pipeline

import (
	"context"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// A Preview is one thing a dry run (Options.DryRun) would do: fetch a
// package (Length its declared bytes, -1 unknown), write a resource (its
// declared length) or delete one.
type Preview struct {
	Action string
	URI    string
	Length int64
	// Site is the registry site harvested (Options.Site; "": none).
	Site string
}

// The actions of a Preview.
const (
	PreviewFetch  = "fetch"
	PreviewWrite  = "write"
	PreviewDelete = "delete"
)

// previewing is a dry run's strategy: the plan is read — documents, and
// the indexes of the packages that hold what is not held already — and
// each resource the run would write or delete is told to
// Options.Preview; nothing is fetched of the resources, nothing written to
// the sinks, and the state is read only (dryStore).
type previewing struct{}

var _ strategy = previewing{}

func (previewing) readPackage(ctx context.Context, r *run, j source.Package, out chan<- entryJob) error {
	want, held, n, err := r.packageHeld(ctx, j)
	if err != nil {
		return err
	}
	if held {
		r.counts.PackageBytesDone.Add(max(j.Expect.Length, 0))
		return r.send(ctx, result{held: n, pkgDone: true})
	}
	r.preview(Preview{Action: PreviewFetch, URI: j.URL, Length: j.Expect.Length})
	return r.readIndex(ctx, j, want, out)
}

func (previewing) handle(ctx context.Context, r *run, j entryJob) result {
	e := j.rec
	if e.Change == source.Deleted && j.arch == nil && j.stream == nil {
		would, err := r.wouldDelete(ctx, e)
		if err != nil {
			return result{fatal: err}
		}
		if !would {
			return result{outcome: outSuperseded}
		}
		r.preview(Preview{Action: PreviewDelete, URI: e.URI, Length: -1})
		return result{outcome: outDeleted, resource: state.Resource{URI: e.URI, Source: r.opts.SourceKey, Length: -1, Outcome: state.OutcomeDeleted, Deleted: true}}
	}
	h, err := r.holding(ctx, e.URI, e.ChangeTime, fixity.Expect{Length: e.Length, Hashes: e.Hashes}, e.Version)
	switch {
	case err != nil:
		return result{fatal: err}
	case h.superseded:
		return result{outcome: outSuperseded}
	case h.all:
		rec := r.resourceOf(j)
		rec.Outcome = state.OutcomeUnchanged
		return result{outcome: outUnchanged, resource: rec, hadRecord: true}
	}
	r.preview(Preview{Action: PreviewWrite, URI: e.URI, Length: e.Length})
	rec := r.resourceOf(j)
	rec.Outcome, rec.Verified, rec.Length = state.OutcomeWritten, state.VerifiedHash, max(rec.Length, 0)
	return result{outcome: outWritten, resource: rec}
}

func (previewing) batch(*run, *pending) {}

func (previewing) commit(context.Context, *run, *pending) error { return nil }

func (previewing) finish(context.Context, *run) error { return nil }

// preview tells Options.Preview of p.
func (r *run) preview(p Preview) {
	if r.opts.Preview != nil {
		p.Site = r.opts.Site
		r.opts.Preview(p)
	}
}

// dryStore is the state as a dry run uses it: read as it is, written
// never.
type dryStore struct{ Store }

var _ Store = dryStore{}

func (dryStore) BeginRun(context.Context, state.Run) (int64, error) { return 0, nil }
func (dryStore) FinishRun(context.Context, int64, time.Time, string, []byte) error {
	return nil
}
func (dryStore) RunProgress(context.Context, int64, []byte) error { return nil }
func (dryStore) MarkInterrupted(context.Context, time.Time, string, *state.Lease) (int64, error) {
	return 0, nil
}
func (dryStore) Commit(context.Context, state.Batch) error                             { return nil }
func (dryStore) ForgetResources(context.Context, string, []string, *state.Lease) error { return nil }
func (dryStore) SetPackagesDone(context.Context, []state.PackageRecord) error          { return nil }
func (dryStore) PutDocument(context.Context, state.Document) error                     { return nil }
