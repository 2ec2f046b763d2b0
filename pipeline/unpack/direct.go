package unpack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/unzip"
)

// Streaming without a spool: a package whose download is handed over as it
// arrives (fetch.DownloadTo), rather than written to its spool file by the
// download.
//
// The package goroutine reads the bytes in order, as phase 1 needs them
// (see stream.go). The data of an entry phase 1 hands out, when it is at
// most maxClaim bytes compressed, is read into memory (claimed), with its
// local header, and given to the worker from there; every other byte — the
// manifest, larger entries, entries phase 1 passes by, and all that
// follows once phase 1 stops — is written to the spool file at its offset,
// from which the workers and phase 2 read as with a spooled download. The
// spool file so holds the whole package but for the entries claimed:
// holes, which phase 2 does not read, since those entries are settled (see
// Reader.settle), or written by the worker when the entry failed and is
// left to phase 2 (Streamed.Leave). A listing of the package that phase 2 must
// deliver from one of those holes — the manifest lists a path twice — is
// delivered from the package downloaded again (Reader.refetch).
//
// The memory is bounded: each package has maxClaimed bytes of claims
// outstanding at most; phase 1 waits for the workers to free some (an
// entry's memory is freed when it is done) and the download waits for
// phase 1, as it would for a slow disk. When the download starts over, the
// spool file is emptied and written again from byte 0, in full: there are
// no holes after a restart.

const (
	// maxClaim is the largest compressed entry read into memory.
	maxClaim = 1 << 20
	// maxClaimed bounds the memory of a package's claims outstanding.
	maxClaimed = 8 << 20
)

// tapChunk is a message of the download to the package goroutine: bytes, or
// that the download starts over.
type tapChunk struct {
	p       []byte
	restart bool
}

// tap hands a package's download to the package goroutine as it arrives;
// it is the download's fetch.Destination. A Write returns once the reader
// has taken all its bytes (nothing is buffered), or fails once ctx — the
// download's — ends. The download goroutine closes it when the download
// ends, with the download's error.
type tap struct {
	ctx     context.Context
	ch      chan tapChunk
	taken   chan struct{} // the last chunk's bytes are all taken
	written bool          // bytes written since the last Restart (the writer's)
	err     error         // the download's, set before ch closes
}

var _ fetch.Destination = (*tap)(nil)

func newTap(ctx context.Context) *tap {
	return &tap{ctx: ctx, ch: make(chan tapChunk), taken: make(chan struct{})}
}

func (t *tap) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := t.send(tapChunk{p: p}); err != nil {
		return 0, err
	}
	select {
	case <-t.ctx.Done():
		return 0, t.ctx.Err()
	case <-t.taken:
	}
	t.written = true
	return len(p), nil
}

func (t *tap) Restart() error {
	if !t.written {
		return nil // nothing to void
	}
	t.written = false
	return t.send(tapChunk{restart: true})
}

func (t *tap) send(c tapChunk) error {
	select {
	case <-t.ctx.Done():
		return t.ctx.Err()
	case t.ch <- c:
		return nil
	}
}

// close ends the tap: the reader sees err, or io.EOF when err is nil.
func (t *tap) close(err error) {
	t.err = err
	close(t.ch)
}

// direct is the package goroutine's side of a tap: it reads the package's
// bytes in order, writing to the spool file those it does not claim. As an
// io.Reader and io.Seeker it serves the LocalScanner (whose skips are
// written to the file too). It keeps the ctx of the call it serves, since
// io.Reader has no other way to carry it.
type direct struct {
	ctx  context.Context
	t    *tap
	f    *os.File
	prog *spoolProgress
	cur  []byte // the rest of the chunk being taken
	owed bool   // the chunk is not acknowledged yet
	pos  int64  // bytes taken since the last restart
	off  int64  // the scanner's offset: pos, or less after a claim
	// ended: the download has ended (t.err is its error).
	ended bool
	sem   *semaphore.Weighted
	// mu orders a worker's fill with the truncation at a restart.
	mu sync.Mutex
	// spooled counts the bytes written to the spool file (across
	// restarts).
	spooled int64
	// werr is the first failure to write the spool file: the file lacks
	// bytes from then on, and drain returns it (a fatal error).
	werr error
	// hdr are the bytes the scanner read last, from hdrAt: a local
	// header, written to the spool file once it is known that its entry
	// is not claimed (a claimed entry keeps its header instead).
	hdr   []byte
	hdrAt int64
}

