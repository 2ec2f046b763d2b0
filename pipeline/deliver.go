package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
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
	outcome   outcome
	resource  state.Resource
	hadRecord bool
	// prevVersion is the version held before a write replaced it ("":
	// none, or none named).
	prevVersion string
	// nothingHeld marks a delete of what the destination did not hold: it
	// is recorded, not counted as deleted.
	nothingHeld bool
	failure     *runreport.Failure
	changeTime  time.Time
	fatal       error
	// counts says which figure a failure without an outcome adds to.
	counts counted
	// held is how many resources of a package not read because the
	// destination holds them all are unchanged (they have no result of
	// their own).
	held int64
	// pkgDone ends a package read in full.
	pkgDone bool
	// skip is an entry of a package not delivered, not a failure.
	skip *runreport.Skip
	// document is a change document the plan read.
	document *state.ChangeDocument
	// listed is a resource an audit's listing names (see listing).
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

// deliverEntry verifies one entry (of a package, or a record outside one)
// and writes it to every sink, unless the state store says the
// destination already holds these exact bytes: what is held decides
// (holding), the entry says where its bytes come from (bytesOf), and the
// sinks that lack this version take it (deliverAll).
func (r *run) deliverEntry(ctx context.Context, j entryJob) result {
	e := j.rec
	if err := source.CheckURI(e.URI); err != nil {
		f := runreport.Failure{URI: source.ShortURI(e.URI), Package: j.pkg.URL, Stage: "manifest", Error: err.Error(), Permanent: true}
		r.log.Warn("resource failed", "uri", f.URI, "package", j.pkg.URL, "stage", f.Stage, "error", err)
		return result{failure: &f, counts: countsResource}
	}
	rec := r.resourceOf(j)
	want := fixity.Expect{Length: e.Length, Hashes: e.Hashes}
	h, err := r.holding(ctx, e.URI, e.ChangeTime, want, e.Version)
	if err != nil {
		return result{fatal: err}
	}
	sources, stage, err := r.bytesOf(j, want, h)
	if err != nil {
		return r.entryFailed(ctx, j, rec, h.had, stage, err)
	}
	if h.superseded {
		// A newer change is already applied (an earlier run covered a
		// later range), or a newer version held: never let an older one
		// overwrite it.
		res := r.superseded(e.URI)
		if h.olderVersion {
			res.skip = &runreport.Skip{Package: j.pkg.URL, Entry: e.URI,
				Reason: fmt.Sprintf("listed at version %s, older than the version %s held: not applied", e.Version, h.prev.Version)}
		}
		return res
	}
	if h.all {
		rec.Outcome = "unchanged"
		if rec.Length < 0 {
			rec.Length = h.prev.Length // the record gives none: the length held
		}
		rec.ETag, rec.LastModified = h.prev.ETag, h.prev.LastModified
		if rec.Hashes.SHA256 == nil {
			rec.Hashes.SHA256 = h.prev.Hashes.SHA256 // rsharvest's own, kept
		}
		return result{outcome: outUnchanged, resource: rec, hadRecord: true, delivered: len(h.deliveries) > 0}
	}
	return r.deliverAll(ctx, j, rec, h, sources, want)
}

// resourceOf is the state's record of entry j as delivered by this run.
func (r *run) resourceOf(j entryJob) state.Resource {
	e := j.rec
	rec := state.Resource{
		URI: e.URI, Source: r.opts.SourceKey, ResourceSet: j.pkg.ResourceSet,
		Length: e.Length, Hashes: e.Hashes, Type: e.Type, Lastmod: e.Lastmod,
		ChangeTime: e.ChangeTime, Package: j.pkg.URL, RunID: r.runID, Version: e.Version,
	}
	for _, l := range e.Links {
		switch l.Rel {
		case "describedby", "describes", "collection", "canonical", "alternate":
			rec.Links = append(rec.Links, state.Link{Rel: l.Rel, Href: l.Href, Type: l.Type})
		case "via": // the original of an aggregator's copy, kept for a republication
			sl := state.Link{Rel: l.Rel, Href: l.Href, Type: l.Type, Modified: l.Modified, Hash: l.Hashes.String()}
			if l.Length > 0 {
				sl.Length = l.Length
			}
			rec.Links = append(rec.Links, sl)
		}
	}
	return rec
}

