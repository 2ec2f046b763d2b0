package pipeline

// The commit stage: the one goroutine that writes the state store during
// a run, batching outcomes and failures into transactions, and counting
// the report's figures from what each batch committed.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// commit is the only writer of the state store during a run (of the
// inventory, for an audit's listing): it batches outcomes and failures
// into transactions, which the run's strategy writes. The report's figures are counted from each batch once
// it has committed (see publish).
func (r *run) commit(ctx context.Context) error {
	const maxBatch = 500
	var p pending
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	flush := func(final bool) error {
		r.mode.batch(r, &p)
		if !final && p.b.Empty() && p.t.empty() && len(p.listed) == 0 {
			return nil
		}
		// Commit even while the run is being cancelled: outcomes that
		// reached a sink must be recorded.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.mode.commit(cctx, r, &p); err != nil {
			return err
		}
		r.publish(&p.b, &p.t)
		r.marks.leave(p.eps)
		p = pending{}
		if final {
			return r.mode.finish(cctx, r)
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			// Record every outcome still on its way (they reached a
			// sink): the stages close results once they have stopped.
			for res := range r.results {
				r.add(&p, res)
			}
			return errors.Join(ctx.Err(), flush(true))
		case <-tick.C:
			if err := flush(false); err != nil {
				return err
			}
		case res, ok := <-r.results:
			if !ok {
				return flush(true)
			}
			r.add(&p, res)
			if len(p.b.Resources)+len(p.b.Failures)+len(p.b.Deliveries)+len(p.listed) >= maxBatch {
				if err := flush(false); err != nil {
					return err
				}
			}
		}
	}
}

// pending is what the commit stage holds until its next transaction.
type pending struct {
	b      state.Batch
	t      tally
	listed []state.Listed // an audit's listing (see listing)
	eps    []*epoch       // the epochs of the results in b (see progress)
}

// tally is what a batch adds to the report beside its resource records:
// the resources unchanged with no record of their own, the failed
// resources, the packages ended, and the failures and skips to list.
type tally struct {
	unchanged, deleted, failed, pkgsDone, pkgsFailed int64
	failures                                         []runreport.Failure
	skips                                            []runreport.Skip
}

func (t *tally) empty() bool {
	return t.unchanged == 0 && t.deleted == 0 && t.failed == 0 && t.pkgsDone == 0 && t.pkgsFailed == 0 && len(t.failures) == 0 && len(t.skips) == 0
}

// publish adds a committed batch to the run's figures and report: its
// resource records by outcome, and its tally.
func (r *run) publish(b *state.Batch, t *tally) {
	c := r.counts
	for i := range b.Resources {
		switch rc := &b.Resources[i]; rc.Outcome {
		case state.OutcomeWritten:
			c.Written.Add(1)
			c.BytesWritten.Add(rc.Length)
			if rc.Verified != state.VerifiedHash {
				c.Unverified.Add(1)
			}
		case state.OutcomeUnchanged:
			c.Unchanged.Add(1)
		}
	}
	c.Unchanged.Add(t.unchanged)
	c.Deleted.Add(t.deleted)
	c.Failed.Add(t.failed)
	c.Skipped.Add(int64(len(t.skips)))
	c.PackagesDone.Add(t.pkgsDone)
	c.PackagesFailed.Add(t.pkgsFailed)
	for _, f := range t.failures {
		r.rec.fail(f)
	}
	for _, s := range t.skips {
		r.rec.skip(s)
	}
}

