// Package unpack obtains the entries of a ResourceSync package — a ZIP
// with a manifest — for the executor to verify and deliver: downloaded to
// a spool file and read, read as it arrives (stream.go), read in place by
// Range (range.go), or kept on the spool since planning (Spool). It knows
// no sink and no state: every entry, failure and skip it finds goes to the
// Host of the read.
package unpack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// Entry is one manifest entry of a package, to verify and deliver: read
// from the opened package (Arch), or from the package still downloading
// (Stream), or neither (a listing's entry, read from its URL). The
// deliverer of an entry of Arch looks it up there (Archive.Lookup), which
// marks it listed: the archive's entries no entry looked up are skipped as
// not listed.
type Entry struct {
	Package *source.Package
	Record  *source.Record
	Arch    *unzip.Archive
	Stream  *Streamed
	// Done is called once the entry is delivered or failed.
	Done func()
}

// FailureKind says what a Failure counts as.
type FailureKind int

const (
	// PackageFailed is the failure of a whole package.
	PackageFailed FailureKind = iota
	// ResourceFailed is the failure of one resource.
	ResourceFailed
	// Note is said of an entry delivered: it counts as nothing more.
	Note
)

// AnySet is the resource set of a failure that holds whichever set
// reaches it first.
const AnySet = "*"

// Failure is a failure met reading a package. A temporary one (and any of
// a whole package) holds the checkpoint of Set at Hold.
type Failure struct {
	runreport.Failure
	Set  string
	Hold time.Time
	Kind FailureKind
	// Retry, for a resource's own permanent failure, is the record the
	// next run asks for again (see state.Retry), or nil.
	Retry *source.Record
}

// Host is the executor's side of a package read.
type Host interface {
	// Deliver hands e to the workers; it fails only when ctx ends, and
	// then e.Done is the caller's to call.
	Deliver(ctx context.Context, e Entry) error
	// Fail records a failure.
	Fail(ctx context.Context, f Failure)
	// Skip records an entry of the package not delivered.
	Skip(ctx context.Context, s runreport.Skip) error
	// Done ends the package.
	Done(ctx context.Context) error
}

// Reader reads the packages of one run. Its fields are set before the
// first read (Resync once the run knows what the state holds) and not
// changed after.
type Reader struct {
	Client   *fetch.Client
	Limits   unzip.Limits
	SpoolDir string
	// MaxPackageSize caps a package whose dump gives no length (0 or
	// less: no cap): a longer one fails, permanently, wrapping
	// fetch.ErrTooLarge, so an endless body cannot fill the disk.
	MaxPackageSize int64
	// RequireHash: an entry without a hash is not read as it arrives
	// (its failure is recorded by the read from the archive).
	RequireHash bool
	// NoStreaming reads a package only once it is downloaded; NoRange
	// always downloads whole packages.
	NoStreaming, NoRange bool
	// Resync says the destination held resources when the run began:
	// reading a package by Range can pay.
	Resync bool
	Log    *slog.Logger
	// Downloads holds a slot per package download in flight; a package
	// releases its slot once downloaded.
	Downloads chan struct{}
	// Kept bounds the change packages an incremental run downloads to
	// plan, and keeps them between planning and applying.
	Kept *Spool
	// Received counts the bytes downloaded; Progress the bytes of the
	// packages done (both as the download goes).
	Received, Progress *atomic.Int64
	// Fetched, when set, is told the validators of each package
	// downloaded.
	Fetched func(url string, v fetch.Validators)
}

// Read reads one package unit and hands the entries to deliver to h:
// every entry, or only the winners in want (not nil for a change package)
// the destination does not hold already. It is the one place that chooses
// how a package's entries are obtained:
//
//  1. kept on the spool since the planner read its manifest (Spool);
//  2. in place by Range (see range.go): a re-sync's package, or a change
//     package downloaded once already to plan, large enough to pay;
//  3. streamed as it downloads (stream.go), or, with streaming disabled,
//  4. downloaded to a spool file, then read — an incremental run's
//     package under a spool slot either way.
//
// It returns only when every entry it handed out is done (or ctx ends),
// then removes the spool file. Failures of the package are given to h;
// only a cancelled run, or a fatal error, is returned.
func (rd *Reader) Read(ctx context.Context, j source.Package, want map[string]*source.Record, h Host) error {
	opened := func(sp *spooled, err error) error {
		if err != nil {
			return rd.packageFailed(ctx, h, j, packageHold(j, want), sp.stage, err)
		}
		defer sp.Close()
		return rd.unpackPackage(ctx, h, j, sp.arch, nil, want)
	}
	if sp := rd.Kept.take(j.URL); sp != nil {
		return opened(sp, nil)
	}
	reread := want != nil && j.Contents == "" && j.Expect.Length >= rangeRereadMin
	if !rd.NoRange && (reread || (want == nil && rd.Resync)) {
		if sp, ok, err := rd.readByRange(ctx, j); err != nil || ok {
			return opened(sp, err)
		}
	}
	release := func() {}
	if want != nil {
		var err error
		if release, err = rd.Kept.acquire(ctx); err != nil {
			return err
		}
	}
	if !rd.NoStreaming {
		defer release()
		return rd.streamPackage(ctx, h, j, want)
	}
	sp, err := rd.fetchPackage(ctx, j, true)
	if err != nil {
		release()
		return opened(sp, err)
	}
	sp.release = release
	return opened(sp, nil)
}

