package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/unzip"
)

// Streaming: processing a package while it downloads.
//
// A downloaded package is written to its spool file by the download, and
// read behind it by the package's goroutine (spoolProgress tells it how far
// the file is written). Phase 1, while the bytes arrive: when the first
// entry is manifest.xml (stored or deflated, its sizes in its local header,
// at most maxStreamManifest bytes), the local file headers that follow are
// read in order (unzip.LocalScanner) and each entry is matched by name
// against the manifest, read ahead by at most streamWindow entries. An entry
// found, once its bytes have arrived, goes to the workers as usual, read
// from the spool file by its local header (unzip.LocalOpener): inflated,
// its CRC-32 and size checked, verified against the manifest's length and
// hashes, written to the sinks. Phase 1 stops at the first entry that cannot
// be read so (sizes in a data descriptor, a method, name or size the
// archive would reject, a name the manifest window does not hold, a name
// seen before), at the central directory, or after maxStreamEntries
// entries.
//
// Phase 2, once the download has ended and its length and hashes are
// verified: the package is opened (unzip.Open, the central directory) and
// its manifest read again from the start, as without streaming. An entry
// delivered in phase 1 is confirmed when the manifest lists it the same way
// and the central directory accepts it (Lookup) with the same method,
// sizes and CRC-32 as its local header; every other entry is delivered
// from the archive as usual. When phase 1 handed out every entry the
// manifest lists and the archive's manifest.xml has the same bytes, the
// manifest is not parsed again (confirmWhole).
//
// What phase 1 did is not final until phase 2 confirms it:
//
//   - The outcome of a streamed entry (the record the state store would
//     take, a failure) is withheld until it is confirmed; the counters and
//     the report's failures count it at once, and are corrected if it is
//     retracted.
//   - A streamed entry writes to the sinks only when the destination holds
//     no version of the resource (no live state record, no partial
//     delivery), and no other streamed entry of the run has written the URI
//     and is not yet confirmed (run.claims); otherwise it is left to phase
//     2. So retracting it restores the destination exactly: the resource is
//     deleted from the sinks that took it, and its withheld outcome is
//     dropped.
//   - An entry is retracted when phase 2 does not confirm it (the central
//     directory rejects it — a duplicate name, a symlink or device
//     attribute, a name it does not list — or describes it otherwise, or
//     the manifest lists it otherwise or not at all); the entry is then
//     processed from the archive as without streaming, which records the
//     reason. Every streamed entry is retracted when the package fails as a
//     whole: its download fails (its length or hashes do not match the
//     Resource Dump, or a transfer failure outlasts the retries), it starts
//     over because the package changed, or its central directory or
//     manifest cannot be read. A package that fails delivers nothing, as
//     without streaming, although each of its streamed entries had been
//     verified against its manifest hash: the manifest itself is then not
//     to be trusted.
//   - A retraction's delete is skipped when another job of this run has
//     written the same URI meanwhile (the same URI in two packages).
//   - A temporary failure of a streamed entry holds the checkpoint even
//     when the entry is later retracted (the package failed as a whole).
//   - When the run ends early (cancelled, or a fatal error), entries
//     streamed but not confirmed stay in the sinks with no state record:
//     the next run delivers them again.
//
// Range re-syncs (openRanged) and incremental runs do not stream, and
// Options.DisableStreaming turns streaming off.

const (
	// maxStreamManifest caps the uncompressed manifest.xml of a package
	// read as it arrives, which bounds the entries phase 1 remembers.
	maxStreamManifest = 16 << 20
	// streamWindow caps the manifest entries read ahead of the ZIP
	// entries to match their names.
	streamWindow = 10_000
	// maxStreamEntries caps the entries one package delivers in phase 1
	// (each remembered, with its withheld outcome, until phase 2: under
	// 1 KiB each).
	maxStreamEntries = 20_000
)

// errRestarted means a package's download began again from byte 0 (the
// package changed under it): what was read from the spool file is void.
var errRestarted = errors.New("pipeline: the package download started over")

// spoolProgress tracks how far a package's spool file is written while it
// downloads: the download reports every write (fetch.Progress), readers
// wait for the bytes they need.
type spoolProgress struct {
	mu        sync.Mutex
	written   int64
	restarted bool
	ended     bool
	failed    error         // why the download failed, once it has
	wake      chan struct{} // closed at the next change; nil when no one waits
}

