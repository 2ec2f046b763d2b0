package pipeline

// The document cache: documents are spooled as they come, and the last
// copy of each small one is kept in the state with its validators, so the
// next run asks for it conditionally and reads the copy on 304.

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/state"
)

// openDocument downloads a ResourceSync document to a spool file and
// starts parsing it from there. Spooling first means a document that the
// source republishes mid-transfer (its validator changes on a resume) is
// simply downloaded again from the start by fetch.Client.Download, before
// any of its entries has been acted on. The returned function closes and
// removes the spool file.
func (r *run) openDocument(ctx context.Context, docURL string) (*manifest.Reader, func(), error) {
	f, err := os.CreateTemp(r.opts.SpoolDir, "rsharvest-doc-*.xml")
	if err != nil {
		return nil, nil, errclass.Fatalf("spool: %w", err)
	}
	done := func() {
		f.Close()
		os.Remove(f.Name())
	}
	encoding, err := r.fetchDocument(ctx, docURL, f)
	if err != nil {
		done()
		return nil, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		done()
		return nil, nil, errclass.Fatalf("spool: %w", err)
	}
	// A document may come gzip-compressed; the cap applies to what it
	// holds (see fetch.DecodeDocument).
	in, err := fetch.DecodeDocument(f, docURL, encoding, max(r.opts.MaxDocumentSize, 0))
	if err != nil {
		done()
		return nil, nil, err
	}
	rd, err := manifest.NewReader(in, r.opts.Document)
	if err != nil {
		done()
		return nil, nil, errclass.About(docURL, err)
	}
	return rd, done, nil
}

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
	case res.Bytes <= state.MaxDocumentCopy && (res.ETag != "" || res.LastModified != "") && wellFormed(f, docURL, res.ContentEncoding):
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

// wellFormed reports whether the document spooled in f (at its start, and
// left there) is well-formed XML once decoded: a copy kept for conditional
// requests must be the whole document, not a body a server cut short.
func wellFormed(f *os.File, docURL, encoding string) bool {
	defer f.Seek(0, io.SeekStart)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false
	}
	in, err := fetch.DecodeDocument(f, docURL, encoding, state.MaxDocumentCopy*64)
	if err != nil {
		return false
	}
	if in, _, err = manifest.UTF8(in); err != nil {
		return true // an encoding nobody knows: reading it fails the same way every time
	}
	d := xml.NewDecoder(in)
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	for {
		if _, err := d.Token(); err == io.EOF {
			return true
		} else if err != nil {
			return false
		}
	}
}
