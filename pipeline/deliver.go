package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/internal/retry"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/resourcesync"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/unzip"
)

// outcome of one entry.
type outcome int

const (
	outWritten outcome = iota + 1
	outUnchanged
	outDeleted
	outSuperseded // an older change than the one the state holds; nothing to do
	outFailed
)

// result is what the commit stage receives: a resource's outcome, a
// failure recorded elsewhere (failure set, resource empty), the end of a
// package, a skipped entry, or a change document read. The report's
// figures are counted from results as they commit (see tally), never by
// the stages that send them.
type result struct {
	outcome    outcome
	resource   state.Resource
	hadRecord  bool
	failure    *Failure
	changeTime time.Time
	fatal      error
	// counts says which figure a failure without an outcome adds to.
	counts counted
	// held is how many resources of a package not read because the
	// destination holds them all are unchanged (they have no result of
	// their own).
	held int64
	// pkgDone ends a package read in full.
	pkgDone bool
	// skip is an entry of a package not delivered, not a failure.
	skip *Skip
	// document is a change document the plan read.
	document *state.ChangeDocument
	// listed is a resource an audit's listing names (see run.listing).
	listed *state.Listed
	// change is the change type applied (incremental runs), or "".
	change string
	// deliveries are the sinks that took this version while another sink
	// failed; delivered says every sink now holds it (clear deliveries).
	deliveries []state.Delivery
	delivered  bool
	// ep is the epoch of the unit the planner emitted (see progress), or
	// nil.
	ep *epoch
	// retry is a record whose own permanent failure this is: the next
	// run asks for it again (see state.Retry).
	retry *source.Record
}

// counted is the figure of the report a failure adds to, beside its place
// in the list of failures.
type counted int

const (
	countsNone     counted = iota // a resource set's failure, or a note on an entry delivered
	countsResource                // a resource failed
	countsPackage                 // a whole package failed
)