// update is the download's fetch.Progress.
func (p *spoolProgress) update(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n < p.written {
		p.restarted = true
	}
	p.written = n
	p.signal()
}

// end records that the download has ended, with its error.
func (p *spoolProgress) end(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended, p.failed = true, err
	p.signal()
}

func (p *spoolProgress) signal() {
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
}

// wasRestarted reports whether the download ever began again from byte 0.
func (p *spoolProgress) wasRestarted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarted
}

// wait blocks until the spool file holds at least off bytes, and returns
// how many it holds. It fails with io.EOF when the download ended short of
// off, with errRestarted once the download has started over, with the
// download's error once it has failed (nothing read is of use then), and
// with ctx's error when ctx ends.
func (p *spoolProgress) wait(ctx context.Context, off int64) (int64, error) {
	for {
		p.mu.Lock()
		written, restarted, ended, failed := p.written, p.restarted, p.ended, p.failed
		if restarted || written >= off || ended {
			p.mu.Unlock()
			switch {
			case restarted:
				return written, errRestarted
			case failed != nil:
				return written, failed
			case written >= off:
				return written, nil
			default:
				return written, io.EOF
			}
		}
		if p.wake == nil {
			p.wake = make(chan struct{})
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return written, ctx.Err()
		case <-wake:
		}
	}
}

// spoolReader reads a spool file sequentially, from offset 0, behind its
// download: a Read blocks until the bytes have been written. It keeps the
// ctx of the one call it serves (phase 1), since io.Reader has no other
// way to carry it.
type spoolReader struct {
	ctx context.Context
	f   *os.File
	p   *spoolProgress
	off int64
}