// Drop removes the package kept for url since planning, if any: the
// destination holds all it needs of it.
func (rd *Reader) Drop(url string) {
	if sp := rd.Kept.take(url); sp != nil {
		sp.Close()
	}
}

// ReadIndex hands h the entries package j lists (only the winners in
// want, when want is not nil), reading only its index entry: by Range
// where the server allows, else downloaded. h delivers none of them from
// the package (a preview, an audit's listing).
func (rd *Reader) ReadIndex(ctx context.Context, j source.Package, want map[string]*source.Record, h Host) error {
	var (
		sp  *spooled
		ok  bool
		err error
	)
	if !rd.NoRange {
		sp, ok, err = rd.readByRange(ctx, j)
	}
	if err == nil && !ok {
		sp, err = rd.fetchPackage(ctx, j, true)
	}
	if err != nil {
		return rd.packageFailed(ctx, h, j, j.At, sp.stage, err)
	}
	defer sp.Close()
	entries, closeIndex, err := rd.openIndex(j, sp.arch)
	if err != nil {
		return rd.packageFailed(ctx, h, j, j.At, "manifest", err)
	}
	defer closeIndex()
	return rd.ReadListing(ctx, h, j, entries, want)
}

// ReadListing hands h the entries of package j that entries lists — a
// copy of its index — without the package (see ReadIndex).
func (rd *Reader) ReadListing(ctx context.Context, h Host, j source.Package, entries source.Entries, want map[string]*source.Record) error {
	return rd.readManifest(ctx, h, j, entries, nil, nil, want)
}

// OpenForPlan downloads a change package that links no manifest copy, for
// the planner to read its index entry (source.Services.OpenPackage);
// closing it keeps the package on the spool (see Spool) for applying its
// winners.
func (rd *Reader) OpenForPlan(ctx context.Context, j source.Package) (io.ReadCloser, error) {
	release, err := rd.Kept.acquire(ctx)
	if err != nil {
		return nil, err
	}
	sp, err := rd.fetchPackage(ctx, j, true)
	if err != nil {
		release()
		return nil, &source.StageError{Stage: sp.stage, Err: err}
	}
	sp.release = release
	mrc, err := sp.arch.Manifest()
	if err != nil {
		sp.Close()
		return nil, &source.StageError{Stage: "manifest", Err: err}
	}
	return readCloser{mrc, func() error {
		err := mrc.Close()
		rd.Kept.keep(j.URL, sp)
		return err
	}}, nil
}

// readCloser reads r; Close calls close (a package's index entry keeps
// the package).
type readCloser struct {
	io.Reader
	close func() error
}

func (c readCloser) Close() error { return c.close() }

// rangeRereadMin is the least declared length of a package that an
// incremental run reads again by Range rather than downloading it again:
// below it, Range's read-ahead blocks (fetch.RangeBlock, doubling) cost
// about as much as the whole package.
const rangeRereadMin = 16 * fetch.RangeBlock