// deliverEntry verifies one manifest entry and writes it to every sink,
// unless the state store says the destination already holds these exact
// bytes.
func (r *run) deliverEntry(ctx context.Context, j entryJob) result {
	e := j.rec
	rec := state.Resource{
		URI: e.URI, Source: r.opts.SourceKey, ResourceSet: j.pkg.ResourceSet,
		Length: e.Length, Hashes: e.Hashes, Type: e.Type, Lastmod: e.Lastmod,
		ChangeTime: e.ChangeTime, Package: j.pkg.URL, RunID: r.runID,
	}
	for _, l := range e.Links {
		if l.Rel == "describedby" || l.Rel == "describes" || l.Rel == "collection" || l.Rel == "canonical" || l.Rel == "alternate" {
			rec.Links = append(rec.Links, state.Link{Rel: l.Rel, Href: l.Href, Type: l.Type})
		}
	}
	want := fixity.Expect{Length: e.Length, Hashes: e.Hashes}
	h, err := r.holding(ctx, e.URI, e.ChangeTime, want)
	if err != nil {
		return result{fatal: err}
	}
	prev, had := h.prev, h.had
	failed := func(stage string, err error) result {
		if errclass.IsFatal(err) {
			return result{fatal: fmt.Errorf("%s: %w", e.URI, err)}
		}
		if j.stream != nil && j.stream.leave() {
			return result{} // phase 2 delivers it (stream.go)
		}
		f := Failure{URI: e.URI, Package: j.pkg.URL, Stage: stage, Error: err.Error(), Permanent: errclass.IsPermanent(err)}
		r.log.Warn("resource failed", "uri", e.URI, "package", j.pkg.URL, "stage", stage, "error", err)
		if !f.Permanent {
			r.noteHold(j.pkg.ResourceSet, rec.ChangeTime, j.ep)
		}
		rec.Outcome = "failed"
		res := result{outcome: outFailed, resource: rec, hadRecord: had, failure: &f, changeTime: rec.ChangeTime}
		if f.Permanent {
			res.retry = e
		}
		return res
	}
	if err := absoluteURI(e.URI); err != nil {
		return failed("manifest", err)
	}
	if want.Hashes.IsZero() && r.opts.RequireHash {
		return failed("verify", errclass.Permanentf("no md5, sha-1, sha-256 or sha-512 hash to verify against, and --require-hash is set"))
	}
	// Where the bytes come from: the package's ZIP entry, or (lists) the
	// resource's URL and its mirrors.
	var sources []entryOpener
	if j.stream != nil {
		// Read by its local header while the package downloads (stream.go).
		if want.Length >= 0 && j.stream.local.Size != want.Length {
			return failed("verify", fmt.Errorf("%w: length: ZIP entry %q holds %d bytes, the manifest says %d", errclass.NewPermanent(fixity.ErrMismatch), e.Path, j.stream.local.Size, want.Length))
		}
		sources = []entryOpener{j.stream}
	} else if j.arch != nil {
		if e.Path == "" {
			return failed("manifest", errclass.Permanentf("manifest entry has no path"))
		}
		// Look the entry up even when unchanged: it marks the entry as
		// listed and checks the manifest against the package's inventory.
		f, err := j.arch.Lookup(e.Path)
		if err != nil {
			return failed("unzip", err) // it names the path and the entry
		}
		if want.Length >= 0 && f.Size != want.Length {
			return failed("verify", fmt.Errorf("%w: length: ZIP entry %q holds %d bytes, the manifest says %d", errclass.NewPermanent(fixity.ErrMismatch), e.Path, f.Size, want.Length))
		}
		sources = []entryOpener{zipEntry{f}}
	} else if e.Open != nil {
		sources = []entryOpener{recordBody(e.Open)} // the record carries its body
	} else {
		locs := mirrors(e)
		if err := resourcesync.CheckLoc(e.URI); err == nil {
			locs = append([]string{e.URI}, locs...)
		} else if len(locs) == 0 {
			return failed("document", err)
		}
		// A loc that is not a URL (an OAI-PMH identifier republished)
		// identifies the resource; its bytes come from its mirrors.
		for _, u := range locs {
			sources = append(sources, &httpEntry{client: r.opts.Client, url: u})
		}
		// Without a hash to compare, ask the server whether what the
		// destination holds is still current (conditional GET).
		if want.Hashes.IsZero() && had && !prev.Deleted && (prev.Outcome == state.OutcomeWritten || prev.Outcome == state.OutcomeUnchanged) {
			h := sources[0].(*httpEntry)
			h.ifNoneMatch, h.ifModifiedSince = prev.ETag, prev.LastModified
		}
	}
	if h.superseded {
		// A newer change is already applied (an earlier run covered a
		// later range): never let an older change overwrite it.
		return result{outcome: outSuperseded}
	}
	already, deliveries := h.already, h.deliveries
	if h.all {
		rec.Outcome = "unchanged"
		rec.ETag, rec.LastModified = prev.ETag, prev.LastModified
		return result{outcome: outUnchanged, resource: rec, hadRecord: true, delivered: len(deliveries) > 0}
	}
	res := &sink.Resource{URI: e.URI, Length: e.Length, Hashes: e.Hashes, Type: e.Type, Lastmod: e.Lastmod, ResourceSet: j.pkg.ResourceSet, Sets: e.Sets, About: e.About}
	for _, l := range rec.Links {
		res.Links = append(res.Links, sink.Link{Rel: l.Rel, Href: l.Href, Type: l.Type})
	}
	var took []state.Delivery
	for _, s := range r.sinks {
		if already[s.name] {
			continue
		}
		n, err := r.putFrom(ctx, s, res, sources, want, &rec)
		if errors.Is(err, fetch.ErrNotModified) {
			rec.Outcome = state.OutcomeUnchanged
			rec.Length, rec.Hashes = prev.Length, prev.Hashes
			rec.ETag, rec.LastModified = prev.ETag, prev.LastModified
			return result{outcome: outUnchanged, resource: rec, hadRecord: true}
		}
		if err != nil {
			if errors.Is(err, fixity.ErrMismatch) || len(r.sinks) == 1 {
				return failed("deliver", err)
			}
			// This sink failed: record the failure for it, and the
			// sinks that took this version, so the next run delivers
			// only to the sinks that lack it.
			out := failed("deliver", fmt.Errorf("sink %s: %w", s.name, err))
			for _, o := range r.sinks {
				if already[o.name] {
					took = append(took, state.Delivery{Source: r.opts.SourceKey, URI: e.URI, Sink: o.name, Length: want.Length, Hashes: want.Hashes, ChangeTime: rec.ChangeTime})
				}
			}
			out.deliveries = took
			return out
		}
		rec.Length = n
		took = append(took, state.Delivery{Source: r.opts.SourceKey, URI: e.URI, Sink: s.name, Length: n, Hashes: want.Hashes, ChangeTime: rec.ChangeTime})
	}
	rec.Outcome = state.OutcomeWritten
	rec.Verified = verifiedBy(want, j.stream != nil || j.arch != nil)
	return result{outcome: outWritten, resource: rec, hadRecord: had, change: appliedChange(e.Change, had, prev), delivered: len(r.sinks) > 1}
}