// settleBatches flushes the sinks that only queue writes (sink.Batcher)
// before their outcomes are recorded: a write a sink then reports failed is
// taken out of the batch (or, when committed earlier, forgotten by the
// state so the next run delivers it again) and recorded as a failure that
// holds the checkpoint unless permanent, and is kept as a retry if
// permanent. The other sinks' deliveries of it are kept, so only the
// failing sink gets it again.
func (r *run) settleBatches(ctx context.Context, b *state.Batch, t *tally) error {
	for _, s := range r.sinks {
		bs, ok := s.Sink.(sink.Batcher)
		if !ok {
			continue
		}
		for _, f := range bs.Flush(ctx) {
			if errclass.IsFatal(f.Err) {
				return fmt.Errorf("sink %s: %w", s.name, f.Err)
			}
			var rec *state.Resource
			kept := b.Resources[:0]
			for i := range b.Resources {
				if b.Resources[i].URI == f.URI && rec == nil {
					rc := b.Resources[i]
					rec = &rc
					continue
				}
				kept = append(kept, b.Resources[i])
			}
			b.Resources = kept
			was := rec // the version the write was of, if known: kept as a retry if permanent
			if rec == nil {
				// Committed earlier, or its outcome is still on its way
				// to the commit stage: forget it either way.
				if errclass.IsPermanent(f.Err) {
					held, ok, err := r.opts.Store.Resource(ctx, r.opts.SourceKey, f.URI)
					if err != nil {
						return err
					}
					if ok {
						was = &held
					}
				}
				if err := r.opts.Store.ForgetResources(ctx, r.opts.SourceKey, []string{f.URI}, r.opts.Fence); err != nil {
					return err
				}
				if r.lateFailed == nil {
					r.lateFailed = map[string][]string{}
				}
				r.lateFailed[f.URI] = append(r.lateFailed[f.URI], s.name)
			} else if len(r.sinks) > 1 && !rec.Deleted {
				for _, o := range r.sinks {
					if o.name != s.name {
						b.Deliveries = append(b.Deliveries, state.Delivery{Source: rec.Source, URI: rec.URI, Sink: o.name, Length: rec.Length, Hashes: rec.Hashes, ChangeTime: rec.ChangeTime})
					}
				}
			}
			fl := runreport.Failure{URI: f.URI, Stage: "deliver", Error: failureText(fmt.Sprintf("sink %s: %v", s.name, f.Err)), Permanent: errclass.IsPermanent(f.Err)}
			var ct time.Time
			if rec != nil {
				fl.Package, ct = rec.Package, rec.ChangeTime
			}
			t.failed++
			t.failures = append(t.failures, fl)
			switch {
			case !fl.Permanent:
				set := anySet
				if rec != nil {
					set = rec.ResourceSet
				}
				r.noteHold(set, ct, nil)
			case was != nil:
				// The checkpoint passes it: the next run asks for it
				// again, by its URI.
				retry := source.Record{URI: was.URI, ResourceSet: was.ResourceSet, Listed: was.Package, Length: -1, ChangeTime: was.ChangeTime}
				if was.Deleted {
					retry.Change = source.Deleted
				}
				b.Retries = append(b.Retries, r.retryOf(&retry))
			}
			r.log.Warn("sink failed a queued write", "sink", s.name, "uri", f.URI, "error", f.Err)
			b.Failures = append(b.Failures, state.Failure{RunID: r.runID, URI: fl.URI, Package: fl.Package, Stage: fl.Stage, Error: fl.Error, Permanent: fl.Permanent, ChangeTime: ct, At: time.Now().UTC()})
			b.Delivered = slices.DeleteFunc(b.Delivered, func(k state.Key) bool { return k.URI == f.URI })
		}
	}
	return nil
}

