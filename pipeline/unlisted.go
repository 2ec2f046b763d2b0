package pipeline

import (
	"context"

	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// unlisted, after a whole plan (source.Protocol.WholeListing) was read
// without a failure that holds a set, goes through what the state holds of
// the source: each resource the plan did not name (as far as the Bloom
// filter of the names tells: a false positive only leaves one out) is no
// longer listed — deleted with Options.DeleteUnlisted (through the
// deletion guard, when there is one), reported as skipped otherwise.
func (r *run) unlisted(ctx context.Context, guard *deleteGuard, send func(context.Context, entryJob) error) error {
	if _, held := r.holdOf(anySet); held {
		r.log.Info("what is no longer listed is not looked for: part of the listing failed")
		return nil
	}
	var gone []string
	err := r.opts.Store.WalkResources(ctx, r.opts.SourceKey, func(res state.Resource) error {
		if res.Deleted || r.listed.mayHold(res.URI) || (res.Outcome != state.OutcomeWritten && res.Outcome != state.OutcomeUnchanged) {
			return nil
		}
		gone = append(gone, res.URI)
		if len(gone) < unlistedBatch {
			return nil
		}
		err := r.noLongerListed(ctx, gone, guard, send)
		gone = gone[:0]
		return err
	})
	if err != nil {
		return err
	}
	return r.noLongerListed(ctx, gone, guard, send)
}

// unlistedBatch bounds the URIs no longer listed held at once.
const unlistedBatch = 256

// noLongerListed deletes (Options.DeleteUnlisted) or reports uris.
func (r *run) noLongerListed(ctx context.Context, uris []string, guard *deleteGuard, send func(context.Context, entryJob) error) error {
	for _, uri := range uris {
		if !r.opts.DeleteUnlisted {
			if err := r.send(ctx, result{skip: &runreport.Skip{Package: r.opts.Source, Entry: uri, Reason: "no longer listed: kept (--delete-unlisted removes it)"}}); err != nil {
				return err
			}
			continue
		}
		// No change time: a listing's records carry none (its protocol
		// has versions), nor does their absence. A tombstone stamped now
		// would count as newer than the document listed again later, which
		// would then never be harvested.
		rec := &source.Record{URI: uri, Listed: r.opts.Source, Change: source.Deleted, Length: -1}
		j := entryJob{pkg: &source.Package{URL: r.opts.Source, Dump: r.opts.Source, List: true}, rec: rec, done: func() {}, ep: r.marks.enter()}
		if guard != nil {
			if err := guard.hold(ctx, j, send); err != nil {
				return err
			}
			continue
		}
		if err := send(ctx, j); err != nil {
			return err
		}
	}
	return nil
}