// appliedChange is the change a write makes to the destination: the one
// the record reports, else (a snapshot's record) created when the
// destination held no copy and updated when it held another version.
func appliedChange(c source.Change, had bool, prev state.Resource) string {
	switch {
	case c != "":
		return string(c)
	case !had || prev.Deleted || prev.Outcome == state.OutcomeFailed:
		return state.ChangeCreated
	}
	return state.ChangeUpdated
}

// holding is what the destination holds of a resource: the state's
// record (prev, when had), whether a newer change than the one at hand is
// applied (superseded), the sinks that took a version while another sink
// failed (deliveries), the sinks that hold the version at hand (already),
// and whether every sink does (all).
type holding struct {
	prev       state.Resource
	had        bool
	superseded bool
	deliveries []state.Delivery
	already    map[string]bool
	all        bool
}

// holding answers, for every kind of unit, "is this already held?": for
// the version of uri changed at changeTime (zero: unknown) whose bytes
// must match want. A sink holds it when the state's record matches want,
// unless a partial delivery (another sink failed in an earlier run) says
// otherwise.
func (r *run) holding(ctx context.Context, uri string, changeTime time.Time, want fixity.Expect) (holding, error) {
	var h holding
	var err error
	if h.prev, h.had, err = r.opts.Store.Resource(ctx, r.opts.SourceKey, uri); err != nil {
		return h, err
	}
	h.superseded = h.had && !h.prev.ChangeTime.IsZero() && h.prev.ChangeTime.After(changeTime)
	if len(r.sinks) > 1 {
		if h.deliveries, err = r.opts.Store.Deliveries(ctx, r.opts.SourceKey, uri); err != nil {
			return h, err
		}
	}
	h.already = map[string]bool{}
	for _, s := range r.sinks {
		holder, has := h.prev, h.had
		for _, d := range h.deliveries {
			if d.Sink == s.name {
				holder, has = state.Resource{Outcome: state.OutcomeWritten, Length: d.Length, Hashes: d.Hashes}, true
			}
		}
		if has && holds(holder, want) {
			h.already[s.name] = true
		}
	}
	h.all = len(h.already) == len(r.sinks)
	return h, nil
}

// entryOpener opens the bytes of a resource: a ZIP entry, or a GET.
type entryOpener interface {
	Open(ctx context.Context) (io.ReadCloser, error)
}

// recordBody opens the body a record carries.
type recordBody func(ctx context.Context) (io.ReadCloser, error)

func (b recordBody) Open(ctx context.Context) (io.ReadCloser, error) { return b(ctx) }

// zipEntry opens an entry of an unpacked package.
type zipEntry struct{ f *unzip.File }

func (z zipEntry) Open(context.Context) (io.ReadCloser, error) {
	rc, err := z.f.Open()
	if err != nil {
		return nil, fmt.Errorf("open ZIP entry: %w", err)
	}
	return rc, nil
}

// httpEntry opens a resource by GET (lists), remembering its validators;
// with ifNoneMatch or ifModifiedSince the GET is conditional.
type httpEntry struct {
	client                       *fetch.Client
	url                          string
	etag, lastModified           string
	ifNoneMatch, ifModifiedSince string
}

func (h *httpEntry) Open(ctx context.Context) (io.ReadCloser, error) {
	b, err := h.client.OpenIfChanged(ctx, h.url, h.ifNoneMatch, h.ifModifiedSince)
	if err != nil {
		return nil, err
	}
	h.etag, h.lastModified = b.ETag, b.LastModified
	return b, nil
}

func (h *httpEntry) String() string { return h.url }

// mirrors returns an entry's rel="duplicate" locations, by priority.
func mirrors(e *source.Record) []string {
	var ls []source.Link
	for _, l := range e.Links {
		if l.Rel == "duplicate" && resourcesync.CheckLoc(l.Href) == nil {
			ls = append(ls, l)
		}
	}
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].Pri < ls[j].Pri })
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Href
	}
	return out
}

