package fetch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"

	"github.com/rsharvest/rsharvest/errclass"
)

// DecodeDocument returns a reader of the document r carries, decompressed
// when it came compressed, as the Sitemaps protocol allows: a body that
// starts with the gzip magic bytes is gunzipped (whether its URL ends in
// ".gz", the server sent Content-Encoding gzip or x-gzip unasked, or
// nothing said so); with Content-Encoding deflate, a zlib stream or raw
// DEFLATE is inflated. A body that says it is compressed but is not (a
// ".gz" URL a server already decompressed) is read as it is.
//
// max, when above 0, caps the decompressed bytes: reading more fails with a
// permanent error wrapping ErrTooLarge ("larger than allowed") that names
// the document, so a compression bomb cannot fill a disk. A corrupt
// compressed stream is a permanent error naming the document.
func DecodeDocument(r io.Reader, docURL, contentEncoding string, max int64) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var dec io.Reader
	var how string
	ce := strings.ToLower(strings.TrimSpace(contentEncoding))
	switch {
	case len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, corrupt(docURL, "gzip", err)
		}
		dec, how = zr, "gzip"
	case ce == "deflate" && len(magic) == 2 && isZlibHeader(magic):
		zr, err := zlib.NewReader(br)
		if err != nil {
			return nil, corrupt(docURL, "zlib", err)
		}
		dec, how = zr, "zlib"
	case ce == "deflate":
		dec, how = flate.NewReader(br), "deflate"
	default:
		dec = br
	}
	return &documentReader{r: dec, url: docURL, how: how, max: max}, nil
}

// isZlibHeader reports whether b starts a zlib stream (RFC 1950): method
// 8 (DEFLATE), a window of at most 32 KiB, and a header checksum that
// holds. No XML document starts so: its first byte is '<', a BOM or white
// space.
func isZlibHeader(b []byte) bool {
	return b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

func corrupt(docURL, how string, err error) error {
	return errclass.Permanentf("document %s: %s-compressed body cannot be read: %w", docURL, how, err)
}

// documentReader counts the decompressed bytes against max and names the
// document in the errors of decompression.
type documentReader struct {
	r   io.Reader
	url string
	how string // "" when the body is not compressed
	max int64
	n   int64
	err error
}

func (d *documentReader) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	n, err := d.r.Read(p)
	d.n += int64(n)
	if d.max > 0 && d.n > d.max {
		d.err = errclass.Permanentf("document %s: %w: more than %d bytes%s", d.url, ErrTooLarge, d.max, d.once())
		if keep := n - int(d.n-d.max); keep > 0 {
			return keep, nil
		}
		return 0, d.err
	}
	if err != nil && err != io.EOF && d.how != "" && errclass.Of(err) == errclass.Unclassified {
		// The compressed stream itself is broken (the transport's own
		// errors are classified already).
		d.err = corrupt(d.url, d.how, err)
		return n, d.err
	}
	return n, err
}

func (d *documentReader) once() string {
	if d.how == "" {
		return ""
	}
	return fmt.Sprintf(" once %s-decompressed", d.how)
}