func newDirect(ctx context.Context, t *tap, f *os.File, prog *spoolProgress) *direct {
	return &direct{ctx: ctx, t: t, f: f, prog: prog, sem: semaphore.NewWeighted(maxClaimed)}
}

// next makes sure d.cur holds bytes. It fails with errRestarted when the
// download starts over (the spool file is emptied then, and the offsets
// begin again at 0), with io.EOF at the end of the download, with its
// error when it failed, and with ctx's error.
func (d *direct) next(ctx context.Context) error {
	if len(d.cur) > 0 {
		return nil
	}
	if d.owed {
		d.owed = false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d.t.taken <- struct{}{}:
		}
	}
	var c tapChunk
	var ok bool
	select {
	case <-ctx.Done():
		return ctx.Err()
	case c, ok = <-d.t.ch:
	}
	switch {
	case !ok:
		d.ended = true
		if d.t.err != nil {
			return d.t.err
		}
		return io.EOF
	case c.restart:
		d.prog.markRestarted()
		d.mu.Lock()
		err := d.f.Truncate(0)
		d.mu.Unlock()
		d.pos, d.off, d.hdr = 0, 0, d.hdr[:0]
		if err != nil && d.werr == nil {
			// Sticky, as a failed write: the file still holds the first
			// pass's bytes, and holes no longer say where it lacks some.
			d.werr = errclass.Fatalf("spool: empty the file for the download begun again: %w", err)
		}
		if d.werr != nil {
			return d.werr
		}
		return errRestarted
	}
	d.cur, d.owed = c.p, true
	return nil
}

// take returns up to n of the next bytes; the caller copies them before
// the next call.
func (d *direct) take(ctx context.Context, n int64) ([]byte, error) {
	if err := d.next(ctx); err != nil {
		return nil, err
	}
	b := d.cur[:min(n, int64(len(d.cur)))]
	d.cur = d.cur[len(b):]
	d.pos += int64(len(b))
	return b, nil
}

// spill writes b, taken at offset at, to the spool file.
func (d *direct) spill(b []byte, at int64) error {
	if d.werr != nil {
		return d.werr
	}
	if _, err := d.f.WriteAt(b, at); err != nil {
		d.werr = errclass.Fatalf("spool: %w", err)
		return d.werr
	}
	d.spooled += int64(len(b))
	return nil
}

// Read is the scanner's: the next bytes (a local header, or the records
// after the entries), kept in d.hdr until they are known to go to the
// spool file.
func (d *direct) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if d.off != d.pos {
		return 0, errors.New("unpack: read of a claimed entry's data") // the scanner skips it
	}
	at := d.pos
	p, err := d.take(d.ctx, int64(len(b)))
	if err != nil {
		return 0, err
	}
	n := copy(b, p)
	d.off += int64(n)
	if len(d.hdr) >= maxKeptHeader {
		// Headers of entries with no data (directories) follow one
		// another without a skip: they go to the file.
		if err := d.flush(); err != nil {
			return 0, err
		}
	}
	if len(d.hdr) == 0 {
		d.hdrAt = at
	}
	d.hdr = append(d.hdr, p...)
	return n, nil
}

// maxKeptHeader bounds the bytes Read keeps: more than a local header's
// most (30 bytes, a name and an extra field of 64 KiB each).
const maxKeptHeader = 30 + 2<<16

// flush writes the bytes the scanner read, and kept, to the spool file.
func (d *direct) flush() error {
	if len(d.hdr) == 0 {
		return nil
	}
	err := d.spill(d.hdr, d.hdrAt)
	d.hdr = d.hdr[:0]
	return err
}

// Seek is the scanner's skip (io.SeekCurrent only): the bytes skipped,
// unless claimed, are written to the spool file.
func (d *direct) Seek(offset int64, whence int) (int64, error) {
	if whence != io.SeekCurrent || offset < 0 {
		return d.off, errors.New("unpack: a package arriving is read forward only")
	}
	end := d.off + offset
	if err := d.have(d.ctx, end); err != nil {
		return d.off, err
	}
	d.off = end
	return end, nil
}

