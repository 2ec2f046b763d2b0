package unpack

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/unzip"
)

// Streaming: processing a package while it downloads.
//
// The package's bytes reach the package's goroutine in one of two ways.
// Downloaded in one stream (the default), they are handed over as they
// arrive (direct.go): the data of the entries phase 1 hands out is read
// into memory, and every other byte is written to the spool file, at its
// offset, by the package's goroutine. Downloaded in Range parts, they are
// written to the spool file by the download, and read behind it
// (spoolProgress tells how far the file is written). Either way, an entry
// handed out from the spool file is handed out once its bytes are there.
//
// Phase 1, while the bytes arrive: when the first
// entry is manifest.xml (stored or deflated, its sizes in its local header,
// at most maxStreamManifest bytes), the local file headers that follow are
// read in order (unzip.LocalScanner) and each entry is matched by name
// against the manifest, read ahead by at most streamWindow entries. An entry
// found, once its bytes have arrived, goes to the workers as usual, read
// from memory or the spool file by its local header (unzip.LocalOpener): inflated,
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
// delivered in phase 1 is settled, not delivered again, when the manifest
// lists it the same way; the central directory must accept it (Lookup)
// with the same method, sizes and CRC-32 as its local header, or the
// refusal is recorded (below). Every other entry is delivered from the
// archive as usual. When phase 1 handed out every entry the
// manifest lists and the archive's manifest.xml has the same bytes, the
// manifest is not parsed again (confirmWhole).
//
// What phase 1 delivered is final: an entry reaches the sinks when its own
// checks pass (its manifest entry's hashes and length; its CRC-32 and
// length when the manifest gives no hash), and its outcome goes to the
// commit stage at once, as every entry's does. Nothing is withheld, and
// nothing delivered is taken back. An entry whose bytes fail their checks
// in phase 1 records nothing then: it is left to phase 2, which delivers it
// from the archive once the package is verified, and records its failure
// if it fails again (Streamed.Leave); a byte damaged in transit is the
// package's failure, not the entry's.
//
//   - Phase 2 does not deliver again an entry phase 1 delivered when the
//     manifest lists its path the same way. It still looks the entry up in
//     the central directory; when the central directory refuses it (a
//     duplicate name, a symlink or device attribute) or describes it
//     otherwise than its local header, the failure is recorded under the
//     entry's URI with the same words as without streaming, so the run ends
//     partial, but the resource stays delivered: its bytes verified against
//     its manifest entry.
//   - A package whose download fails (its length or hashes do not match the
//     Resource Dump, or a transfer failure outlasts the retries), or whose
//     central directory or manifest cannot be read, is recorded as that
//     package's failure, so the next run fetches it again; the entries that
//     verified on their own stay delivered and recorded.
//   - When the download starts over (the package changed while it
//     downloaded, or its first download did not match the dump), the spool
//     file empties under phase 1: a streamed entry that fails from then on
//     records nothing and is left to phase 2, which delivers it from the
//     archive. An entry phase 1 delivered that the new manifest lists
//     otherwise is delivered again by phase 2.
//
// An incremental run streams a change package's winners alone (want): an
// entry phase 1 passes by leaves the rest to phase 2, which reads the
// manifest again and delivers only the winners phase 1 did not. Packages
// read by Range, or kept on the spool since planning, do not stream (see
// Reader.Read), and Reader.NoStreaming turns streaming off.

const (
	// maxStreamManifest caps the uncompressed manifest.xml of a package
	// read as it arrives, which bounds the entries phase 1 remembers.
	maxStreamManifest = 16 << 20
	// streamWindow caps the manifest entries read ahead of the ZIP
	// entries to match their names.
	streamWindow = 10_000
	// maxStreamEntries caps the entries one package delivers in phase 1
	// (each remembered until phase 2: under 1 KiB each).
	maxStreamEntries = 20_000
)

// errRestarted means a package's download began again from byte 0 (the
// package changed under it): what was read from the spool file is void.
var errRestarted = errors.New("unpack: the package download started over")

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

// markRestarted records that the download began again from byte 0.
func (p *spoolProgress) markRestarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restarted = true
	p.signal()
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
		return r.off, errors.New("unpack: spool reader seeks from the start or the current offset only")
	}
	if offset < 0 {
		return r.off, errors.New("unpack: negative offset")
	}
	r.off = offset
	return offset, nil
}