// putFrom puts from the first source that works: a resource's mirrors
// (rel="duplicate", by pri) are tried in turn when its primary location
// fails.
func (r *run) putFrom(ctx context.Context, s boundSink, res *sink.Resource, sources []entryOpener, want fixity.Expect, rec *state.Resource) (int64, error) {
	var err error
	for i, src := range sources {
		var n int64
		n, err = r.putRetrying(ctx, s, res, src, want)
		if err == nil {
			if h, ok := src.(*httpEntry); ok {
				rec.ETag, rec.LastModified = h.etag, h.lastModified
			}
			return n, nil
		}
		if errclass.IsFatal(err) || errors.Is(err, fetch.ErrNotModified) || ctx.Err() != nil || i == len(sources)-1 {
			break
		}
		r.log.Warn("location failed; trying a mirror", "uri", res.URI, "error", err, "mirror", sources[i+1])
	}
	return 0, err
}

// putRetrying puts with retries of a sink's temporary failures (the entry
// is read again from the package each time), with exponential backoff.
func (r *run) putRetrying(ctx context.Context, s boundSink, res *sink.Resource, f entryOpener, want fixity.Expect) (int64, error) {
	var n int64
	err := r.sinkRetrying(ctx, s, res.URI, func() error {
		var err error
		n, err = r.put(ctx, s, res, f, want)
		return err
	}, func(err error) bool {
		// Bytes that do not match, or a source that cannot be read, are
		// not the sink's to retry.
		var se *sourceError
		return !errors.Is(err, fixity.ErrMismatch) && !errors.As(err, &se)
	})
	return n, err
}

// sinkRetrying runs try until it succeeds, fails with an error that is not
// retryable (or that again rejects), SinkRetries retries are used up, or ctx
// ends, waiting with exponential backoff from SinkBackoff between tries.
func (r *run) sinkRetrying(ctx context.Context, s boundSink, uri string, try func() error, again func(error) bool) error {
	err := retry.Do(ctx, retry.Policy{
		Retries: r.opts.SinkRetries,
		Initial: r.opts.SinkBackoff,
		Max:     20 * r.opts.SinkBackoff,
		Retryable: func(err error) bool {
			return errclass.IsRetryable(err) && (again == nil || again(err))
		},
		Notify: func(rt retry.Retry) {
			r.log.Debug("sink call failed; retrying", "sink", s.name, "uri", uri, "attempt", rt.Attempt-1, "in", rt.Wait, "error", rt.Err)
		},
	}, try)
	return err
}

// put streams one entry into one sink through a verifying reader, so the
// sink commits only bytes that matched the manifest.
func (r *run) put(ctx context.Context, s boundSink, res *sink.Resource, f entryOpener, want fixity.Expect) (int64, error) {
	// Open the source first (for a GET, its latency is paid here), then
	// take one of the sink's write slots.
	rc, err := f.Open(ctx)
	if err != nil {
		return 0, &sourceError{err}
	}
	defer rc.Close()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case s.sem <- struct{}{}:
	}
	defer func() { <-s.sem }()
	vr := fixity.NewReader(sourceReader{rc}, want, fixity.Compute{})
	if err := s.Put(ctx, res, vr); err != nil {
		// A sink reports the body's error (fixity, ZIP) wrapped; keep its
		// class when it has one, else the sink's failure is retryable.
		if errclass.Of(err) == errclass.Unclassified {
			err = errclass.NewRetryable(err)
		}
		return 0, err
	}
	if !vr.Verified() {
		return 0, errclass.Fatalf("sink returned before reading the whole body: a sink bug; nothing unverified may be committed")
	}
	return vr.N(), nil
}

// sourceError marks a failure to read the resource's source (the HTTP
// client already retried it; the sink is not to blame).
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// sourceReader tags the errors of a source's reads.
type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = &sourceError{err}
	}
	return n, err
}

// verifiedBy names the check that bytes delivered against want passed:
// every expected digest, or without one the declared length and (inZIP)
// the entry's CRC-32, which unzip checks on every read.
func verifiedBy(want fixity.Expect, inZIP bool) string {
	switch {
	case !want.Hashes.IsZero():
		return state.VerifiedHash
	case inZIP && want.Length >= 0:
		return state.VerifiedLengthCRC
	case inZIP:
		return state.VerifiedCRC
	case want.Length >= 0:
		return state.VerifiedLength
	}
	return state.VerifiedNone
}

