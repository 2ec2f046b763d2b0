package pipeline

import (
	"context"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// strategy is what a run does with what its plan names; the stage graph
// (run.execute) is the same either way. A harvest delivers every entry and
// record to the sinks and commits to the state store (delivering); an
// audit lists them into its inventory, fetching only what lists them, and
// writes nothing to the sinks or the state store (listing).
type strategy interface {
	// readPackage obtains package j's entries and hands them to the
	// workers on out; it records the package's own failures and returns
	// only a cancelled run or a fatal error.
	readPackage(ctx context.Context, r *run, j source.Package, out chan<- entryJob) error
	// handle is a worker's work on one entry or record.
	handle(ctx context.Context, r *run, j entryJob) result
	// batch adds to the commit stage's next batch what the strategy keeps
	// besides outcomes (a harvest's progress marks made ready).
	batch(r *run, p *pending)
	// commit writes a batch.
	commit(ctx context.Context, r *run, p *pending) error
	// finish writes what the last batch left ready.
	finish(ctx context.Context, r *run) error
}

// delivering is a harvest's strategy.
type delivering struct{}

var _ strategy = delivering{}

func (delivering) readPackage(ctx context.Context, r *run, j source.Package, out chan<- entryJob) error {
	if skip, err := r.skipPackage(ctx, j); err != nil || skip {
		return err
	}
	return r.readPackage(ctx, j, out)
}

func (delivering) handle(ctx context.Context, r *run, j entryJob) result {
	if j.rec.Change == source.Deleted && j.arch == nil && j.stream == nil {
		return r.deleteRecord(ctx, j.rec, j.ep)
	}
	return r.deliverEntry(ctx, j)
}

func (delivering) batch(r *run, p *pending) {
	p.b.Progress = append(p.b.Progress, r.readyMarks()...)
}

func (delivering) commit(ctx context.Context, r *run, p *pending) error {
	if err := r.settleBatches(ctx, &p.b, &p.t); err != nil {
		return err
	}
	return r.commitBatch(ctx, p.b)
}

func (delivering) finish(ctx context.Context, r *run) error {
	// The marks the last batch made ready.
	return r.commitBatch(ctx, state.Batch{Progress: r.readyMarks()})
}

// listing is an audit's strategy: what the plan names — every record,
// every entry of every package's index — is recorded in inv.
type listing struct {
	inv *state.Inventory
}

var _ strategy = listing{}

// readPackage reads only what package j lists (readIndex).
func (listing) readPackage(ctx context.Context, r *run, j source.Package, out chan<- entryJob) error {
	return r.readIndex(ctx, j, nil, out)
}

// readIndex hands the workers the entries package j lists (only the
// winners in want, when want is not nil), reading only its listing: the
// copy of its index it links when there is one, else its index entry, by
// Range where the server allows, else downloaded.
func (r *run) readIndex(ctx context.Context, j source.Package, want map[string]*source.Record, out chan<- entryJob) error {
	if j.Contents != "" {
		entries, closeDoc, err := r.openContents(ctx, j)
		if err == nil {
			defer closeDoc()
			return r.reader.ReadListing(ctx, unpackHost{r, out}, j, entries, want)
		}
		if ctx.Err() != nil || errclass.IsFatal(err) {
			return err
		}
		r.log.Debug("manifest copy unreadable; reading the package", "url", j.Contents, "error", err)
	}
	return r.reader.ReadIndex(ctx, j, want, unpackHost{r, out})
}

// handle lists what j names, unless the source reports it deleted (an
// OAI-PMH deleted header): that is not to be held.
func (listing) handle(_ context.Context, _ *run, j entryJob) result {
	if j.rec.Change == source.Deleted && j.arch == nil && j.stream == nil {
		return result{}
	}
	return result{listed: &state.Listed{URI: j.rec.URI, Length: j.rec.Length, Hashes: j.rec.Hashes, Where: j.pkg.URL}}
}

func (listing) batch(*run, *pending) {}

func (l listing) commit(ctx context.Context, _ *run, p *pending) error {
	return l.inv.AddListed(ctx, p.listed)
}

func (listing) finish(context.Context, *run) error { return nil }