// Streamed is an entry met in phase 1, delivered as it arrives: what its
// local header and the manifest said of it.
type Streamed struct {
	local  unzip.LocalEntry
	loc    string // the manifest entry's URI
	path   string // and its path, as written
	sum    entrySum
	opener *unzip.LocalOpener
	prog   *spoolProgress
	// header and data are the entry's local header and compressed data,
	// claimed from the download (direct.go), until the entry is done;
	// claimed stays set while they are missing from the spool file (see
	// Leave).
	header, data []byte
	claimed      bool
	dir          *direct // the package's, when read without a spool
	// handed: given to the workers in phase 1 (and not left to phase 2
	// by them). settled: phase 2 met it in the manifest. Both are the
	// package goroutine's, but for the worker that leaves the entry to
	// phase 2 before the package goroutine waits for it. redone: phase 2
	// delivered its URI again, as the archive's manifest.xml lists it.
	handed, settled, redone bool
}

// Leave reports whether the failure err of the entry is left to phase 2,
// which delivers it again from the archive once the package is downloaded
// and verified, and records the failure then if it is the entry's own. It
// is so for a failure of the entry's bytes (its CRC-32, sizes, deflate
// stream or hashes), which may be the transfer's until the package's own
// length and hash vouch for them — a byte damaged on the way — and for any
// failure once the download has started over (the spool file emptied under
// the entry). An entry read from memory has its bytes written to the spool
// file for phase 2 (direct.go). It is called on the worker, before the
// entry is done.
func (se *Streamed) Leave(err error) bool {
	if errors.Is(err, context.Canceled) || !(se.prog.wasRestarted() || bytesFailed(err)) {
		return false
	}
	if se.data != nil && se.dir != nil && se.dir.fill(se) {
		se.claimed = false
	}
	se.handed = false
	return true
}