// packageFailed gives h the failure of a whole package at a stage; a
// temporary failure holds the next start at hold. It returns what the
// caller must return: nil, or the error when it is fatal or ctx ended.
func (rd *Reader) packageFailed(ctx context.Context, h Host, j source.Package, hold time.Time, stage string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errclass.IsFatal(err) {
		return err
	}
	h.Fail(ctx, Failure{Failure: runreport.Failure{URI: j.URL, Package: j.URL, Stage: stage, Error: err.Error(), Permanent: errclass.IsPermanent(err)},
		Set: j.ResourceSet, Hold: hold, Kind: PackageFailed})
	return nil
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
func (rd *Reader) packageExpect(want fixity.Expect) fixity.Expect {
	want.Hashes = want.Hashes.Strongest()
	if want.Length < 0 && want.Max <= 0 && rd.MaxPackageSize > 0 {
		want.Max = rd.MaxPackageSize
	}
	return want
}

// fetchPackage downloads a package to a spool file, checking it against the
// length and the strongest hash its dump gives (packageExpect), and opens
// it safely. On error the spool file is already removed and the returned
// spooled names the failed stage.
// When count, its bytes count in Progress (a package downloaded again does
// not).
func (rd *Reader) fetchPackage(ctx context.Context, j source.Package, count bool) (*spooled, error) {
	sp := &spooled{stage: "download"}
	f, err := os.CreateTemp(rd.SpoolDir, "rsharvest-pkg-*.zip")
	if err != nil {
		return sp, errclass.Fatalf("spool: %w", err)
	}
	sp.file = f
	select {
	case <-ctx.Done():
		sp.Close()
		return sp, ctx.Err()
	case rd.Downloads <- struct{}{}:
	}
	started := time.Now()
	res, err := rd.Client.Download(ctx, j.URL, f, rd.packageExpect(j.Expect))
	<-rd.Downloads
	rd.Received.Add(res.Bytes)
	if err != nil {
		sp.Close()
		return sp, err
	}
	if count {
		rd.Progress.Add(res.Bytes)
	}
	rd.Log.Debug("package downloaded", "package", j.URL, "bytes", res.Bytes, "took", time.Since(started))
	rd.fetched(j.URL, res)
	sp.stage = "unzip"
	arch, err := unzip.Open(f, res.Bytes, rd.Limits)
	if err != nil {
		sp.Close()
		return sp, err
	}
	sp.arch = arch
	return sp, nil
}

// fetched tells Fetched the validators of a package downloaded.
func (rd *Reader) fetched(url string, res fetch.Result) {
	if rd.Fetched != nil {
		rd.Fetched(url, fetch.Validators{ETag: res.ETag, LastModified: res.LastModified})
	}
}

// unpackPackage streams the manifest of an opened package and hands each
// entry to h — only the winners in want, when want is not nil, each
// matched by its URI, change, time and position — then reports the
// package's entries its manifest does not list (every entry read) or the
// winners it lacks. With st, the package was read as it downloaded: the
// entries delivered then are settled against arch, not delivered again
// (see streamPackage). It returns when every entry it handed out is done,
// or ctx ends.
func (rd *Reader) unpackPackage(ctx context.Context, h Host, j source.Package, arch *unzip.Archive, st *streamState, want map[string]*source.Record) error {
	entries, closeIndex, err := rd.openIndex(j, arch)
	if err != nil {
		return rd.packageFailed(ctx, h, j, packageHold(j, want), "manifest", err)
	}
	defer closeIndex()
	return rd.readManifest(ctx, h, j, entries, arch, st, want)
}

// openIndex reads the index entry of package j, opened as arch, as j's
// Index reads it; the function returned closes it.
func (rd *Reader) openIndex(j source.Package, arch *unzip.Archive) (source.Entries, func(), error) {
	mrc, err := arch.Manifest()
	if err != nil {
		return nil, nil, err
	}
	entries, err := j.Index.Read(mrc, rd.Log)
	if err != nil {
		mrc.Close()
		return nil, nil, err
	}
	return entries, func() { mrc.Close() }, nil
}

// readManifest is the one loop over a package's listing: it reads the
// entries of package j — from its manifest.xml in arch, or (arch nil) a
// copy of it, or an audit's listing, which delivers nothing — and hands
// them to h (see unpackPackage).
func (rd *Reader) readManifest(ctx context.Context, h Host, j source.Package, entries source.Entries, arch *unzip.Archive, st *streamState, want map[string]*source.Record) error {
	var wg sync.WaitGroup
	broken := false
	for seq := int64(0); ; seq++ {
		rec, err := entries.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			var ee *source.EntryError
			if errors.As(err, &ee) {
				if want == nil { // else recorded when the plan was made
					f := Failure{Failure: runreport.Failure{URI: cmp.Or(ee.URI, j.URL), Package: j.URL, Stage: "manifest", Error: err.Error(), Permanent: true},
						Set: AnySet, Hold: j.At, Kind: ResourceFailed}
					if ee.URI != "" && source.CheckURI(ee.URI) == nil {
						// The resource it names is asked for again by the
						// next incremental run, at the package's time.
						f.Retry = &source.Record{URI: ee.URI, ResourceSet: j.ResourceSet, Listed: j.URL, Length: -1, ChangeTime: j.At}
					}
					h.Fail(ctx, f)
				}
				continue
			}
			// The rest of the manifest cannot be read: the entries already
			// handed out go on, the package counts as failed.
			broken = true
			if perr := rd.packageFailed(ctx, h, j, packageHold(j, want), "manifest", err); perr != nil {
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
		if st != nil && rd.settle(ctx, h, &j, arch, st, rec) {
			continue
		}
		if st != nil {
			if se := st.byURI[rec.URI]; se != nil {
				se.redone = true // delivered again below, as the archive's manifest lists it
			}
		}
		from := arch
		if st != nil && st.readsHole(arch, rec.Path) {
			// Its data went to a worker from memory (direct.go).
			again, err := rd.refetch(ctx, j, st)
			if err != nil {
				if ctx.Err() != nil || errclass.IsFatal(err) {
					return cmp.Or(ctx.Err(), err)
				}
				// Temporary whatever the download's error: the entry's
				// bytes were in the package verified, so the next run
				// must ask for it again (a package changed or gone since
				// is planned afresh then).
				h.Fail(ctx, Failure{Failure: runreport.Failure{URI: rec.URI, Package: j.URL, Stage: "download", Error: err.Error()},
					Set: j.ResourceSet, Hold: packageHold(j, want), Kind: ResourceFailed})
				continue
			}
			from = again
		}
		wg.Add(1)
		if err := h.Deliver(ctx, Entry{Package: &j, Record: rec, Arch: from, Done: wg.Done}); err != nil {
			wg.Done()
			return err
		}
	}
	for uri, w := range want {
		// The next run asks for the resource itself (not in a package).
		retry := *w
		retry.Path, retry.Seq = "", 0
		h.Fail(ctx, Failure{Failure: runreport.Failure{URI: uri, Package: j.URL, Stage: "manifest",
			Error: fmt.Sprintf("the change of %s listed in the manifest copy is not in the package's manifest.xml", w.ChangeTime.UTC().Format(time.RFC3339Nano)), Permanent: true},
			Set: j.ResourceSet, Hold: w.ChangeTime, Kind: ResourceFailed, Retry: &retry})
	}
	// Wait for the workers to finish this package's entries.
	if err := waitGroup(ctx, &wg); err != nil {
		return err
	}
	if broken {
		return nil
	}
	if st != nil {
		rd.unlisted(ctx, h, j, arch, st)
	}
	return rd.packageDone(ctx, h, j, arch, want == nil)
}

// unlisted records, under its URI, each entry phase 1 delivered as the
// manifest.xml at the package's start listed it, that the archive's own
// manifest.xml (the central directory's, read by phase 2) does not list
// so, nor lists its URI: a package with two manifests. Its bytes were
// verified against the listing they were delivered by, and stay; the
// failure says so, and the entry is not reported skipped as well.
func (rd *Reader) unlisted(ctx context.Context, h Host, j source.Package, arch *unzip.Archive, st *streamState) {
	for _, se := range st.order {
		if !se.handed || se.settled || se.redone {
			continue
		}
		_, _ = arch.Lookup(se.path) // referenced: reported here, not as skipped
		h.Fail(ctx, Failure{Failure: runreport.Failure{URI: se.loc, Package: j.URL, Stage: "manifest", Permanent: true,
			Error: fmt.Sprintf("entry %q was delivered as it arrived, as the manifest.xml at the start of the package listed it; the package's own manifest.xml (its central directory's) does not list it so", se.path)},
			Set: j.ResourceSet, Hold: j.At, Kind: Note})
		rd.Log.Warn("an entry delivered as it arrived is not listed so by the package's own manifest.xml; its bytes verified against the listing they came with and stay delivered",
			"package", j.URL, "uri", se.loc, "entry", se.path)
	}
}

// packageDone ends package j, read in full from arch: when every entry was
// delivered (all), the entries its manifest does not list are skipped.
func (rd *Reader) packageDone(ctx context.Context, h Host, j source.Package, arch *unzip.Archive, all bool) error {
	if all && arch != nil {
		for _, name := range arch.Unreferenced() {
			rd.Log.Warn("package entry not in its manifest; skipped", "package", j.URL, "entry", name)
			if err := h.Skip(ctx, runreport.Skip{Package: j.URL, Entry: name, Reason: "entry not listed in manifest.xml"}); err != nil {
				return err
			}
		}
	}
	return h.Done(ctx)
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
// change package's from, or the earliest change of want if earlier (a
// package may list a change before its from); a snapshot package's at.
func packageHold(j source.Package, want map[string]*source.Record) time.Time {
	if want == nil {
		return j.At
	}
	hold := j.From
	if hold.IsZero() {
		return hold // no advance
	}
	for _, w := range want {
		if !w.ChangeTime.IsZero() && w.ChangeTime.Before(hold) {
			hold = w.ChangeTime
		}
	}
	return hold
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
