package fetch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"

	"github.com/rsharvest/rsharvest/errclass"
)

// DefaultMaxDocumentSize is the default cap, in bytes, that readers of a
// source's documents (the executor, discovery) put on one document:
// 256 MiB, five times the 50 MB the ResourceSync specification allows.
const DefaultMaxDocumentSize = 256 << 20

// DecodeDocument returns a reader of the document r carries, decompressed
// when it came compressed, as the Sitemaps protocol allows: a body that
// starts with the gzip magic bytes is gunzipped (whether its URL ends in
// ".gz", the server sent Content-Encoding gzip or x-gzip unasked, or
// nothing said so); a zlib stream is inflated with Content-Encoding
// deflate or none; with Content-Encoding deflate, raw DEFLATE is too. A body that says it is compressed but is not (a
// ".gz" URL a server already decompressed, a "deflate" label on plain
// XML) is read as it is. A body sent with a Content-Encoding rsharvest
// does not decode (br, zstd, compress) that does not start as XML or HTML
// does fails with a permanent error naming the document and the coding.
//
// Only documents (XML, and the HTML pages discovery reads) go through
// DecodeDocument: packages and resources are kept byte for byte as sent.
//
// max, when above 0, caps the decompressed bytes: reading more fails with a
// permanent error wrapping ErrTooLarge ("larger than allowed") that names
// the document, so a compression bomb cannot fill a disk. A corrupt
// compressed stream is a permanent error naming the document.
func DecodeDocument(r io.Reader, docURL, contentEncoding string, max int64) (io.Reader, error) {
	if max > 0 {
		// The bytes sent count too: a compressed stream that inflates to
		// little or nothing (endless empty blocks) is cut off as well.
		// A document's compressed form is at most a little longer than
		// the document.
		r = &sentCap{r: r, url: docURL, left: max + sentSlack}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var dec io.Reader
	var how string
	ce := strings.ToLower(strings.TrimSpace(contentEncoding))
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, decodeError(docURL, "gzip", err)
		}
		dec, how = zr, "gzip"
	case (ce == "deflate" || ce == "" || ce == "identity") && len(head) >= 2 && isZlibHeader(head):
		// Declared, or not: a zlib header is no markup (a server that
		// compresses without saying so, as some OAI-PMH servers do).
		zr, err := zlib.NewReader(br)
		if err != nil {
			return nil, decodeError(docURL, "zlib", err)
		}
		dec, how = zr, "zlib"
	case ce == "deflate" && !startsAsMarkup(head):
		dec, how = flate.NewReader(br), "deflate"
	case !knownCoding(ce) && !startsAsMarkup(head):
		return nil, errclass.Permanentf("document %s: sent with Content-Encoding %q, which rsharvest does not decode (it asks for identity; gzip, x-gzip and deflate are decoded)",
			docURL, truncate(contentEncoding, 40))
	default:
		dec = br
	}
	return &documentReader{r: dec, url: docURL, how: how, max: max}, nil
}

// sniffLen is how many leading bytes DecodeDocument looks at.
const sniffLen = 64

// knownCoding reports whether ce (lower case) is a content coding
// DecodeDocument decodes, or none. Some servers put a charset there
// ("utf-8"): that is not a coding, but the body then starts as markup.
func knownCoding(ce string) bool {
	switch ce {
	case "", "identity", "gzip", "x-gzip", "deflate":
		return true
	}
	return false
}

// startsAsMarkup reports whether b, the first bytes of a body, start as an
// XML document or an HTML page does: after an optional UTF-8 byte order
// mark and white space, "<" then "?", "!" or a letter; or a UTF-16 byte
// order mark, or "<" in UTF-16 without one. No compressed stream rsharvest
// would be sent starts so but by a wild chance.
func startsAsMarkup(b []byte) bool {
	if len(b) >= 2 && (b[0] == 0xfe && b[1] == 0xff || b[0] == 0xff && b[1] == 0xfe ||
		b[0] == '<' && b[1] == 0 || b[0] == 0 && b[1] == '<') {
		return true
	}
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) < 2 || b[0] != '<' {
		return false
	}
	c := b[1] | 0x20 // lower case for letters
	return b[1] == '?' || b[1] == '!' || c >= 'a' && c <= 'z'
}

// truncate shortens s, a header value, for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// isZlibHeader reports whether b starts a zlib stream (RFC 1950): method
// 8 (DEFLATE), a window of at most 32 KiB, and a header checksum that
// holds. No XML document starts so: its first byte is '<', a BOM or white
// space.
func isZlibHeader(b []byte) bool {
	return b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

// decodeError is the error of a decompressor: the reader's own errors pass
// as they are (the transport's are classified already, a context's end is
// not the document's fault), any other means the compressed stream itself
// is broken, permanently.
func decodeError(docURL, how string, err error) error {
	if errclass.Of(err) != errclass.Unclassified || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
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
	if err != nil && err != io.EOF && d.how != "" {
		d.err = err
		if !errors.Is(err, ErrTooLarge) {
			d.err = decodeError(d.url, d.how, err)
		}
		return n, d.err
	}
	return n, err
}

// sentSlack is how much more than its cap a document's compressed form
// may take (headers, and blocks stored as they are).
const sentSlack = 64 << 10

// sentCap is the body of a document as sent, cut off past left bytes.
type sentCap struct {
	r    io.Reader
	url  string
	left int64
}

func (c *sentCap) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errclass.Permanentf("document %s: %w: sent more than its limit allows", c.url, ErrTooLarge)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (d *documentReader) once() string {
	if d.how == "" {
		return ""
	}
	return fmt.Sprintf(" once %s-decompressed", d.how)
}