// entryFailed is the outcome of entry j failing at stage: a temporary
// failure holds its set's checkpoint, a permanent one is the record's own
// (asked for again by the next task); a fatal error ends the run.
func (r *run) entryFailed(ctx context.Context, j entryJob, rec state.Resource, had bool, stage string, err error) result {
	e := j.rec
	if errclass.IsFatal(err) {
		return result{fatal: fmt.Errorf("%s: %w", e.URI, err)}
	}
	if j.stream != nil && j.stream.Leave(err) {
		return result{} // phase 2 delivers it (unpack)
	}
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		// The run is interrupted: not a failure of the resource, whatever
		// the error (a package's spool file closed under a read as the
		// package gave up). It holds its set's checkpoint; the next run
		// delivers it.
		r.log.Debug("resource interrupted", "uri", e.URI, "stage", stage)
		r.noteHold(j.pkg.ResourceSet, rec.ChangeTime, j.ep)
		return result{}
	}
	f := runreport.Failure{URI: e.URI, Package: j.pkg.URL, Stage: stage, Error: err.Error(), Permanent: errclass.IsPermanent(err)}
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

// bytesOf returns where entry j's bytes come from, in the order to try
// them: the package's ZIP entry (streamed, or looked up in the archive
// even when unchanged: that marks it listed and checks it against the
// package's inventory), the body the record carries, or the record's
// location then its mirrors. An entry that cannot be delivered fails with
// its stage.
func (r *run) bytesOf(j entryJob, want fixity.Expect, h holding) ([]entryOpener, string, error) {
	e := j.rec
	if err := absoluteURI(e.URI); err != nil {
		return nil, "manifest", err
	}
	if want.Hashes.IsZero() && r.opts.RequireHash {
		return nil, "verify", errclass.Permanentf("no md5, sha-1, sha-256 or sha-512 hash to verify against, and --require-hash is set")
	}
	lengthIs := func(size int64) error {
		if want.Length >= 0 && size != want.Length {
			return fmt.Errorf("%w: length: ZIP entry %q holds %d bytes, the manifest says %d", errclass.NewPermanent(fixity.ErrMismatch), e.Path, size, want.Length)
		}
		return nil
	}
	switch {
	case j.stream != nil:
		// Read by its local header while the package downloads (unpack).
		if err := lengthIs(j.stream.Size()); err != nil {
			return nil, "verify", err
		}
		return []entryOpener{j.stream}, "", nil
	case j.arch != nil:
		if e.Path == "" {
			return nil, "manifest", errclass.Permanentf("manifest entry has no path")
		}
		f, err := j.arch.Lookup(e.Path)
		if err != nil {
			return nil, "unzip", err // it names the path and the entry
		}
		if err := lengthIs(f.Size); err != nil {
			return nil, "verify", err
		}
		return []entryOpener{zipEntry{f}}, "", nil
	case e.Open != nil:
		return []entryOpener{recordBody(e.Open)}, "", nil // the record carries its body
	}
	// Where the planner says the bytes are: the record's location (its
	// URI by default), then its mirrors.
	var sources []entryOpener
	for _, u := range append([]string{cmp.Or(e.Location, e.URI)}, e.Mirrors...) {
		sources = append(sources, &httpEntry{client: r.opts.Client, url: u})
	}
	// Without a hash to compare, ask the server whether what the
	// destination holds is still current (conditional GET) — of the
	// version held alone: another version (a harvest list's next
	// revision, at a URL of its own) is not the one the validators are
	// of, and a 304 would keep the old bytes under the new version.
	if prev := h.prev; want.Hashes.IsZero() && h.had && !prev.Deleted && (prev.Outcome == state.OutcomeWritten || prev.Outcome == state.OutcomeUnchanged) &&
		prev.Version == e.Version {
		first := sources[0].(*httpEntry)
		first.ifNoneMatch, first.ifModifiedSince = prev.ETag, prev.LastModified
	}
	return sources, "", nil
}