// have makes sure the spool file holds the package's bytes up to end, but
// for the claimed ones.
func (d *direct) have(ctx context.Context, end int64) error {
	if err := d.flush(); err != nil {
		return err
	}
	for d.pos < end {
		at := d.pos
		p, err := d.take(ctx, end-d.pos)
		if err != nil {
			return err
		}
		if err := d.spill(p, at); err != nil {
			return err
		}
	}
	return nil
}

// claimed is an entry's local header and compressed data, read into
// memory rather than the spool file; release frees the memory's share once
// the entry is done.
type claimed struct {
	header, data []byte
	release      func()
}

// claim reads the local header and data of e, the entry whose data comes
// next, into memory rather than the spool file, once the package's memory
// allows; nil when e is not to be claimed (empty, or larger than
// maxClaim).
func (d *direct) claim(ctx context.Context, e unzip.LocalEntry) (*claimed, error) {
	n := e.CompressedSize
	if n <= 0 || n > maxClaim || d.pos != e.DataOffset {
		return nil, nil
	}
	// The bytes the scanner read last end with e's header: those before
	// it (headers of entries with no data) go to the file.
	kept := d.hdrAt + int64(len(d.hdr))
	if len(d.hdr) > 0 && d.hdrAt < e.HeaderOffset && e.HeaderOffset < kept {
		cut := e.HeaderOffset - d.hdrAt
		if err := d.spill(d.hdr[:cut], d.hdrAt); err != nil {
			return nil, err
		}
		d.hdr, d.hdrAt = append(d.hdr[:0], d.hdr[cut:]...), e.HeaderOffset
	}
	if int64(len(d.hdr)) != e.DataOffset-e.HeaderOffset || len(d.hdr) > 0 && (d.hdrAt != e.HeaderOffset || kept != e.DataOffset) {
		return nil, nil
	}
	if err := d.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	c := &claimed{header: append([]byte(nil), d.hdr...), data: make([]byte, 0, n), release: func() { d.sem.Release(n) }}
	d.hdr = d.hdr[:0]
	for int64(len(c.data)) < n {
		p, err := d.take(ctx, n-int64(len(c.data)))
		if err != nil {
			c.release()
			if !errors.Is(err, errRestarted) {
				// The download ended, or failed, inside the entry: what
				// was taken of it goes to the spool file, as if it had
				// not been claimed, for phase 2 to read (a restart empties
				// the file, and its offsets begin again).
				if werr := d.spill(c.header, e.HeaderOffset); werr != nil {
					return nil, werr
				}
				if werr := d.spill(c.data, e.DataOffset); werr != nil {
					return nil, werr
				}
			}
			return nil, err
		}
		c.data = append(c.data, p...)
	}
	return c, nil
}

// fill writes the local header and data of se, claimed, to their place in
// the spool file, for phase 2 to read (see Streamed.Leave), and reports
// whether the file holds them (or will: after a restart the file is
// written again in full); false when they could not be written. It is
// called on a worker.
func (d *direct) fill(se *Streamed) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.prog.wasRestarted() {
		return true
	}
	if _, err := d.f.WriteAt(se.header, se.local.HeaderOffset); err != nil {
		return false
	}
	_, err := d.f.WriteAt(se.data, se.local.DataOffset)
	return err == nil
}

// drain writes the rest of the download to the spool file, from byte 0
// again after each restart, until the download ends. It returns nil then,
// whether or not the download failed (its error is the download's
// result), a fatal error when the spool file cannot be written, or ctx's.
func (d *direct) drain(ctx context.Context) error {
	if err := d.flush(); err != nil {
		return err
	}
	if d.werr != nil {
		return d.werr // the file lacks bytes phase 1 wrote
	}
	for {
		at := d.pos
		p, err := d.take(ctx, maxClaim)
		switch {
		case err == nil:
			if err := d.spill(p, at); err != nil {
				return err
			}
		case errors.Is(err, errRestarted):
		case d.werr != nil:
			return d.werr // the spool file could not be emptied
		case d.ended:
			return nil // the download's end, or its failure
		default:
			return err // ctx's, or the spool file's
		}
	}
}

