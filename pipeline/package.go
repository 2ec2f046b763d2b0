package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/unzip"
)

// packageFailed records the failure of a whole package at a stage; a
// temporary failure holds the next start at hold. It returns what the
// caller must return: nil, or the error when it is fatal or ctx ended.
func (r *run) packageFailed(ctx context.Context, j source.Package, hold time.Time, stage string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errclass.IsFatal(err) {
		return err
	}
	r.failIn(ctx, runreport.Failure{URI: j.URL, Package: j.URL, Stage: stage, Error: err.Error(), Permanent: errclass.IsPermanent(err)}, j.ResourceSet, hold, countsPackage, nil)
	return nil
}

// allHeld reads the manifest copy package j links (rel="contents") and
// reports whether the state holds every resource it lists with the same
// length and hashes (or a newer version). It stops at the first resource
// not held. A copy that cannot be read is not an error: the package is then
// downloaded as usual.
func (r *run) allHeld(ctx context.Context, j source.Package) (int64, bool, error) {
	entries, closeDoc, err := r.openContents(ctx, j)
	if err != nil {
		r.log.Debug("manifest copy unreadable; downloading the package", "url", j.Contents, "error", err)
		return 0, false, nil
	}
	defer closeDoc()
	var n int64
	for {
		rec, err := entries.Next()
		if err != nil {
			return n, isEOF(err) && n > 0, nil
		}
		h, err := r.holding(ctx, rec.URI, rec.ChangeTime, fixity.Expect{Length: rec.Length, Hashes: rec.Hashes}, rec.Version)
		if err != nil {
			return 0, false, err
		}
		if !h.superseded && !h.all {
			return n, false, nil
		}
		n++
	}
}

// openContents reads the copy of package j's index that j links
// (Contents), as j's Index reads it; the function returned closes it.
func (r *run) openContents(ctx context.Context, j source.Package) (source.Entries, func(), error) {
	rc, err := r.openDocument(ctx, j.Contents)
	if err != nil {
		return nil, nil, err
	}
	entries, err := j.Index.Read(rc, r.log)
	if err != nil {
		rc.Close()
		return nil, nil, errclass.About(j.Contents, err)
	}
	e := &endedEntries{Entries: entries}
	return e, func() {
		if e.ended {
			source.ReadWhole(rc) // read to its proper end (source.Entries)
		}
		rc.Close()
	}, nil
}

// endedEntries notes when the entries of a listing ended (io.EOF).
type endedEntries struct {
	source.Entries
	ended bool
}

func (e *endedEntries) Next() (*source.Record, error) {
	rec, err := e.Entries.Next()
	if err == io.EOF {
		e.ended = true
	}
	return rec, err
}

// spooled is a downloaded, verified and opened package, or one opened in
// place by Range (file nil; see readByRange).
type spooled struct {
	file  *os.File
	arch  *unzip.Archive
	stage string // where fetchPackage failed: "download" or "unzip"
	// release, when set, is called once by Close, after the spool file is
	// removed (a package read by Range counts its bytes then; an
	// incremental run frees the package's spool slot).
	release func()
}

// Close removes the spool file.
func (s *spooled) Close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
		s.file = nil
	}
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// packageExpect is what a package's download is checked against: the
// length its dump gives and the strongest of the hashes it gives. The
// package-level check exists for what the entries' own checks cannot see —
// the manifest (which only CRC-32 guards inside the ZIP), the entries the
// manifest does not list, the ZIP's own structure, and that this is the
// very package the dump names rather than another consistent one — and one
// strong digest of the whole guards all of it; md5 beside sha-256 would
// hash every byte a second time for nothing. Every entry is still checked
// against every hash its manifest gives.
func packageExpect(want fixity.Expect) fixity.Expect {
	want.Hashes = want.Hashes.Strongest()
	return want
}

// fetchPackage downloads a package to a spool file, checking it against the
// length and the strongest hash its dump gives (packageExpect), and opens
// it safely. On error the spool
// file is already removed and the returned spooled names the failed stage.
func (r *run) fetchPackage(ctx context.Context, j source.Package) (*spooled, error) {
	sp := &spooled{stage: "download"}
	f, err := os.CreateTemp(r.opts.SpoolDir, "rsharvest-pkg-*.zip")
	if err != nil {
		return sp, errclass.Fatalf("spool: %w", err)
	}
	sp.file = f
	select {
	case <-ctx.Done():
		sp.Close()
		return sp, ctx.Err()
	case r.downloads <- struct{}{}:
	}
	started := time.Now()
	res, err := r.opts.Client.Download(ctx, j.URL, f, packageExpect(j.Expect))
	<-r.downloads
	r.counts.BytesDownloaded.Add(res.Bytes)
	if err != nil {
		sp.Close()
		return sp, err
	}
	r.counts.PackageBytesDone.Add(res.Bytes)
	r.log.Debug("package downloaded", "package", j.URL, "bytes", res.Bytes, "took", time.Since(started))
	r.book.noteValidators(j.URL, fetch.Validators{ETag: res.ETag, LastModified: res.LastModified})
	sp.stage = "unzip"
	arch, err := unzip.Open(f, res.Bytes, r.opts.Limits)
	if err != nil {
		sp.Close()
		return sp, err
	}
	sp.arch = arch
	return sp, nil
}

