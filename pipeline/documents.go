package pipeline

// The document cache: documents are spooled as they come, and the last
// copy of each small one is kept in the state with its validators, so the
// next run asks for it conditionally and reads the copy on 304.

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// openDocument downloads a document to a spool file and returns its
// bytes, decompressed, from there (source.Services.OpenDocument). Spooling
// first means a document that the source republishes mid-transfer (its
// validator changes on a resume) is simply downloaded again from the start
// by fetch.Client.Download, before any of its entries has been acted on.
// Closing the document removes the spool file, after keeping a copy of it
// when it is whole, or forgetting the stale copy held (see copyToKeep).
func (r *run) openDocument(ctx context.Context, docURL string) (io.ReadCloser, error) {
	f, err := os.CreateTemp(r.opts.SpoolDir, "rsharvest-doc-*.xml")
	if err != nil {
		return nil, errclass.Fatalf("spool: %w", err)
	}
	d := &document{ctx: ctx, r: r, f: f}
	var encoding string
	if encoding, d.keep, err = r.fetchDocument(ctx, docURL, f); err != nil {
		d.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		d.Close()
		return nil, errclass.Fatalf("spool: %w", err)
	}
	// A document may come gzip-compressed; the cap applies to what it
	// holds (see fetch.DecodeDocument).
	if d.Reader, err = fetch.DecodeDocument(f, docURL, encoding, max(r.opts.MaxDocumentSize, 0)); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// document is a document openDocument spooled, read decompressed.
type document struct {
	io.Reader
	ctx   context.Context // the opener's: Close writes to the state, and takes none
	r     *run
	f     *os.File
	keep  *copyToKeep // nil: nothing to keep or forget at Close
	whole bool
}

var _ source.WholeReader = (*document)(nil)

// copyToKeep is what Close does with the copy of a document downloaded
// anew: keep it (with its validators; the spool's size) when the document
// is whole — the planner read it to its proper end, or else the
// protocol judges it whole — and nothing the planner could not plan of it
// failed (see run.keepCopy); else forget the copy held before, if any.
type copyToKeep struct {
	doc    state.Document // without its body, read back from the spool; no validators: nothing to keep
	size   int64
	cached bool // a copy is held, now stale
}

// keepable says the document came with validators, small enough to keep.
func (k *copyToKeep) keepable() bool { return k.doc.ETag != "" || k.doc.LastModified != "" }

// ReadWhole says the planner read the document to its proper end.
func (d *document) ReadWhole() { d.whole = true }

// Close keeps the document's copy or forgets the stale one (see
// copyToKeep), then closes and removes the spool. A copy that cannot be
// stored is logged, and Close's error: the harvest stands without it.
func (d *document) Close() error {
	var err error
	if k := d.keep; k != nil {
		d.keep = nil
		whole := k.keepable() && (d.whole || d.r.whole(d.f, k.doc.URL, k.doc.Encoding))
		doc := state.Document{URL: k.doc.URL} // without validators: keepCopy forgets the copy held
		if whole {
			doc = k.doc
			doc.Body, err = readBack(d.f, k.size)
		}
		if err == nil && (whole || k.cached) {
			// Not the opener's cancellation: a copy is the run's to keep
			// or forget.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 30*time.Second)
			err = d.r.keepCopy(ctx, doc)
			cancel()
		}
		if err != nil {
			d.r.log.Warn("the copy of a document for the next run's conditional request could not be stored", "document", k.doc.URL, "error", err)
		}
	}
	d.f.Close()
	if rerr := os.Remove(d.f.Name()); err == nil {
		err = rerr
	}
	return err
}

// whole reports whether the document spooled in f is whole, as the run's
// protocol judges it once decoded (source.Protocol.Whole; without one,
// it is not known to be): for a document the planner did not read to its
// proper end.
func (r *run) whole(f *os.File, docURL, encoding string) bool {
	if r.opts.Protocol.Whole == nil {
		return false
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false
	}
	in, err := fetch.DecodeDocument(f, docURL, encoding, state.MaxDocumentCopy*64)
	if err != nil {
		return false
	}
	return r.opts.Protocol.Whole(in)
}

// fetchDocument downloads the document at docURL into f (empty, at offset
// 0), as it comes (compressed or not), and returns its Content-Encoding.
// When the state keeps a copy of it with validators, the request is
// conditional, and on 304 Not Modified the copy is written to f instead.
// Of a document downloaded anew it says what to keep (a copy, when it came
// with validators and is small enough: see state.Document) or forget (the
// copy held before), once the document is read.
func (r *run) fetchDocument(ctx context.Context, docURL string, f *os.File) (string, *copyToKeep, error) {
	held, cached, err := r.opts.Store.Document(ctx, docURL)
	if err != nil {
		return "", nil, err
	}
	limit := max(r.opts.MaxDocumentSize, 0)
	if cached && limit > 0 && int64(len(held.Body)) > limit {
		cached = false // the copy is over this run's cap: ask for the document itself
	}
	var v fetch.Validators
	if cached {
		v = fetch.Validators{ETag: held.ETag, LastModified: held.LastModified}
	}
	res, err := r.opts.Client.DownloadIfChanged(ctx, docURL, f, fixity.Expect{Length: -1, Max: limit}, v)
	if cached && errors.Is(err, fetch.ErrNotModified) {
		r.log.Debug("document unchanged since the last run (304); reading the copy kept", "document", docURL)
		if _, err := f.Write(held.Body); err != nil {
			return "", nil, errclass.Fatalf("spool: %w", err)
		}
		return held.Encoding, nil, nil
	}
	if err != nil {
		return "", nil, err // a fetch error names the URL
	}
	keep := &copyToKeep{doc: state.Document{URL: docURL}, cached: cached}
	switch {
	case res.Bytes <= state.MaxDocumentCopy && (res.ETag != "" || res.LastModified != ""):
		// Kept only if whole: a copy cut short would otherwise stand
		// for the document on every 304.
		keep.doc.ETag, keep.doc.LastModified, keep.doc.Encoding = res.ETag, res.LastModified, res.ContentEncoding
		keep.size = res.Bytes
	case !cached:
		return res.ContentEncoding, nil, nil // nothing to ask about next time, nothing to forget
	}
	return res.ContentEncoding, keep, nil
}

// readBack reads the n bytes written to f from its start.
func readBack(f *os.File, n int64) ([]byte, error) {
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, errclass.Fatalf("spool: read back %s: %w", f.Name(), err)
	}
	return b, nil
}
