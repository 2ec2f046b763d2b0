package pipeline

// The document cache: documents are spooled as they come, and the last
// copy of each small one is kept in the state with its validators, so the
// next run asks for it conditionally and reads the copy on 304.

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/state"
)

// openDocument downloads a document to a spool file and returns its
// bytes, decompressed, from there (source.Services.OpenDocument). Spooling
// first means a document that the source republishes mid-transfer (its
// validator changes on a resume) is simply downloaded again from the start
// by fetch.Client.Download, before any of its entries has been acted on.
// Closing the reader closes and removes the spool file.
func (r *run) openDocument(ctx context.Context, docURL string) (io.ReadCloser, error) {
	f, err := os.CreateTemp(r.opts.SpoolDir, "rsharvest-doc-*.xml")
	if err != nil {
		return nil, errclass.Fatalf("spool: %w", err)
	}
	done := func() error {
		f.Close()
		return os.Remove(f.Name())
	}
	encoding, err := r.fetchDocument(ctx, docURL, f)
	if err != nil {
		done()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		done()
		return nil, errclass.Fatalf("spool: %w", err)
	}
	// A document may come gzip-compressed; the cap applies to what it
	// holds (see fetch.DecodeDocument).
	in, err := fetch.DecodeDocument(f, docURL, encoding, max(r.opts.MaxDocumentSize, 0))
	if err != nil {
		done()
		return nil, err
	}
	return readCloser{in, done}, nil
}

// readCloser reads r; Close calls close (a spooled document's removes the
// spool; a package's index entry keeps the package).
type readCloser struct {
	io.Reader
	close func() error
}

func (c readCloser) Close() error { return c.close() }

// fetchDocument downloads the document at docURL into f (empty, at offset
// 0), as it comes (compressed or not), and returns its Content-Encoding.
// When the state keeps a copy of it with validators, the request is
// conditional, and on 304 Not Modified the copy is written to f instead; a
// document downloaded with validators, and small enough, is kept for the
// next run (see state.Document).
func (r *run) fetchDocument(ctx context.Context, docURL string, f *os.File) (string, error) {
	held, cached, err := r.opts.Store.Document(ctx, docURL)
	if err != nil {
		return "", err
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
			return "", errclass.Fatalf("spool: %w", err)
		}
		return held.Encoding, nil
	}
	if err != nil {
		return "", err // a fetch error names the URL
	}
	keep := state.Document{URL: docURL}
	switch {
	case res.Bytes <= state.MaxDocumentCopy && (res.ETag != "" || res.LastModified != "") && r.whole(f, docURL, res.ContentEncoding):
		// Only a copy that reads in full is kept: one cut short would
		// otherwise stand for the document on every 304.
		keep.ETag, keep.LastModified, keep.Encoding = res.ETag, res.LastModified, res.ContentEncoding
		if keep.Body, err = readBack(f, res.Bytes); err != nil {
			return "", err
		}
	case !cached:
		return res.ContentEncoding, nil // nothing to ask about next time, nothing to forget
	}
	// Without validators, PutDocument forgets the old copy.
	return res.ContentEncoding, r.opts.Store.PutDocument(ctx, keep)
}

// readBack reads the n bytes written to f from its start.
func readBack(f *os.File, n int64) ([]byte, error) {
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, errclass.Fatalf("spool: read back %s: %w", f.Name(), err)
	}
	return b, nil
}

// whole reports whether the document spooled in f (at its start, and left
// there) is whole, as the run's protocol judges it once decoded: a copy
// kept for conditional requests must be the whole document, not a body a
// server cut short.
func (r *run) whole(f *os.File, docURL, encoding string) bool {
	if r.opts.Protocol.Whole == nil {
		return true
	}
	defer f.Seek(0, io.SeekStart)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false
	}
	in, err := fetch.DecodeDocument(f, docURL, encoding, state.MaxDocumentCopy*64)
	if err != nil {
		return false
	}
	return r.opts.Protocol.Whole(in)
}