// bytesFailed reports whether err is a failure of an entry's bytes.
func bytesFailed(err error) bool {
	for _, e := range []error{fixity.ErrMismatch, unzip.ErrChecksum, unzip.ErrSizeMismatch, unzip.ErrCorrupt, unzip.ErrRatio} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Size is the entry's uncompressed size, as its local header gives it.
func (se *Streamed) Size() int64 { return se.local.Size }

// Open reads the entry's bytes from memory, or from the spool file.
func (se *Streamed) Open(context.Context) (io.ReadCloser, error) {
	open := se.opener.Open
	if se.data != nil {
		open = func(e unzip.LocalEntry) (io.ReadCloser, error) { return se.opener.OpenData(e, se.data) }
	}
	rc, err := open(se.local)
	if err != nil {
		return nil, fmt.Errorf("open ZIP entry: %w", err)
	}
	return rc, nil
}

// streamState is what phase 1 did for a package.
type streamState struct {
	opener  *unzip.LocalOpener
	entries map[string]*Streamed // by entry name
	byURI   map[string]*Streamed
	order   []*Streamed // as handed out
	stopped string      // why phase 1 stopped
	// whole: phase 1 read manifest.xml to its end (its bytes hash to
	// manifestSum) and handed out an entry for every one it lists.
	whole       bool
	manifestSum [sha256.Size]byte
	// hs are the ranges of the spool file phase 1 left unwritten
	// (direct.go), known once the download has ended; first the length
	// and digest of the download.
	hs    []span
	first fixity.Expect
	// restarted: the download started over after phase 1 began, so
	// phase 1 read local headers of another version of the package than
	// the one verified.
	restarted bool
	// again is the package downloaded again for the listings phase 2
	// finds in holes of the spool file, or why it could not be.
	again    *spooled
	againErr error
}

// streamPackage downloads a package while phase 1 reads it (see above),
// what phase 1 does not claim going to a spool file; then, once the
// download is verified, phase 2 opens that file and delivers
// (or confirms) every entry, or every winner in want when want is not nil
// (see above). Like Read it gives h the package's failures and returns
// only a fatal error or ctx's.
func (rd *Reader) streamPackage(ctx context.Context, h Host, j source.Package, want map[string]*source.Record) error {
	log := rd.Log.With("package", j.URL)
	f, err := os.CreateTemp(rd.SpoolDir, "rsharvest-pkg-*.zip")
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
	case rd.Downloads <- struct{}{}:
	}
	// The download: it frees its slot when it ends, and is always waited
	// for before the spool file is removed. It writes the spool file
	// itself when in Range parts; else this goroutine writes it (and a
	// worker, an entry left to phase 2: see Streamed.Leave).
	prog := &spoolProgress{}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type downloaded struct {
		res fetch.Result
		err error
	}
	dl := make(chan downloaded, 1)
	started := time.Now()
	// Without Range parts, the download is handed over as it arrives and
	// phase 1 claims what it can (direct.go); with them, the download
	// writes the spool file.
	var (
		src arrival = &spoolReader{ctx: ctx, f: f, p: prog}
		dir *direct
	)
	if !rd.Client.InParts() {
		t := newTap(dctx)
		dir = newDirect(ctx, t, f, prog)
		src = dir
	}
	go func() {
		var shown int64 // bytes of this package counted in PackageBytesDone
		progress := func(n int64) {
			prog.update(n)
			if n > shown {
				rd.Progress.Add(n - shown)
				shown = n
			}
		}
		var (
			res fetch.Result
			err error
		)
		if dir != nil {
			res, err = rd.Client.DownloadTo(dctx, j.URL, dir.t, rd.packageExpect(j.Expect), progress)
			dir.t.close(err)
		} else {
			res, err = rd.Client.DownloadProgress(dctx, j.URL, f, rd.packageExpect(j.Expect), progress)
		}
		<-rd.Downloads
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

	st := &streamState{opener: unzip.NewLocalOpener(f, rd.Limits), entries: map[string]*Streamed{}, byURI: map[string]*Streamed{}}
	defer func() {
		if st.again != nil {
			st.again.Close()
		}
	}()
	var wg sync.WaitGroup
	if err := rd.follow(ctx, h, &j, src, prog, st, want, &wg); err != nil {
		return err
	}
	if dir != nil {
		// What phase 1 left goes to the spool file.
		if err := dir.drain(ctx); err != nil {
			return err
		}
	}
	var d downloaded
	select {
	case <-ctx.Done():
		return ctx.Err()
	case d = <-dl:
		joined = true
	}
	rd.Received.Add(d.res.Bytes)
	if d.err == nil {
		rd.fetched(j.URL, d.res)
	}
	spooled := d.res.Bytes
	if dir != nil {
		spooled = dir.spooled
	}
	log.Debug("package downloaded", "bytes", d.res.Bytes, "spooled", spooled, "took", time.Since(started), "streamed", len(st.entries), "stopped", st.stopped)
	// Every outcome of phase 1 is in before phase 2 looks at them.
	if err := waitGroup(ctx, &wg); err != nil {
		return err
	}
	pkgFail := func(stage string, err error) error {
		if errclass.IsFatal(err) {
			return err
		}
		return rd.packageFailed(ctx, h, j, packageHold(j, want), stage, err)
	}
	if d.err != nil {
		return pkgFail("download", d.err)
	}
	st.hs, st.first = st.holes(), fixity.Expect{Length: d.res.Bytes, Hashes: d.res.Hashes}
	arch, err := unzip.Open(f, d.res.Bytes, rd.Limits)
	if err != nil && st.directoryInHole(f, d.res.Bytes) {
		// A local header that gave a larger size than its entry's let
		// phase 1 claim bytes of what followed, the central directory
		// too: the holes read as zeros, which no directory record is.
		// The package downloaded again tells whether it is the
		// package's own fault.
		if arch, err = rd.refetch(ctx, j, st); err == nil {
			st.hs = nil // every listing is read from that download
		}
	}
	if err != nil {
		return pkgFail("unzip", err)
	}
	st.restarted = prog.wasRestarted()
	if rd.confirmWhole(j, arch, st, want) {
		return rd.packageDone(ctx, h, j, arch, want == nil)
	}
	return rd.unpackPackage(ctx, h, j, arch, st, want)
}

// confirmWhole is phase 2 when phase 1 handed out every entry of the
// manifest (every winner of want, when not nil) from a download that did
// not start over: when the archive's manifest.xml has the same bytes, and
// the central directory accepts and describes every entry as its local
// header did, the package is done without reading the manifest again (the
// caller ends it), and it reports true. Otherwise it reports false (having
// changed nothing but the entries' referenced marks): unpackPackage
// settles the package, and records the winners manifest.xml lacks.
func (rd *Reader) confirmWhole(j source.Package, arch *unzip.Archive, st *streamState, want map[string]*source.Record) bool {
	if !st.whole || st.restarted {
		return false
	}
	for _, se := range st.order {
		if !se.handed {
			return false // left to phase 2 (see Leave)
		}
	}
	for uri := range want {
		if st.byURI[uri] == nil {
			return false // a winner manifest.xml does not list
		}
	}
	rc, err := arch.Manifest()
	if err != nil {
		return false
	}
	h := sha256.New()
	_, err = io.Copy(h, rc)
	rc.Close()
	if err != nil || [sha256.Size]byte(h.Sum(nil)) != st.manifestSum {
		return false
	}
	for _, se := range st.order {
		if lookupStreamed(arch, se) != nil {
			return false
		}
	}
	for _, se := range st.order {
		se.settled = true
	}
	rd.Log.Debug("package confirmed as streamed", "package", j.URL, "entries", len(st.order))
	return true
}

// lookupStreamed looks a streamed entry up in the central directory, which
// must accept it and describe it as its local header did.
func lookupStreamed(arch *unzip.Archive, se *Streamed) error {
	f, err := arch.Lookup(se.path)
	if err != nil {
		return err
	}
	if f.Method != se.local.Method || f.Size != se.local.Size || f.CompressedSize != se.local.CompressedSize || f.CRC32 != se.local.CRC32 ||
		f.HeaderOffset() != se.local.HeaderOffset {
		return errclass.Permanentf("unzip: entry %q: the central directory describes it otherwise than its local header", se.path)
	}
	return nil
}

// follow is phase 1: it reads the package's local headers as they arrive
// and hands the entries it can match with the manifest to the workers. It
// returns nil when it stops, whatever the reason; an error only when ctx
// ends.
func (rd *Reader) follow(ctx context.Context, h Host, j *source.Package, src arrival, prog *spoolProgress, st *streamState, want map[string]*source.Record, wg *sync.WaitGroup) error {
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
	dir, _ := src.(*direct)
	sc := unzip.NewLocalScanner(src, rd.Limits)
	first, err := sc.Next()
	switch {
	case err != nil:
		return stop("first entry", err)
	case first.Name != unzip.ManifestName:
		return stop("first entry is not manifest.xml", nil)
	case first.Size > maxStreamManifest:
		return stop("manifest.xml too large to stream", nil)
	}
	if err := src.have(ctx, first.End()); err != nil {
		return stop("manifest.xml", err)
	}
	mrc, err := st.opener.Open(first)
	if err != nil {
		return stop("manifest.xml", err)
	}
	defer mrc.Close()
	// Phase 2 reads the manifest again, unless phase 1 read all of it
	// (and its bytes are the archive's), and reports what is wrong in it.
	msum := sha256.New()
	mtee := io.TeeReader(mrc, msum)
	mr, err := j.Index.Read(mtee, slog.New(slog.DiscardHandler))
	if err != nil {
		return stop("index", err)
	}
	// pending are manifest entries read ahead, not yet matched, with
	// their positions in the manifest (mseq: the next one's).
	type ahead struct {
		e   *source.Record
		seq int64
	}
	pending := map[string]ahead{}
	var mseq int64
	manifestEnded := false // by an error, or io.EOF
	skipped := false       // manifest entries not handed out
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
		a := pending[le.Name]
		delete(pending, le.Name)
		e, seq := a.e, a.seq
		for e == nil && !manifestEnded && len(pending) < streamWindow {
			me, err := mr.Next()
			mseq++
			if err != nil {
				var ee *source.EntryError
				if errors.As(err, &ee) {
					skipped = true
					continue // phase 2 reports it
				}
				manifestEnded, skipped = true, true
				break
			}
			if me.Path == "" {
				skipped = true
				continue
			}
			name := unzip.PathKey(me.Path)
			if name == le.Name {
				e, seq = me, mseq-1
				break
			}
			if _, dup := pending[name]; dup || st.entries[name] != nil {
				return stop("a path listed twice in manifest.xml", nil)
			}
			pending[name] = ahead{me, mseq - 1}
		}
		if e == nil {
			return stop(fmt.Sprintf("entry %q not found in manifest.xml", le.Name), nil)
		}
		se := &Streamed{local: le, loc: e.URI, path: e.Path, sum: sumEntry(e), opener: st.opener, prog: prog}
		if !isWinner(want, e, seq) {
			// Not to apply: phase 2 reads the manifest again, and passes
			// it by.
			st.entries[le.Name] = se
			skipped = true
			continue
		}
		if e.URI == "" || (e.Hashes.IsZero() && rd.RequireHash) {
			// It fails before its bytes are looked at: phase 2 records
			// it (not streamed, the entry stays unreferenced, as
			// without streaming).
			st.entries[le.Name] = se
			skipped = true
			continue
		}
		if st.byURI[e.URI] != nil {
			return stop("a URI listed twice in manifest.xml", nil)
		}
		c, err := src.claim(ctx, le)
		if err == nil && c == nil {
			err = src.have(ctx, le.End())
		}
		if err != nil {
			return stop("entry data", err)
		}
		done := wg.Done
		if c != nil {
			se.header, se.data, se.claimed, se.dir = c.header, c.data, true, dir
			done = func() {
				se.header, se.data = nil, nil
				c.release()
				wg.Done()
			}
		}
		st.entries[le.Name] = se
		st.byURI[e.URI] = se
		st.order = append(st.order, se)
		se.handed = true
		wg.Add(1)
		if err := h.Deliver(ctx, Entry{Package: j, Record: e, Stream: se, Done: done}); err != nil {
			done()
			return err
		}
	}
}

