package pipeline

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/resourcesync"
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
	r.counts.PackagesFailed.Add(1)
	r.failIn(ctx, Failure{URI: j.URL, Package: j.URL, Stage: stage, Error: err.Error(), Permanent: errclass.IsPermanent(err)}, j.ResourceSet, hold)
	return nil
}

// allHeld reads a package's manifest copy (rel="contents") and reports
// whether the state holds every resource it lists with the same length and
// hashes (or a newer version). It stops at the first resource not held. A copy that cannot be
// read is not an error: the package is then downloaded as usual.
func (r *run) allHeld(ctx context.Context, copyURL string, at time.Time) (int64, bool, error) {
	rd, closeDoc, err := r.openDocument(ctx, copyURL)
	if err != nil {
		r.log.Debug("manifest copy unreadable; downloading the package", "url", copyURL, "error", err)
		return 0, false, nil
	}
	defer closeDoc()
	var n int64
	for {
		e, err := rd.Next()
		if err != nil {
			return n, isEOF(err) && n > 0, nil
		}
		t := e.ChangeTime()
		if t.IsZero() {
			t = at
		}
		h, err := r.holding(ctx, e.Loc, t, fixity.Expect{Length: e.Metadata.Length, Hashes: e.Metadata.Hashes})
		if err != nil {
			return 0, false, err
		}
		if !h.superseded && !h.all {
			return n, false, nil
		}
		n++
	}
}

// spooled is a downloaded, verified and opened package, or one opened in
// place by Range (file nil; see openRanged).
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

// fetchPackage downloads a package to a spool file, checking it against the
// length and hashes its dump gives, and opens it safely. On error the spool
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
	res, err := r.opts.Client.Download(ctx, j.URL, f, j.Expect)
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
}

// processPackage downloads one package to a spool file, checks it against
// the Resource Dump's length and hashes, opens it safely (or, on a re-sync,
// opens it in place by Range: see openPackage), streams its manifest, and
// hands each entry to the workers. Unless Options.DisableStreaming is set,
// a downloaded package is read as it arrives (streamPackage). It returns
// only when every entry it handed out is done (or ctx ends), then removes
// the spool file. Failures of the package are recorded; only a cancelled
// run, or a fatal error, is returned.
func (r *run) processPackage(ctx context.Context, j source.Package, out chan<- entryJob) error {
	log := r.log.With("package", j.URL)
	if j.Contents != "" {
		n, held, err := r.allHeld(ctx, j.Contents, j.At)
		if err != nil {
			return err
		}
		if held {
			// The manifest copy shows the destination holds every
			// resource of the package: nothing to download.
			log.Debug("package skipped: every resource already held", "resources", n)
			r.counts.PackageBytesDone.Add(max(j.Expect.Length, 0))
			r.counts.Unchanged.Add(n)
			r.counts.PackagesDone.Add(1)
			return nil
		}
	}
	opened := func(sp *spooled, err error) error {
		if err != nil {
			if errclass.IsFatal(err) {
				return err
			}
			return r.packageFailed(ctx, j, j.At, sp.stage, err)
		}
		defer sp.Close()
		return r.unpackPackage(ctx, j, sp.arch, nil, out)
	}
	if r.opts.DisableStreaming {
		return opened(r.openPackage(ctx, j))
	}
	if !r.opts.DisableRangeResync {
		sp, ok, err := r.openRanged(ctx, j)
		if err != nil || ok {
			return opened(sp, err)
		}
	}
	return r.streamPackage(ctx, j, out)
}

// unpackPackage streams the manifest of an opened package and hands each
// entry to the workers, then reports the package's entries its manifest
// does not list. With st, the package was read as it downloaded: the
// entries delivered then are settled against arch, not delivered again
// (see streamPackage). It returns when every entry it handed out is done,
// or ctx ends.
func (r *run) unpackPackage(ctx context.Context, j source.Package, arch *unzip.Archive, st *streamState, out chan<- entryJob) error {
	log := r.log.With("package", j.URL)
	pkgFail := func(stage string, err error) error {
		return r.packageFailed(ctx, j, j.At, stage, err)
	}
	mrc, err := arch.Manifest()
	if err != nil {
		return pkgFail("manifest", err)
	}
	defer mrc.Close()
	rd, err := manifest.NewReader(mrc, r.opts.Document)
	if err != nil {
		return pkgFail("manifest", fmt.Errorf("manifest.xml: %w", err))
	}
	if c := rd.Header().Metadata.Capability; c != manifest.ResourceDumpManifest {
		return pkgFail("manifest", errclass.Permanentf("manifest.xml: capability %q, expected %q", c, manifest.ResourceDumpManifest))
	}

	var wg sync.WaitGroup
	var broken atomic.Bool
	for {
		e, err := rd.Next()
		if err != nil {
			if isEOF(err) {
				break
			}
			var ee *manifest.EntryError
			if asEntryError(err, &ee) {
				r.counts.Failed.Add(1)
				r.fail(ctx, Failure{URI: orDefault(ee.Loc, j.URL), Package: j.URL, Stage: "manifest", Error: err.Error(), Permanent: true}, j.At)
				continue
			}
			// The rest of the manifest cannot be read: the entries already
			// handed out go on, the package counts as failed.
			broken.Store(true)
			if perr := pkgFail("manifest", fmt.Errorf("manifest.xml: %w", err)); perr != nil {
				return perr
			}
			break
		}
		if st != nil && r.settle(ctx, &j, arch, st, e) {
			continue
		}
		wg.Add(1)
		select {
		case <-ctx.Done():
			wg.Done()
			return ctx.Err()
		case out <- entryJob{pkg: &j, rec: resourcesync.RecordOf(e, j.ResourceSet, j.URL, j.At), arch: arch, done: wg.Done}:
		}
	}
	// Wait for the workers to finish this package's entries.
	if err := waitGroup(ctx, &wg); err != nil {
		return err
	}
	if !broken.Load() {
		for _, name := range arch.Unreferenced() {
			r.counts.Skipped.Add(1)
			r.rec.skip(Skip{Package: j.URL, Entry: name, Reason: "entry not listed in manifest.xml"})
			log.Warn("package entry not in its manifest; skipped", "entry", name)
		}
		r.counts.PackagesDone.Add(1)
	}
	return nil
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