// deliverAll writes entry j, from sources, to every sink that does not
// hold this version yet (h.already). When one of several sinks fails, the
// sinks that took the version are recorded, so that the next run delivers
// only to those that lack it.
func (r *run) deliverAll(ctx context.Context, j entryJob, rec state.Resource, h holding, sources []entryOpener, want fixity.Expect) result {
	e, prev := j.rec, h.prev
	res := &sink.Resource{URI: e.URI, Length: e.Length, Hashes: e.Hashes, Type: e.Type, Lastmod: e.Lastmod, ResourceSet: j.pkg.ResourceSet, Sets: e.Sets, About: e.About}
	for _, l := range rec.Links {
		res.Links = append(res.Links, sink.Link{Rel: l.Rel, Href: l.Href, Type: l.Type})
	}
	var took []state.Delivery
	var failed error // a sink's failure: the others are given the resource all the same
	sources = r.withHeldCopy(h, e.URI, sources)
	for _, s := range r.sinks {
		if h.already[s.name] {
			continue
		}
		n, err := r.putFrom(ctx, s, res, sources, want, &rec, e.DocumentType)
		if errors.Is(err, fetch.ErrNotModified) {
			rec.Outcome = state.OutcomeUnchanged
			rec.Length, rec.Hashes = prev.Length, prev.Hashes
			rec.ETag, rec.LastModified = prev.ETag, prev.LastModified
			return result{outcome: outUnchanged, resource: rec, hadRecord: true}
		}
		if errors.Is(err, ErrInvalid) {
			return r.entryFailed(ctx, j, rec, h.had, "validate", err) // the same bytes for every sink
		}
		if err != nil {
			if errors.Is(err, fixity.ErrMismatch) || len(r.sinks) == 1 || errclass.IsFatal(err) || ctx.Err() != nil {
				return r.entryFailed(ctx, j, rec, h.had, "deliver", err)
			}
			if errors.As(err, new(*sourceFailed)) {
				// The bytes could not be read: every sink after would meet
				// that too (another request each), so none is tried.
				failed = err
				break
			}
			failed = sinksFailure(failed, fmt.Errorf("sink %s: %w", s.name, err))
			continue
		}
		rec.Length = n
		took = append(took, state.Delivery{Source: r.opts.SourceKey, URI: e.URI, Sink: s.name, Length: n, Hashes: want.Hashes, ChangeTime: rec.ChangeTime})
	}
	if failed != nil {
		out := r.entryFailed(ctx, j, rec, h.had, "deliver", failed)
		for _, o := range r.sinks {
			if h.already[o.name] {
				took = append(took, state.Delivery{Source: r.opts.SourceKey, URI: e.URI, Sink: o.name, Length: want.Length, Hashes: want.Hashes, ChangeTime: rec.ChangeTime})
			}
		}
		out.deliveries = took
		return out
	}
	rec.Outcome = state.OutcomeWritten
	rec.Verified = verifiedBy(want, j.stream != nil || j.arch != nil)
	out := result{outcome: outWritten, resource: rec, hadRecord: h.had, change: appliedChange(e.Change, h.had, prev), delivered: len(r.sinks) > 1}
	if h.had && !prev.Deleted && prev.Outcome != state.OutcomeFailed {
		out.prevVersion = prev.Version
	}
	return out
}

// withHeldCopy puts first, before the network sources of uri's bytes, the
// copy a sink that already holds this version keeps (a sink.Inventory:
// fs, s3, es with its bodies): a sink that lacks the version — one that
// failed in an earlier run — is filled from what the destination holds,
// not from the origin. The copy is verified against the entry as any
// source is; when it does not match or cannot be read, the origin's
// sources follow. Bytes from a package being read are not replaced: the
// package is at hand.
func (r *run) withHeldCopy(h holding, uri string, sources []entryOpener) []entryOpener {
	if len(sources) == 0 {
		return sources
	}
	if _, network := sources[0].(*httpEntry); !network {
		return sources
	}
	for _, s := range r.sinks {
		if inv, ok := s.Sink.(sink.Inventory); ok && h.already[s.name] {
			return append([]entryOpener{heldCopy{inv: inv, uri: uri, sink: s.name}}, sources...)
		}
	}
	return sources
}

// heldCopy opens the copy of a resource a sink holds.
type heldCopy struct {
	inv  sink.Inventory
	uri  string
	sink string
}