// settle is phase 2 for manifest entry e: when phase 1 delivered the
// entry of e's path, listed the same way, it is settled here and settle
// reports true; otherwise false, and e is delivered from the archive. A
// settled entry the central directory refuses, or describes otherwise than
// its local header, stays delivered (its bytes verified against e), and the
// refusal is recorded under e's URI as without streaming.
//
// When the download started over, phase 1 read another version of the
// package than the one verified: an entry is settled only when e gives a
// digest (so the bytes delivered are the ones the verified manifest
// names), and the central directory need only accept it (the entry may
// sit elsewhere in this version); else it is delivered again.
func (rd *Reader) settle(ctx context.Context, h Host, j *source.Package, arch *unzip.Archive, st *streamState, e *source.Record) bool {
	se := st.entries[unzip.PathKey(e.Path)]
	if e.Path == "" || se == nil || !se.handed || se.settled || se.sum != sumEntry(e) {
		return false
	}
	if st.restarted && e.Hashes.IsZero() {
		return false
	}
	se.settled = true
	var err error
	if st.restarted {
		_, err = arch.Lookup(se.path)
	} else {
		err = lookupStreamed(arch, se)
	}
	if err != nil {
		h.Fail(ctx, Failure{Failure: runreport.Failure{URI: e.URI, Package: j.URL, Stage: "unzip", Error: err.Error(), Permanent: true},
			Set: j.ResourceSet, Hold: e.ChangeTime, Kind: Note})
		rd.Log.Warn("the package's central directory refuses an entry delivered as it arrived; its bytes verified against its manifest entry and stay delivered",
			"package", j.URL, "uri", e.URI, "error", err)
	}
	return true
}

// entrySum is a digest of what a listing's entry says of its resource: all
// that the state records of it. Phase 1 keeps it instead of the entry.
type entrySum [sha256.Size]byte

func sumEntry(e *source.Record) entrySum {
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
	str(e.URI)
	str(e.Version)
	str(e.Location)
	tm(e.Lastmod)
	tm(e.ChangeTime)
	str(string(e.Change))
	str(e.Path)
	b = binary.AppendVarint(b, e.Length)
	str(e.Type)
	str(string(e.Hashes.MD5))
	str(string(e.Hashes.SHA1))
	str(string(e.Hashes.SHA256))
	str(string(e.Hashes.SHA512))
	b = binary.AppendUvarint(b, uint64(len(e.Hashes.Unknown)))
	for _, u := range e.Hashes.Unknown {
		str(u)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Links)))
	for _, l := range e.Links {
		str(l.Rel)
		str(l.Href)
		str(l.Type)
		b = binary.AppendVarint(b, int64(l.Pri))
	}
	b = binary.AppendUvarint(b, uint64(len(e.Mirrors)))
	for _, m := range e.Mirrors {
		str(m)
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