// arrival is how phase 1 reads a package as it arrives: from a spool file
// written by the download (spooled), or from the download itself (direct).
type arrival interface {
	io.Reader
	io.Seeker
	// have returns once the spool file holds the package's bytes up to
	// end (but for claimed data).
	have(ctx context.Context, end int64) error
	// claim reads the local header and data of e, whose data comes next,
	// into memory; nil: e is to be read from the spool file.
	claim(ctx context.Context, e unzip.LocalEntry) (*claimed, error)
}

var (
	_ arrival = (*direct)(nil)
	_ arrival = (*spoolReader)(nil)
)

// have is the spooled download's: it waits until the bytes are written.
func (r *spoolReader) have(ctx context.Context, end int64) error {
	_, err := r.p.wait(ctx, end)
	return err
}

// claim: a spooled download's entries are read from the spool file.
func (r *spoolReader) claim(context.Context, unzip.LocalEntry) (*claimed, error) {
	return nil, nil
}

// holes returns the byte ranges of the spool file that phase 1's claims
// left unwritten (none after a restart: the file is then written again in
// full), sorted.
func (st *streamState) holes() []span {
	var hs []span
	for _, se := range st.order {
		if se.claimed && !se.prog.wasRestarted() {
			hs = append(hs, span{se.local.HeaderOffset, se.local.End()})
		}
	}
	slices.SortFunc(hs, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	return hs
}

// directoryInHole reports whether the central directory of the spool
// file f of size bytes, or its end records, may lie in a hole: the end
// records cannot be read, or the directory they place meets a hole.
func (st *streamState) directoryInHole(f io.ReaderAt, size int64) bool {
	if len(st.hs) == 0 {
		return false
	}
	start, err := unzip.DirectoryStart(f, size)
	return err != nil || meets(st.hs, start, size)
}

// span is a range of a package's bytes, [start, end).
type span struct{ start, end int64 }

// meets reports whether [start, end) meets a span of hs (sorted).
func meets(hs []span, start, end int64) bool {
	i, _ := slices.BinarySearchFunc(hs, start, func(h span, off int64) int { return cmp.Compare(h.end, off+1) })
	return i < len(hs) && hs[i].start < end
}

// readsHole reports whether delivering the listing at path from arch
// would read bytes missing from the spool file: the local header and data
// the central directory gives for path meet a hole. The local header is
// read from the file for the data's offset, unless the entry starts past
// every hole (as all do that phase 1 did not reach).
func (st *streamState) readsHole(arch *unzip.Archive, path string) bool {
	if len(st.hs) == 0 {
		return false
	}
	zf, err := arch.Lookup(path)
	if err != nil {
		return false // the delivery reports it
	}
	h := zf.HeaderOffset()
	if h >= st.hs[len(st.hs)-1].end {
		return false
	}
	data, err := zf.DataOffset()
	if err != nil {
		// A header unreadable where a hole may be: the package again
		// tells whether it is the package's own fault.
		return meets(st.hs, h, h+maxKeptHeader)
	}
	return meets(st.hs, h, data+zf.CompressedSize)
}

// refetch downloads package j again, to its own spool file, for the
// listings phase 2 must read where phase 1 left holes; once, the first
// time one needs it. The download must be the same package as the first:
// its length and the digest the first computed.
func (rd *Reader) refetch(ctx context.Context, j source.Package, st *streamState) (*unzip.Archive, error) {
	if st.again == nil && st.againErr == nil {
		if st.first.Hashes.IsZero() {
			st.againErr = errclass.Retryablef("the package's entry data went to another listing of its path as it arrived, and the package has no digest to download it again by")
		} else {
			rd.Log.Info("a listing of the package needs entry data it delivered from memory; downloading the package again", "package", j.URL)
			j.Expect = fixity.Expect{Length: st.first.Length, Hashes: st.first.Hashes}
			sp, err := rd.fetchPackage(ctx, j, false)
			if err != nil {
				st.againErr = fmt.Errorf("downloading the package again: %w", err)
			} else {
				st.again = sp
			}
		}
	}
	if st.againErr != nil {
		return nil, st.againErr
	}
	return st.again.arch, nil
}