func (c heldCopy) Open(ctx context.Context) (io.ReadCloser, error) {
	rc, err := c.inv.Get(ctx, c.uri)
	if err != nil {
		return nil, fmt.Errorf("the copy %s holds: %w", c.sink, err)
	}
	return rc, nil
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
	// olderVersion says the version at hand is older than the one held
	// (source.Protocol.CompareVersions): superseded.
	olderVersion bool
	deliveries   []state.Delivery
	already      map[string]bool
	all          bool
}

// holding answers, for every kind of unit, "is this already held?": for
// the version of uri changed at changeTime (zero: unknown) whose bytes
// must match want. A sink holds it when the state's record matches want,
// unless a partial delivery (another sink failed in an earlier run) says
// otherwise.
func (r *run) holding(ctx context.Context, uri string, changeTime time.Time, want fixity.Expect, version string) (holding, error) {
	var h holding
	var err error
	// Unless nothing was recorded of the source before this run, nor of
	// uri by it (fresh): then the state holds no record to read.
	if r.fresh == nil || r.fresh.mayHold(uri) {
		if h.prev, h.had, err = r.opts.Store.Resource(ctx, r.opts.SourceKey, uri); err != nil {
			return h, err
		}
		if len(r.sinks) > 1 {
			if h.deliveries, err = r.opts.Store.Deliveries(ctx, r.opts.SourceKey, uri); err != nil {
				return h, err
			}
		}
	}
	h.superseded = h.had && !h.prev.ChangeTime.IsZero() && h.prev.ChangeTime.After(changeTime)
	// A newer version only supersedes when it is held: a version that
	// failed (or was deleted) keeps nothing back.
	held := h.had && !h.prev.Deleted && (h.prev.Outcome == state.OutcomeWritten || h.prev.Outcome == state.OutcomeUnchanged)
	if cmp := r.opts.Protocol.CompareVersions; cmp != nil && held && version != "" && h.prev.Version != "" && cmp(h.prev.Version, version) > 0 {
		h.superseded, h.olderVersion = true, true
	}
	h.already = map[string]bool{}
	for _, s := range r.sinks {
		holder, has := h.prev, h.had
		for _, d := range h.deliveries {
			if d.Sink == s.name {
				holder, has = state.Resource{Outcome: state.OutcomeWritten, Length: d.Length, Hashes: d.Hashes}, true
			}
		}
		if has && holds(holder, want, version) {
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

// putFrom puts from the first source that works: a resource's mirrors
// (rel="duplicate", by pri) are tried in turn when its primary location
// fails.
func (r *run) putFrom(ctx context.Context, s boundSink, res *sink.Resource, sources []entryOpener, want fixity.Expect, rec *state.Resource, docType string) (int64, error) {
	var err error
	for i, src := range sources {
		var n int64
		var sha256 []byte
		n, sha256, err = r.put(ctx, s, res, src, want, docType)
		if err == nil {
			if h, ok := src.(*httpEntry); ok {
				rec.ETag, rec.LastModified = h.etag, h.lastModified
			}
			if rec.Hashes.SHA256 == nil {
				// rsharvest's own digest of what it wrote, kept and
				// republished beside those the source gave.
				rec.Hashes.SHA256 = sha256
			}
			return n, nil
		}
		if errclass.IsFatal(err) || errors.Is(err, fetch.ErrNotModified) || ctx.Err() != nil || i == len(sources)-1 {
			break
		}
		if c, held := src.(heldCopy); held {
			r.log.Warn("the held copy failed; fetching from the source", "uri", res.URI, "copy", c.sink, "error", err)
			continue
		}
		r.log.Warn("location failed; trying a mirror", "uri", res.URI, "error", err, "mirror", sources[i+1])
	}
	return 0, err
}

// put streams one entry into one sink through a verifying reader, so the
// sink commits only bytes that matched what was listed, and returns their
// length and sha-256 (computed whether or not the entry lists one). The
// entry is opened first (for a GET, its latency is paid here, outside the
// sink's write slots), and opened again for each retry of the sink's (see
// sink.WithRetry).
func (r *run) put(ctx context.Context, s boundSink, res *sink.Resource, f entryOpener, want fixity.Expect, docType string) (int64, []byte, error) {
	b := &entryBody{ctx: ctx, open: f, want: r.checked(want)}
	if r.opts.Validate && docType != "" {
		b.check = func(ct string) (*docCheck, error) { return r.checkFor(docType, ct) }
	}
	if err := b.reopen(); err != nil {
		return 0, nil, &sourceFailed{err}
	}
	defer b.Close()
	if err := s.Put(ctx, res, b); err != nil {
		if b.failed != nil {
			return 0, nil, &sourceFailed{err}
		}
		return 0, nil, err
	}
	if !b.vr.Verified() {
		return 0, nil, errclass.Fatalf("sink returned before reading the whole body: a sink bug; nothing unverified may be committed")
	}
	return b.vr.N(), b.vr.Sum().SHA256, nil
}

// checked is what an entry's bytes are verified against: want, with only
// its strongest digest unless Options.VerifyAll.
func (r *run) checked(want fixity.Expect) fixity.Expect {
	if !r.opts.VerifyAll {
		want.Hashes = want.Hashes.Strongest()
	}
	return want
}

// entryBody is an entry's bytes as a sink reads them, verified as they are
// read; a seek to its start opens the entry again, for a retry.
type entryBody struct {
	ctx  context.Context
	open entryOpener
	want fixity.Expect
	rc   io.ReadCloser
	vr   *fixity.Reader
	// check, when set, makes the validation of the document as it
	// streams (given the response's media type); ck is the one running.
	check func(contentType string) (*docCheck, error)
	ck    *docCheck
	// failed is the last failure to read the bytes from where they come
	// (not the sink's own), nil when none.
	failed error
}

var _ io.ReadSeeker = (*entryBody)(nil)

// sinksFailure is the failure of an entry that sinks failed, given the
// one so far (nil: none) and the next: the first, unless the next is
// temporary and it is not — a temporary failure holds the checkpoint.
func sinksFailure(failed, next error) error {
	if failed == nil || errclass.IsRetryable(next) && !errclass.IsRetryable(failed) {
		return next
	}
	return failed
}

// sourceFailed wraps a failure to read an entry's bytes from where they
// come (a GET, a package), as opposed to a sink's own failure: every sink
// would meet it.
type sourceFailed struct{ err error }

func (e *sourceFailed) Error() string { return e.err.Error() }
func (e *sourceFailed) Unwrap() error { return e.err }

func (b *entryBody) Read(p []byte) (int, error) {
	n, err := b.vr.Read(p)
	if err != nil && err != io.EOF {
		b.failed = err
	}
	if b.ck != nil {
		b.ck.write(p[:n])
		if err == io.EOF {
			if verr := b.ck.finish(b.ctx); verr != nil {
				return n, verr // the sink aborts: nothing of it is stored
			}
		}
	}
	return n, err
}

// Seek opens the entry again; only a seek to the start is possible.
func (b *entryBody) Seek(offset int64, whence int) (int64, error) {
	if offset != 0 || whence != io.SeekStart {
		return 0, errclass.Fatalf("an entry's body is read again only from its start")
	}
	return 0, b.reopen()
}

func (b *entryBody) reopen() error {
	b.Close()
	rc, err := b.open.Open(b.ctx)
	if err != nil {
		b.failed = err
		return err
	}
	b.rc, b.vr = rc, fixity.NewReader(rc, b.want, fixity.Compute{SHA256: true})
	if b.check != nil {
		ct := ""
		if fb, ok := rc.(*fetch.Body); ok {
			ct = fb.ContentType
		}
		if b.ck, err = b.check(ct); err != nil {
			return err
		}
	}
	return nil
}

func (b *entryBody) Close() {
	if b.rc != nil {
		b.rc.Close()
		b.rc = nil
	}
	if b.ck != nil {
		b.ck.close()
		b.ck = nil
	}
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
func holds(prev state.Resource, want fixity.Expect, version string) bool {
	if prev.Deleted || (prev.Outcome != "written" && prev.Outcome != "unchanged") {
		return false
	}
	if want.Length >= 0 && prev.Length != want.Length {
		return false
	}
	if version != "" && prev.Version != "" {
		// The protocol names its versions: the same version is the same
		// bytes, a different one is not (whatever the hashes).
		return prev.Version == version && (want.Hashes.IsZero() || prev.Hashes.IsZero() || prev.Hashes.Agree(want.Hashes))
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