// entryJob is one manifest entry of a package, to verify and deliver: from
// an unpacked package (arch), from a package still downloading (stream), or
// from its URL (lists, neither set).
type entryJob struct {
	pkg    *source.Package
	rec    *source.Record
	arch   *unzip.Archive
	stream *streamEntry
	done   func()
	// ep is a record's epoch (see progress), or nil.
	ep *epoch
}

// packageHeld says whether the destination holds every resource of
// package j it needs (held; n of them, when its manifest copy tells), and
// for a change package the winners it still needs (want).
func (r *run) packageHeld(ctx context.Context, j source.Package) (want map[string]*source.Record, held bool, n int64, err error) {
	switch {
	case len(j.Wins) > 0:
		if want, err = r.unheld(ctx, j); err != nil {
			return nil, false, 0, err
		}
		held = len(want) == 0
	case j.Contents != "":
		if n, held, err = r.allHeld(ctx, j); err != nil {
			return nil, false, 0, err
		}
		if held {
			r.log.Debug("package skipped: every resource already held", "package", j.URL, "resources", n)
		}
	}
	return want, held, n, nil
}

// readPackage reads one package unit and hands the entries to deliver to
// the workers: every entry, or only the winners (j.Wins) the destination
// does not hold already. It is the one place that chooses how a package's
// entries are obtained:
//
//  1. kept on the spool since the planner read its manifest (spoolCache);
//  2. in place by Range (see range.go): a re-sync's package, or a change
//     package downloaded once already to plan, large enough to pay;
//  3. streamed as it downloads (stream.go), or, with streaming disabled,
//  4. downloaded to a spool file, then read — an incremental run's
//     package under a spool slot either way.
//
// A package whose resources are all held (its manifest copy, or its
// winners, say so) is not fetched at all. (An audit's listing reads only
// what a package lists: see listing.readPackage.) It returns only when
// every entry it handed out is done (or
// ctx ends), then removes the spool file. Failures of the package are
// recorded; only a cancelled run, or a fatal error, is returned.
func (r *run) readPackage(ctx context.Context, j source.Package, out chan<- entryJob) error {
	want, held, n, err := r.packageHeld(ctx, j)
	if err != nil {
		return err
	}
	if held {
		if sp := r.spool.take(j.URL); sp != nil {
			sp.Close()
		}
		r.counts.PackageBytesDone.Add(max(j.Expect.Length, 0))
		return r.send(ctx, result{held: n, pkgDone: true})
	}
	opened := func(sp *spooled, err error) error {
		if err != nil {
			return r.packageFailed(ctx, j, packageHold(j, want), sp.stage, err)
		}
		defer sp.Close()
		return r.unpackPackage(ctx, j, sp.arch, nil, want, out)
	}
	if sp := r.spool.take(j.URL); sp != nil {
		return opened(sp, nil)
	}
	reread := want != nil && j.Contents == "" && j.Expect.Length >= rangeRereadMin
	if !r.opts.DisableRangeResync && (reread || (want == nil && r.resync)) {
		if sp, ok, err := r.readByRange(ctx, j); err != nil || ok {
			return opened(sp, err)
		}
	}
	release := func() {}
	if want != nil {
		var err error
		if release, err = r.spool.acquire(ctx); err != nil {
			return err
		}
	}
	if !r.opts.DisableStreaming {
		defer release()
		return r.streamPackage(ctx, j, want, out)
	}
	sp, err := r.fetchPackage(ctx, j)
	if err != nil {
		release()
		return opened(sp, err)
	}
	sp.release = release
	return opened(sp, nil)
}

// unpackPackage streams the manifest of an opened package and hands each
// entry to the workers — only the winners in want, when want is not nil,
// each matched by its URI, change, time and position — then reports the
// package's entries its manifest does not list (every entry read) or the
// winners it lacks. With st, the package was read as it downloaded: the
// entries delivered then are settled against arch, not delivered again
// (see streamPackage). It returns when every entry it handed out is done,
// or ctx ends.
func (r *run) unpackPackage(ctx context.Context, j source.Package, arch *unzip.Archive, st *streamState, want map[string]*source.Record, out chan<- entryJob) error {
	entries, closeIndex, err := r.openIndex(j, arch)
	if err != nil {
		return r.packageFailed(ctx, j, packageHold(j, want), "manifest", err)
	}
	defer closeIndex()
	return r.readManifest(ctx, j, entries, arch, st, want, out)
}