// add adds one result to what is pending.
func (r *run) add(p *pending, res result) {
	b, t := &p.b, &p.t
	if r.fresh != nil && res.resource.URI != "" {
		r.fresh.add(res.resource.URI)
	}
	if res.ep != nil {
		p.eps = append(p.eps, res.ep)
	}
	if res.listed != nil {
		p.listed = append(p.listed, *res.listed)
	}
	now := time.Now().UTC()
	if failedSinks, late := r.lateFailed[res.resource.URI]; late && (res.outcome == outWritten || res.outcome == outDeleted) {
		// A batching sink already reported this write failed (and the
		// failure is counted): it is not written, or deleted, after all;
		// the other sinks took the version written.
		delete(r.lateFailed, res.resource.URI)
		if res.outcome == outDeleted {
			return
		}
		for _, o := range r.sinks {
			if len(r.sinks) > 1 && !slices.Contains(failedSinks, o.name) {
				rc := &res.resource
				b.Deliveries = append(b.Deliveries, state.Delivery{Source: rc.Source, URI: rc.URI, Sink: o.name, Length: rc.Length, Hashes: rc.Hashes, ChangeTime: rc.ChangeTime})
			}
		}
		return
	}
	if res.retry != nil {
		b.Retries = append(b.Retries, r.retryOf(res.retry))
	}
	if res.outcome == outSuperseded {
		b.Resolved = append(b.Resolved, state.Key{Source: res.resource.Source, URI: res.resource.URI})
	}
	if res.failure != nil {
		f := res.failure
		f.Error = failureText(f.Error)
		b.Failures = append(b.Failures, state.Failure{RunID: r.runID, URI: f.URI, Package: f.Package, Stage: f.Stage, Error: f.Error, Permanent: f.Permanent, ChangeTime: res.changeTime, At: now})
		t.failures = append(t.failures, *f)
		switch {
		case res.outcome == outFailed, res.counts == countsResource:
			t.failed++
		case res.counts == countsPackage:
			t.pkgsFailed++
		}
	}
	if res.pkgDone {
		t.pkgsDone++
	}
	if res.skip != nil {
		t.skips = append(t.skips, *res.skip)
	}
	if res.document != nil {
		b.Documents = append(b.Documents, *res.document)
	}
	t.unchanged += res.held
	b.Deliveries = append(b.Deliveries, res.deliveries...)
	if res.delivered || res.outcome == outDeleted {
		b.Delivered = append(b.Delivered, state.Key{Source: res.resource.Source, URI: res.resource.URI})
	}
	if res.change != "" && (res.outcome == outWritten || res.outcome == outDeleted) {
		rc := &res.resource
		c := state.ChangeRecord{URI: rc.URI, Change: res.change, Datetime: rc.ChangeTime, RunID: r.runID, Package: rc.Package,
			Source: rc.Source, Length: rc.Length, Hashes: rc.Hashes, Type: rc.Type, Lastmod: rc.Lastmod}
		for _, l := range rc.Links {
			if l.Rel == "via" {
				c.Links = append(c.Links, l)
			}
		}
		if c.Lastmod.IsZero() {
			c.Lastmod = now // when it was fetched: its source gave no time
		}
		if res.outcome == outDeleted {
			c.Length, c.Hashes, c.Type, c.Lastmod = -1, fixity.Hashes{}, "", time.Time{}
		}
		b.Changes = append(b.Changes, c)
	}
	if v := res.resource.Version; v != "" && (res.outcome == outWritten || res.outcome == outUnchanged) {
		d := runreport.Document{URI: res.resource.URI, Outcome: runreport.DocHeld, Version: v}
		switch {
		case res.outcome == outWritten && res.prevVersion == "":
			d.Outcome = runreport.DocInserted
		case res.outcome == outWritten:
			d.Outcome, d.Previous = runreport.DocUpdated, res.prevVersion
		}
		r.rec.document(d)
	}
	switch res.outcome {
	case outSuperseded:
		if res.skip == nil { // a skip counts as skipped
			t.unchanged++
		}
	case outWritten, outUnchanged, outDeleted:
		switch {
		case res.outcome == outDeleted && res.nothingHeld:
			t.unchanged++ // nothing was there to delete
		case res.outcome == outDeleted:
			t.deleted++
		}
		r.book.noteOutcomes(res.resource.Package, 1)
		res.resource.Updated = now
		b.Resources = append(b.Resources, res.resource)
	case outFailed:
		// Keep the record of what the destination still holds; only a
		// resource never held gets a "failed" record.
		if !res.hadRecord {
			res.resource.Updated = now
			b.Resources = append(b.Resources, res.resource)
		}
	}
}

// maxFailureText is the most of a failure's error text the state and the
// report keep: a source's or a sink's own message, quoted in it, can be
// megabytes, and a run records up to one failure a resource.
const maxFailureText = 4096

// failureText is s cut to maxFailureText bytes, at a character's start,
// ending with "…" when cut.
func failureText(s string) string {
	if len(s) <= maxFailureText {
		return s
	}
	cut := maxFailureText - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