func (r *spoolReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	written, err := r.p.wait(r.ctx, r.off+1)
	if err != nil {
		return 0, err
	}
	b = b[:min(int64(len(b)), written-r.off)]
	n, err := r.f.ReadAt(b, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek moves the offset (io.SeekStart or io.SeekCurrent); bytes skipped
// need not have arrived yet.
func (r *spoolReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	default:
		return r.off, errors.New("pipeline: spool reader seeks from the start or the current offset only")
	}
	if offset < 0 {
		return r.off, errors.New("pipeline: negative offset")
	}
	r.off = offset
	return offset, nil
}

// streamEntry is an entry delivered in phase 1: what its local header and
// the manifest said, and its withheld outcome.
type streamEntry struct {
	local  unzip.LocalEntry
	loc    string // the manifest entry's URI
	path   string // and its path, as written
	sum    entrySum
	opener *unzip.LocalOpener
	// res is the outcome, set by the worker before it marks the job done
	// (see deliver); a zero result means the entry was left to phase 2.
	res result
	// settled: confirmed or retracted (the package's goroutine only).
	settled bool
	// claimed and clobbered are guarded by run.claims.mu: the entry holds
	// the claim on its URI; another job has written the URI since.
	claimed, clobbered bool
}

// Open reads the entry's bytes from the spool file.
func (se *streamEntry) Open(context.Context) (io.ReadCloser, error) {
	rc, err := se.opener.Open(se.local)
	if err != nil {
		return nil, fmt.Errorf("open ZIP entry: %w", err)
	}
	return rc, nil
}

// left reports whether the entry was left to phase 2 (it would have
// replaced a version the destination holds).
func (se *streamEntry) left() bool {
	return se.res.outcome == 0 && se.res.failure == nil
}

// claims are the URIs that streamed entries not yet confirmed have written
// (or are writing) to the sinks.
type claims struct {
	mu sync.Mutex
	by map[string]*streamEntry
}

// claim decides, for a streamed entry about to be written to the sinks,
// whether it may be: only when the destination holds no version of the
// resource and no other unconfirmed streamed entry holds the URI. It is
// called by deliverEntry with the state's record and partial deliveries.
func (r *run) claim(se *streamEntry, uri string, prev state.Resource, had bool, deliveries []state.Delivery) bool {
	if len(deliveries) > 0 {
		return false
	}
	if had && !prev.Deleted && (prev.Outcome == state.OutcomeWritten || prev.Outcome == state.OutcomeUnchanged) {
		return false
	}
	r.claims.mu.Lock()
	defer r.claims.mu.Unlock()
	if other := r.claims.by[uri]; other != nil && other != se {
		return false
	}
	if r.claims.by == nil {
		r.claims.by = map[string]*streamEntry{}
	}
	r.claims.by[uri] = se
	se.claimed = true
	return true
}

// unclaim releases se's claim, and reports whether another job wrote its
// URI while it held it.
func (r *run) unclaim(se *streamEntry) (clobbered bool) {
	r.claims.mu.Lock()
	defer r.claims.mu.Unlock()
	if se.claimed {
		if r.claims.by[se.loc] == se {
			delete(r.claims.by, se.loc)
		}
		se.claimed = false
	}
	return se.clobbered
}

// noteWritten tells the streamed entry holding the claim on uri, if any
// other than by, that uri has been written since: retracting it must not
// delete what the other job wrote.
func (r *run) noteWritten(uri string, by *streamEntry) {
	r.claims.mu.Lock()
	defer r.claims.mu.Unlock()
	if se := r.claims.by[uri]; se != nil && se != by {
		se.clobbered = true
	}
}

// deliver verifies and delivers one entry (deliverEntry). The outcome of a
// streamed entry is withheld in its streamEntry until phase 2 confirms it:
// the worker then sends the commit stage an empty result.
func (r *run) deliver(ctx context.Context, j entryJob) result {
	res := r.deliverEntry(ctx, j)
	if res.fatal != nil {
		return res
	}
	if res.outcome == outWritten || len(res.deliveries) > 0 {
		r.noteWritten(j.entry.Loc, j.stream)
	}
	if j.stream == nil {
		return res
	}
	j.stream.res = res
	return result{}
}

// streamState is what phase 1 did for a package.
type streamState struct {
	opener  *unzip.LocalOpener
	entries map[string]*streamEntry // by entry name
	byURI   map[string]*streamEntry
	order   []*streamEntry // as handed out
	stopped string         // why phase 1 stopped
	// whole: phase 1 read manifest.xml to its end (its bytes hash to
	// manifestSum) and handed out an entry for every one it lists.
	whole       bool
	manifestSum [sha256.Size]byte
}

// streamPackage downloads a package to a spool file while phase 1 reads
// it; then, once the download is verified, phase 2 opens it and delivers
// (or confirms) every entry (see above). Like processPackage it records the
// package's failures and returns only a fatal error or ctx's.
func (r *run) streamPackage(ctx context.Context, j source.Package, out chan<- entryJob) error {
	log := r.log.With("package", j.URL)
	f, err := os.CreateTemp(r.opts.SpoolDir, "rsharvest-pkg-*.zip")
	if err != nil {
		return errclass.Fatalf("spool: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case r.downloads <- struct{}{}:
	}
	// The download: it owns the spool file's writes and frees its slot
	// when it ends. It is always waited for before the file is removed.
	prog := &spoolProgress{}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type downloaded struct {
		res fetch.Result
		err error
	}
	dl := make(chan downloaded, 1)
	started := time.Now()
	go func() {
		var shown int64 // bytes of this package counted in PackageBytesDone
		res, err := r.opts.Client.DownloadProgress(dctx, j.URL, f, j.Expect, func(n int64) {
			prog.update(n)
			if n > shown {
				r.counts.PackageBytesDone.Add(n - shown)
				shown = n
			}
		})
		<-r.downloads
		prog.end(err)
		dl <- downloaded{res, err}
	}()
	joined := false
	defer func() {
		if !joined {
			cancel()
			<-dl
		}
	}()

	st := &streamState{opener: unzip.NewLocalOpener(f, r.opts.Limits), entries: map[string]*streamEntry{}, byURI: map[string]*streamEntry{}}
	defer r.release(st)
	var wg sync.WaitGroup
	if err := r.follow(ctx, &j, f, prog, st, out, &wg); err != nil {
		return err
	}
	var d downloaded
	select {
	case <-ctx.Done():
		return ctx.Err()
	case d = <-dl:
		joined = true
	}
	r.counts.BytesDownloaded.Add(d.res.Bytes)
	if d.err == nil {
		r.book.noteValidators(j.URL, fetch.Validators{ETag: d.res.ETag, LastModified: d.res.LastModified})
	}
	log.Debug("package downloaded", "bytes", d.res.Bytes, "took", time.Since(started), "streamed", len(st.entries), "stopped", st.stopped)
	// Every outcome of phase 1 is in before phase 2 looks at them.
	if err := waitGroup(ctx, &wg); err != nil {
		return err
	}
	pkgFail := func(stage, why string, err error) error {
		if rerr := r.retractAll(ctx, &j, st, why); rerr != nil {
			return rerr
		}
		if errclass.IsFatal(err) {
			return err
		}
		return r.packageFailed(ctx, j, j.At, stage, err)
	}
	if d.err != nil {
		return pkgFail("download", "the package's download failed", d.err)
	}
	if prog.wasRestarted() {
		// What phase 1 read may be of the earlier representation.
		if err := r.retractAll(ctx, &j, st, "the package changed while it downloaded"); err != nil {
			return err
		}
	}
	arch, err := unzip.Open(f, d.res.Bytes, r.opts.Limits)
	if err != nil {
		return pkgFail("unzip", "the package cannot be opened", err)
	}
	if done, err := r.confirmWhole(ctx, &j, arch, st); done || err != nil {
		return err
	}
	return r.unpackPackage(ctx, j, arch, st, out)
}

// confirmWhole is phase 2 when phase 1 handed out every entry of the
// manifest: when the archive's manifest.xml has the same bytes, and the
// central directory accepts and describes every entry as its local header
// did, the withheld outcomes are sent without reading the manifest again,
// and it reports true. Otherwise it reports false (having changed nothing
// but the entries' referenced marks): unpackPackage settles the package.
func (r *run) confirmWhole(ctx context.Context, j *source.Package, arch *unzip.Archive, st *streamState) (bool, error) {
	if !st.whole {
		return false, nil
	}
	for _, se := range st.order {
		if se.left() {
			return false, nil
		}
	}
	rc, err := arch.Manifest()
	if err != nil {
		return false, nil
	}
	h := sha256.New()
	_, err = io.Copy(h, rc)
	rc.Close()
	if err != nil || [sha256.Size]byte(h.Sum(nil)) != st.manifestSum {
		return false, nil
	}
	for _, se := range st.order {
		f, err := arch.Lookup(se.path)
		if err != nil || f.Method != se.local.Method || f.Size != se.local.Size || f.CompressedSize != se.local.CompressedSize || f.CRC32 != se.local.CRC32 {
			return false, nil
		}
	}
	for _, se := range st.order {
		se.settled = true
		r.unclaim(se)
		res := se.res
		se.res = result{}
		if err := r.send(ctx, res); err != nil {
			return true, err
		}
	}
	for _, name := range arch.Unreferenced() {
		r.counts.Skipped.Add(1)
		r.rec.skip(Skip{Package: j.URL, Entry: name, Reason: "entry not listed in manifest.xml"})
		r.log.Warn("package entry not in its manifest; skipped", "package", j.URL, "entry", name)
	}
	r.counts.PackagesDone.Add(1)
	r.log.Debug("package confirmed as streamed", "package", j.URL, "entries", len(st.order))
	return true, nil
}

// follow is phase 1: it reads the package's local headers as they arrive
// and hands the entries it can match with the manifest to the workers. It
// returns nil when it stops, whatever the reason; an error only when ctx
// ends.
func (r *run) follow(ctx context.Context, j *source.Package, f *os.File, prog *spoolProgress, st *streamState, out chan<- entryJob, wg *sync.WaitGroup) error {
	stop := func(why string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			why += ": " + err.Error()
		}
		st.stopped = why
		return nil
	}
	sc := unzip.NewLocalScanner(&spoolReader{ctx: ctx, f: f, p: prog}, r.opts.Limits)
	first, err := sc.Next()
	switch {
	case err != nil:
		return stop("first entry", err)
	case first.Name != unzip.ManifestName:
		return stop("first entry is not manifest.xml", nil)
	case first.Size > maxStreamManifest:
		return stop("manifest.xml too large to stream", nil)
	}
	if _, err := prog.wait(ctx, first.End()); err != nil {
		return stop("manifest.xml", err)
	}
	mrc, err := st.opener.Open(first)
	if err != nil {
		return stop("manifest.xml", err)
	}
	defer mrc.Close()
	// Phase 2 reads the manifest again, unless phase 1 read all of it
	// (and its bytes are the archive's), and reports what is wrong in it.
	doc := r.opts.Document
	doc.Logger = slog.New(slog.DiscardHandler)
	msum := sha256.New()
	mtee := io.TeeReader(mrc, msum)
	mr, err := manifest.NewReader(mtee, doc)
	if err != nil {
		return stop("manifest.xml", err)
	}
	if mr.Header().Metadata.Capability != manifest.ResourceDumpManifest {
		return stop("manifest.xml is not a resource dump manifest", nil)
	}
	pending := map[string]*manifest.Entry{} // read ahead, not yet matched
	manifestEnded := false                  // by an error, or io.EOF
	skipped := false                        // manifest entries not handed out
	for {
		le, err := sc.Next()
		if err == io.EOF {
			// Every local entry is read: was every manifest entry
			// handed out, the manifest read to its end?
			if !skipped && len(pending) == 0 && !manifestEnded {
				_, err := mr.Next()
				manifestEnded, st.whole = true, err == io.EOF
			}
			if st.whole {
				if _, err := io.Copy(io.Discard, mtee); err != nil {
					st.whole = false
				}
				msum.Sum(st.manifestSum[:0])
			}
			return stop("central directory", nil)
		}
		if err != nil {
			return stop("local header", err)
		}
		if le.IsDir() {
			continue
		}
		if le.Name == unzip.ManifestName || st.entries[le.Name] != nil {
			return stop("repeated name", nil)
		}
		if len(st.entries) >= maxStreamEntries {
			return stop("entry cap", nil)
		}
		e := pending[le.Name]
		delete(pending, le.Name)
		for e == nil && !manifestEnded && len(pending) < streamWindow {
			me, err := mr.Next()
			if err != nil {
				var ee *manifest.EntryError
				if asEntryError(err, &ee) {
					skipped = true
					continue // phase 2 reports it
				}
				manifestEnded, skipped = true, true
				break
			}
			if me.Metadata.Path == "" {
				skipped = true
				continue
			}
			name := unzip.PathKey(me.Metadata.Path)
			if name == le.Name {
				e = me
				break
			}
			if pending[name] != nil || st.entries[name] != nil {
				return stop("a path listed twice in manifest.xml", nil)
			}
			pending[name] = me
		}
		if e == nil {
			return stop(fmt.Sprintf("entry %q not found in manifest.xml", le.Name), nil)
		}
		se := &streamEntry{local: le, loc: e.Loc, path: e.Metadata.Path, sum: sumEntry(e), opener: st.opener}
		if e.Loc == "" || (e.Metadata.Hashes.IsZero() && r.opts.RequireHash) {
			// It fails before its bytes are looked at: phase 2 records
			// it (not streamed, the entry stays unreferenced, as
			// without streaming).
			st.entries[le.Name] = se
			skipped = true
			continue
		}
		if st.byURI[e.Loc] != nil {
			return stop("a URI listed twice in manifest.xml", nil)
		}
		if _, err := prog.wait(ctx, le.End()); err != nil {
			return stop("entry data", err)
		}
		st.entries[le.Name] = se
		st.byURI[e.Loc] = se
		st.order = append(st.order, se)
		wg.Add(1)
		select {
		case <-ctx.Done():
			wg.Done()
			return ctx.Err()
		case out <- entryJob{pkg: j, entry: e, stream: se, done: wg.Done}:
		}
	}
}

// settle is phase 2 for manifest entry e: it confirms the streamed entry
// of e's path (sending its withheld outcome) and reports true, or retracts
// it, or finds none, and reports false: e is then delivered from arch.
// Whatever e's path, a streamed entry of e's URI not confirmed yet is
// retracted first, so its delete cannot undo e's delivery.
func (r *run) settle(ctx context.Context, j *source.Package, arch *unzip.Archive, st *streamState, e *manifest.Entry) (bool, error) {
	se := st.entries[unzip.PathKey(e.Metadata.Path)]
	if e.Metadata.Path == "" {
		se = nil
	}
	if o := st.byURI[e.Loc]; o != nil && o != se && !o.settled {
		if err := r.retract(ctx, j, o, "manifest.xml lists its URI with another path"); err != nil {
			return false, err
		}
	}
	if se == nil || se.settled {
		return false, nil
	}
	if se.left() {
		se.settled = true
		return false, nil
	}
	if se.sum != sumEntry(e) {
		return false, r.retract(ctx, j, se, "manifest.xml lists its path otherwise")
	}
	f, err := arch.Lookup(e.Metadata.Path)
	switch {
	case err != nil:
		return false, r.retract(ctx, j, se, err.Error())
	case f.Method != se.local.Method || f.Size != se.local.Size || f.CompressedSize != se.local.CompressedSize || f.CRC32 != se.local.CRC32:
		return false, r.retract(ctx, j, se, "the central directory describes the entry otherwise")
	}
	se.settled = true
	r.unclaim(se)
	res := se.res
	se.res = result{}
	return true, r.send(ctx, res)
}

// retract undoes what phase 1 did for se (see above): its counts and
// reported failure, and its writes to the sinks.
func (r *run) retract(ctx context.Context, j *source.Package, se *streamEntry, why string) error {
	se.settled = true
	clobbered := r.unclaim(se)
	res := se.res
	if se.left() {
		return nil
	}
	se.res = result{}
	var targets []boundSink
	switch res.outcome {
	case outWritten:
		r.counts.Written.Add(-1)
		r.counts.BytesWritten.Add(-res.resource.Length)
		targets = r.sinks
	case outUnchanged, outSuperseded:
		r.counts.Unchanged.Add(-1)
	case outFailed:
		r.counts.Failed.Add(-1)
		if res.failure != nil {
			r.rec.unfail(*res.failure)
		}
		for _, s := range r.sinks {
			if slices.ContainsFunc(res.deliveries, func(d state.Delivery) bool { return d.Sink == s.name }) {
				targets = append(targets, s)
			}
		}
	}
	uri := se.loc
	ct := res.resource.ChangeTime
	if ct.IsZero() {
		ct = res.changeTime
	}
	r.log.Info("retracting a resource delivered while its package downloaded", "uri", uri, "package", j.URL, "reason", why, "written", len(targets) > 0)
	if len(targets) == 0 || clobbered {
		return nil
	}
	// Another job of this run may have written it since (and be recorded).
	cur, ok, err := r.opts.Store.Resource(ctx, r.opts.SourceKey, uri)
	if err != nil {
		return err
	}
	if ok && cur.RunID == r.runID && !cur.Deleted && (cur.Outcome == state.OutcomeWritten || cur.Outcome == state.OutcomeUnchanged) {
		return nil
	}
	for _, s := range targets {
		if err := r.deleteFrom(ctx, s, uri); err != nil {
			if errclass.IsFatal(err) || ctx.Err() != nil {
				return err
			}
			// The sink keeps bytes the state does not record: the next
			// run writes the resource again if the source still has it.
			r.counts.Failed.Add(1)
			r.failIn(ctx, Failure{URI: uri, Package: j.URL, Stage: "deliver",
				Error:     fmt.Sprintf("sink %s: retracting a resource streamed from a package that was not confirmed (%s): %v", s.name, why, err),
				Permanent: errclass.IsPermanent(err)}, j.ResourceSet, ct)
		}
	}
	return nil
}

// retractAll retracts every streamed entry of st not yet settled.
func (r *run) retractAll(ctx context.Context, j *source.Package, st *streamState, why string) error {
	if st == nil {
		return nil
	}
	for _, se := range st.entries {
		if se.settled {
			continue
		}
		if err := r.retract(ctx, j, se, why); err != nil {
			return err
		}
	}
	return nil
}

// release drops the claims st's entries still hold (a run ending early).
func (r *run) release(st *streamState) {
	for _, se := range st.entries {
		r.unclaim(se)
	}
}

// entrySum is a digest of what a manifest entry says of its resource: all
// that the state records of it. Phase 1 keeps it instead of the entry.
type entrySum [sha256.Size]byte

func sumEntry(e *manifest.Entry) entrySum {
	h := sha256.New()
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	tm := func(t time.Time) {
		b = binary.AppendVarint(b, t.UnixNano())
		_, off := t.Zone()
		b = binary.AppendVarint(b, int64(off))
		b = append(b, byte(boolInt(t.IsZero())))
	}
	md := &e.Metadata
	str(e.Loc)
	tm(e.Lastmod)
	tm(md.Datetime)
	str(string(md.Change))
	str(md.Path)
	b = binary.AppendVarint(b, md.Length)
	str(md.Type)
	str(string(md.Hashes.MD5))
	str(string(md.Hashes.SHA1))
	str(string(md.Hashes.SHA256))
	str(string(md.Hashes.SHA512))
	b = binary.AppendUvarint(b, uint64(len(md.Hashes.Unknown)))
	for _, u := range md.Hashes.Unknown {
		str(u)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Links)))
	for _, l := range e.Links {
		str(l.Rel)
		str(l.Href)
		str(l.Type)
	}
	h.Write(b)
	var sum entrySum
	h.Sum(sum[:0])
	return sum
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unfail takes a failure back out of the report (a retracted entry's).
func (rc *recorder) unfail(f Failure) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if i := slices.Index(rc.failures, f); i >= 0 {
		rc.failures = slices.Delete(rc.failures, i, i+1)
	} else if rc.truncated > 0 {
		rc.truncated--
	}
}