// holds reports whether a state record shows the destination holding a
// representation with the expected length and hashes.
func holds(prev state.Resource, want fixity.Expect) bool {
	if prev.Deleted || (prev.Outcome != "written" && prev.Outcome != "unchanged") {
		return false
	}
	if want.Length >= 0 && prev.Length != want.Length {
		return false
	}
	return prev.Hashes.Agree(want.Hashes)
}

// absoluteURI checks that a resource's <loc> is usable as an identity.
func absoluteURI(loc string) error {
	if loc == "" {
		return errclass.Permanentf("empty loc")
	}
	return nil
}

// commit is the only writer of the state store during a run (of the
// inventory, for an audit's listing): it batches outcomes and failures
// into transactions. The report's figures are counted from each batch once
// it has committed (see publish).
func (r *run) commit(ctx context.Context) error {
	const maxBatch = 500
	var p pending
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	flush := func(final bool) error {
		if r.listing == nil {
			p.b.Progress = append(p.b.Progress, r.readyMarks()...)
		}
		if !final && p.b.Empty() && p.t.empty() && len(p.listed) == 0 {
			return nil
		}
		// Commit even while the run is being cancelled: outcomes that
		// reached a sink must be recorded.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if r.listing != nil {
			if err := r.listing.AddListed(cctx, p.listed); err != nil {
				return err
			}
		} else {
			if err := r.settleBatches(cctx, &p.b, &p.t); err != nil {
				return err
			}
			if err := r.opts.Store.Commit(cctx, p.b); err != nil {
				return err
			}
		}
		r.publish(&p.b, &p.t)
		r.marks.leave(p.eps)
		p = pending{}
		if final && r.listing == nil {
			// The marks this last batch made ready.
			return r.opts.Store.Commit(cctx, state.Batch{Progress: r.readyMarks()})
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
	listed []state.Listed // an audit's listing (see run.listing)
	eps    []*epoch       // the epochs of the results in b (see progress)
}

// tally is what a batch adds to the report beside its resource records:
// the resources unchanged with no record of their own, the failed
// resources, the packages ended, and the failures and skips to list.
type tally struct {
	unchanged, failed, pkgsDone, pkgsFailed int64
	failures                                []Failure
	skips                                   []Skip
}

func (t *tally) empty() bool {
	return t.unchanged == 0 && t.failed == 0 && t.pkgsDone == 0 && t.pkgsFailed == 0 && len(t.failures) == 0 && len(t.skips) == 0
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
		case state.OutcomeDeleted:
			c.Deleted.Add(1)
		case state.OutcomeUnchanged:
			c.Unchanged.Add(1)
		}
	}
	c.Unchanged.Add(t.unchanged)
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
// holds the checkpoint unless permanent. The other sinks' deliveries of it
// are kept, so only the failing sink gets it again.
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
			if rec == nil {
				// Committed earlier, or its outcome is still on its way
				// to the commit stage: forget it either way.
				if err := r.opts.Store.ForgetResources(ctx, r.opts.SourceKey, []string{f.URI}); err != nil {
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
			fl := Failure{URI: f.URI, Stage: "deliver", Error: fmt.Sprintf("sink %s: %v", s.name, f.Err), Permanent: errclass.IsPermanent(f.Err)}
			var ct time.Time
			if rec != nil {
				fl.Package, ct = rec.Package, rec.ChangeTime
			}
			t.failed++
			t.failures = append(t.failures, fl)
			if !fl.Permanent {
				set := anySet
				if rec != nil {
					set = rec.ResourceSet
				}
				r.noteHold(set, ct, nil)
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
	if res.retry != nil && r.listing == nil {
		b.Retries = append(b.Retries, r.retryOf(res.retry))
	}
	if res.outcome == outSuperseded {
		b.Resolved = append(b.Resolved, state.Key{Source: res.resource.Source, URI: res.resource.URI})
	}
	if res.failure != nil {
		f := res.failure
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
			Source: rc.Source, Length: rc.Length, Hashes: rc.Hashes, Type: rc.Type}
		if res.outcome == outDeleted {
			c.Length, c.Hashes, c.Type = -1, fixity.Hashes{}, ""
		}
		b.Changes = append(b.Changes, c)
	}
	switch res.outcome {
	case outSuperseded:
		t.unchanged++
	case outWritten, outUnchanged, outDeleted:
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
