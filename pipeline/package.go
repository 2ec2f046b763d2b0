package pipeline

import (
	"context"
	"io"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/pipeline/unpack"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/unzip"
)

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

// entryJob is one manifest entry of a package, to verify and deliver: from
// an unpacked package (arch), from a package still downloading (stream), or
// from its URL (lists, neither set).
type entryJob struct {
	pkg    *source.Package
	rec    *source.Record
	arch   *unzip.Archive
	stream *unpack.Streamed
	done   func()
	// ep is a record's epoch (see progress), or nil.
	ep *epoch
}

// packageHeld says whether the destination holds every resource of
// package j it needs (held; n of them, when its manifest copy tells), and
// for a change package the winners it still needs (want). A run that
// began with nothing held of its source does not read the copy.
func (r *run) packageHeld(ctx context.Context, j source.Package) (want map[string]*source.Record, held bool, n int64, err error) {
	switch {
	case len(j.Wins) > 0:
		if want, err = r.unheld(ctx, j); err != nil {
			return nil, false, 0, err
		}
		held = len(want) == 0
	case j.Contents != "" && r.resync:
		// (A first baseline holds nothing: reading the copy, and then
		// reading it again to judge whether to keep it, would be waste.)
		if n, held, err = r.allHeld(ctx, j); err != nil {
			return nil, false, 0, err
		}
		if held {
			r.log.Debug("package skipped: every resource already held", "package", j.URL, "resources", n)
		}
	}
	return want, held, n, nil
}

// readPackage reads one package unit (unpack.Reader.Read) and hands the
// entries to deliver to the workers: every entry, or only the winners
// (j.Wins) the destination does not hold already. A package whose
// resources are all held (its manifest copy, or its winners, say so) is not
// fetched at all. (An audit's listing reads only what a package lists: see
// listing.readPackage.) Failures of the package are recorded; only a
// cancelled run, or a fatal error, is returned.
func (r *run) readPackage(ctx context.Context, j source.Package, out chan<- entryJob) error {
	want, held, n, err := r.packageHeld(ctx, j)
	if err != nil {
		return err
	}
	if held {
		r.reader.Drop(j.URL)
		r.counts.PackageBytesDone.Add(max(j.Expect.Length, 0))
		return r.send(ctx, result{held: n, pkgDone: true})
	}
	return r.reader.Read(ctx, j, want, unpackHost{r, out})
}

// newReader is the run's package reader (see unpack).
func (r *run) newReader() *unpack.Reader {
	return &unpack.Reader{Client: r.opts.Client, Limits: r.opts.Limits, SpoolDir: r.opts.SpoolDir, MaxPackageSize: r.opts.MaxPackageSize, RequireHash: r.opts.RequireHash,
		NoStreaming: r.opts.DisableStreaming, NoRange: r.opts.DisableRangeResync, Resync: r.resync, Log: r.log,
		Downloads: make(chan struct{}, r.opts.Concurrency), Kept: unpack.NewSpool(r.opts.Concurrency + 1), Received: &r.counts.BytesDownloaded, Progress: &r.counts.PackageBytesDone,
		Fetched: r.book.noteValidators}
}

// unpackHost is the run's side of a package read: entries go to the
// workers (out), failures, skips and the package's end to the commit
// stage.
type unpackHost struct {
	r   *run
	out chan<- entryJob
}

var _ unpack.Host = unpackHost{}

func (h unpackHost) Deliver(ctx context.Context, e unpack.Entry) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case h.out <- entryJob{pkg: e.Package, rec: e.Record, arch: e.Arch, stream: e.Stream, done: e.Done}:
		h.r.counts.Planned.Add(1)
		return nil
	}
}

func (h unpackHost) Fail(ctx context.Context, f unpack.Failure) {
	c := countsNone
	switch f.Kind {
	case unpack.PackageFailed:
		c = countsPackage
	case unpack.ResourceFailed:
		c = countsResource
	}
	h.r.failIn(ctx, f.Failure, f.Set, f.Hold, c, nil, f.Retry)
}

func (h unpackHost) Skip(ctx context.Context, s runreport.Skip) error {
	return h.r.send(ctx, result{skip: &s})
}

func (h unpackHost) Done(ctx context.Context) error {
	return h.r.send(ctx, result{pkgDone: true})
}