// openIndex reads the index entry of package j, opened as arch, as j's
// Index reads it; the function returned closes it.
func (r *run) openIndex(j source.Package, arch *unzip.Archive) (source.Entries, func(), error) {
	mrc, err := arch.Manifest()
	if err != nil {
		return nil, nil, err
	}
	entries, err := j.Index.Read(mrc, r.log)
	if err != nil {
		mrc.Close()
		return nil, nil, err
	}
	return entries, func() { mrc.Close() }, nil
}

// readManifest is the one loop over a package's listing: it reads the
// entries of package j — from its manifest.xml in arch, or (arch nil) a
// copy of it, or an audit's listing, which delivers nothing — and hands
// them to the workers (see unpackPackage).
func (r *run) readManifest(ctx context.Context, j source.Package, entries source.Entries, arch *unzip.Archive, st *streamState, want map[string]*source.Record, out chan<- entryJob) error {
	pkgFail := func(stage string, err error) error {
		return r.packageFailed(ctx, j, packageHold(j, want), stage, err)
	}

	var wg sync.WaitGroup
	var broken atomic.Bool
	for seq := int64(0); ; seq++ {
		rec, err := entries.Next()
		if err != nil {
			if isEOF(err) {
				break
			}
			var ee *source.EntryError
			if asEntryError(err, &ee) {
				if want == nil { // else recorded when the plan was made
					r.failIn(ctx, runreport.Failure{URI: orDefault(ee.URI, j.URL), Package: j.URL, Stage: "manifest", Error: err.Error(), Permanent: true}, anySet, j.At, countsResource, nil)
				}
				continue
			}
			// The rest of the manifest cannot be read: the entries already
			// handed out go on, the package counts as failed.
			broken.Store(true)
			if perr := pkgFail("manifest", err); perr != nil {
				return perr
			}
			break
		}
		if !isWinner(want, rec, seq) {
			continue
		}
		if want != nil {
			delete(want, rec.URI) // one entry per winner, even if repeated at the same time
		}
		if st != nil && r.settle(ctx, &j, arch, st, rec) {
			continue
		}
		wg.Add(1)
		select {
		case <-ctx.Done():
			wg.Done()
			return ctx.Err()
		case out <- entryJob{pkg: &j, rec: rec, arch: arch, done: wg.Done}:
			r.counts.Planned.Add(1)
		}
	}
	for uri, w := range want {
		r.failIn(ctx, runreport.Failure{URI: uri, Package: j.URL, Stage: "manifest",
			Error: fmt.Sprintf("the change of %s listed in the manifest copy is not in the package's manifest.xml", w.ChangeTime.UTC().Format(time.RFC3339Nano)), Permanent: true}, j.ResourceSet, w.ChangeTime, countsResource, nil)
	}
	// Wait for the workers to finish this package's entries.
	if err := waitGroup(ctx, &wg); err != nil {
		return err
	}
	if broken.Load() {
		return nil
	}
	return r.packageDone(ctx, j, arch, want == nil)
}

// packageDone ends package j, read in full from arch: when every entry was
// delivered (all), the entries its manifest does not list are skipped.
func (r *run) packageDone(ctx context.Context, j source.Package, arch *unzip.Archive, all bool) error {
	if all && arch != nil {
		for _, name := range arch.Unreferenced() {
			r.log.Warn("package entry not in its manifest; skipped", "package", j.URL, "entry", name)
			if err := r.send(ctx, result{skip: &runreport.Skip{Package: j.URL, Entry: name, Reason: "entry not listed in manifest.xml"}}); err != nil {
				return err
			}
		}
	}
	return r.send(ctx, result{pkgDone: true})
}

// isWinner reports whether rec, the entry at position seq of a package's
// listing, is the winner want holds for its URI (want nil: every entry
// is). A manifest copy is the same document as the manifest.xml, so the
// position identifies the winning entry even among several changes of one
// resource in the same second.
func isWinner(want map[string]*source.Record, rec *source.Record, seq int64) bool {
	if want == nil {
		return true
	}
	w, ok := want[rec.URI]
	return ok && rec.ChangeTime.Equal(w.ChangeTime) && rec.Change == w.Change && seq == w.Seq
}

// packageHold returns the change time a temporary failure of package j,
// read for want (nil: every entry), holds its set's checkpoint at: a
// change package's from, a snapshot package's at.
func packageHold(j source.Package, want map[string]*source.Record) time.Time {
	if want != nil {
		return j.From
	}
	return j.At
}

// waitGroup waits for wg, or for ctx to end.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-allDone:
		return nil
	}
}
