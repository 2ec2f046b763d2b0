// Package xmlcap is an XML decoder returning encoding/xml's tokens, whose
// memory is bounded by its limits, not by the document it reads: the way
// this module reads the XML a source sends (OAI-PMH responses aside: see
// Decoder).
package xmlcap

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
)

// The default limits (see NewDecoder).
const (
	DefaultMaxTokenSize = 4 << 20
	DefaultMaxDepth     = 32
)

// errTokenTooLarge is what capReader returns once the decoder has consumed
// more than its token limit without producing a token.
var errTokenTooLarge = errors.New("token too large")

// Errors of a Decoder's limits.
var (
	// ErrTooDeep is wrapped by the error of a Decoder whose elements nest
	// deeper than its limit.
	ErrTooDeep = errors.New("elements nested too deep")
	// ErrTokenTooLarge is wrapped by the error of a Decoder that met a
	// token (a tag with its attributes, a text, a comment) larger than its
	// limit.
	ErrTokenTooLarge = errors.New("token too large")
)

// Decoder is an encoding/xml Decoder whose memory is bounded by its limits,
// not by the document: no token it returns is larger than its token limit
// (its input is handed over as it is read and cut past the limit, so a
// 200 MB attribute costs no more than the limit), and no element nests
// deeper than its depth limit (the decoder's stack of open elements).
// ResourceSync documents (manifest.Reader), harvest lists and the documents
// a validated delivery checks are read through one; OAI-PMH responses,
// whose readers copy each record's bytes as they pass, are read by
// encoding/xml under the same limits and errors (source/oaipmh).
//
// A strict Decoder (the default) returns the tokens encoding/xml's Token
// returns, and the same errors, but reads most of a document with a faster
// tokenizer, github.com/orisano/gosax: start and end tags, text and
// comments whose every byte it can check as encoding/xml would (see
// fast.go); whatever else comes — a declaration, a processing instruction,
// CDATA, a DOCTYPE, a character reference, a name outside ASCII, anything
// malformed — encoding/xml's own tokenizer reads, from the same byte. A
// differential fuzz test (xmlcaptest.Agree, over the parsers' corpora)
// holds the two equal. A document whose declaration names another encoding
// than UTF-8 is read by encoding/xml alone, as is everything a Decoder set
// non-strict reads.
//
// Token, Skip, InputOffset and InputPos are the Decoder's own; the other
// methods are the embedded xml.Decoder's, and reading tokens through them
// would be neither bounded nor right.
type Decoder struct {
	*xml.Decoder
	in       *capReader
	maxToken int64
	maxDepth int
	depth    int
	fastState
}

// NewDecoder returns a strict Decoder reading r, whose tokens are at most
// maxToken bytes and whose elements nest at most maxDepth deep (the root at
// depth 1); a limit of 0 or less is the default (DefaultMaxTokenSize,
// DefaultMaxDepth). A document declaring another encoding than UTF-8 is
// decoded (CharsetReader).
func NewDecoder(r io.Reader, maxToken, maxDepth int) *Decoder {
	if maxToken <= 0 {
		maxToken = DefaultMaxTokenSize
	}
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	in := newCapReader(r, int64(maxToken))
	dec := xml.NewDecoder(in)
	dec.Strict = true
	dec.CharsetReader = CharsetReader
	return &Decoder{Decoder: dec, in: in, maxToken: int64(maxToken), maxDepth: maxDepth, fastState: fastState{stdFrom: -1}}
}

// Token returns the next token as xml.Decoder.Token does, or an error
// wrapping ErrTooDeep or ErrTokenTooLarge past a limit. An error of the
// underlying reader is returned as that reader returned it (see
// SourceErr), io.EOF at the end of the input.
func (d *Decoder) Token() (xml.Token, error) {
	if !d.started {
		d.start()
	}
	var tok xml.Token
	var err error
	if d.strict {
		tok, err = d.strictToken()
	} else {
		tok, err = d.Decoder.Token()
	}
	if err != nil {
		switch {
		case err == io.EOF:
			return nil, io.EOF
		case d.in.err != nil && errors.Is(err, d.in.err):
			return nil, d.in.err
		case errors.Is(err, errTokenTooLarge):
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTokenTooLarge, d.maxToken)
		}
		return nil, err
	}
	if d.fast {
		// The fast tokenizer reads ahead up to a buffer's worth: what it
		// holds is bounded by the limit and that slack together.
		d.in.mark(fastSlack)
	} else {
		d.in.mark(0)
	}
	switch tok.(type) {
	case xml.StartElement:
		d.depth++
		if d.depth > d.maxDepth {
			return nil, fmt.Errorf("%w: deeper than %d", ErrTooDeep, d.maxDepth)
		}
	case xml.EndElement:
		d.depth--
	}
	return tok, nil
}

// Depth is the number of elements open.
func (d *Decoder) Depth() int { return d.depth }

// Skip reads tokens through the end of the element whose start was the
// last token read, under the limits.
func (d *Decoder) Skip() error {
	end := d.depth - 1
	for d.depth > end {
		if _, err := d.Token(); err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// InputOffset is the offset in the input of the end of the last token
// read, as xml.Decoder.InputOffset.
func (d *Decoder) InputOffset() int64 { return d.Decoder.InputOffset() + d.fastOff }

// InputPos is the line of the end of the last token read, as
// xml.Decoder.InputPos gives it, and a column that is exact only while
// encoding/xml's own tokenizer reads the document's first line.
func (d *Decoder) InputPos() (line, column int) {
	l, c := d.Decoder.InputPos()
	return l + d.fastLines, c
}

// SourceErr is the error of the underlying reader that stopped the
// decoder (other than io.EOF), or nil.
func (d *Decoder) SourceErr() error { return d.in.err }

// capReader hands the decoder its input (byte by byte to encoding/xml, so
// that it adds no buffering of its own) and fails once more than max bytes
// (and the fast tokenizer's slack, while it reads) have been taken since
// the last token was returned: a token can thus never grow beyond max
// bytes, nor what is held for one beyond max and the slack. Bytes the fast
// tokenizer read and hands back (pushBack) are handed out, and counted,
// again.
type capReader struct {
	r        io.Reader
	buf      []byte
	pos, end int
	n        int64 // bytes handed out
	limit    int64 // n may not exceed limit
	max      int64
	err      error // error of the underlying reader, other than io.EOF
	eof      bool
}

func newCapReader(r io.Reader, max int64) *capReader {
	c := &capReader{r: r, buf: make([]byte, 64<<10), max: max}
	c.mark(0)
	return c
}

// mark starts a new token: at most max+slack bytes more may be taken.
func (c *capReader) mark(slack int64) { c.limit = c.n + c.max + slack }

// pushBack puts b, the last len(b) bytes handed out, back in front of
// what is still to be read. They are normally still in the buffer, just
// before pos; when a fill came in between, the buffer is rebuilt, which
// happens at most once a fill.
func (c *capReader) pushBack(b []byte) {
	if len(b) <= c.pos {
		c.pos -= len(b)
		return
	}
	nb := make([]byte, max(len(b)+c.end-c.pos, len(c.buf)))
	k := copy(nb, b)
	k += copy(nb[k:], c.buf[c.pos:c.end])
	c.buf, c.pos, c.end = nb, 0, k
}

// ReadByte implements io.ByteReader.
func (c *capReader) ReadByte() (byte, error) {
	if c.n >= c.limit {
		return 0, errTokenTooLarge
	}
	if c.pos == c.end {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	b := c.buf[c.pos]
	c.pos++
	c.n++
	return b, nil
}

// Read implements io.Reader under the same limit.
func (c *capReader) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		return 0, errTokenTooLarge
	}
	if c.pos == c.end {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	k := int64(min(len(p), c.end-c.pos))
	k = min(k, c.limit-c.n)
	copy(p, c.buf[c.pos:c.pos+int(k)])
	c.pos += int(k)
	c.n += k
	return int(k), nil
}

// fill refills the empty buffer; it returns io.EOF at the end of input
// and, sticky, the first other error of the underlying reader.
func (c *capReader) fill() error {
	for range 100 {
		if c.err != nil {
			return c.err
		}
		if c.eof {
			return io.EOF
		}
		k, err := c.r.Read(c.buf)
		c.pos, c.end = 0, k
		if err == io.EOF {
			c.eof = true
		} else if err != nil {
			c.err = err
		}
		if k > 0 {
			return nil
		}
	}
	c.err = io.ErrNoProgress
	return c.err
}

// CharsetReader decodes a document whose XML declaration names an
// encoding other than UTF-8 (which the decoder reads itself). The label is
// looked up as the WHATWG Encoding Standard defines labels, as browsers do
// (golang.org/x/text's htmlindex: "cp1252", "latin1", …), then in the IANA
// registry (ianaindex) for what the web does not use (IBM437, …).
//
// Like browsers, it reads ISO-8859-1 as windows-1252: the two differ only
// in 0x80–0x9F, control characters no document means in ISO-8859-1, and
// the curly quotes, dashes and € that Windows software writes into
// documents declaring it. US-ASCII (a subset of UTF-8) and a UTF-16 label
// on a document that does not look like UTF-16 (UTF-8 mislabelled; see
// sniffEncoding) pass the input through. An encoding that cannot be
// decoded is an error naming the label.
func CharsetReader(label string, input io.Reader) (io.Reader, error) {
	name := strings.ToLower(strings.TrimSpace(label))
	switch name {
	case "us-ascii", "ascii", "utf8", "utf-16", "utf-16le", "utf-16be", "utf16":
		return input, nil
	}
	enc, err := htmlindex.Get(name)
	if err != nil || enc == encoding.Replacement {
		// The WHATWG maps a few unsafe encodings (ISO-2022-KR, HZ, …) to
		// "replacement", which decodes to one U+FFFD: not a document.
		enc, err = ianaindex.IANA.Encoding(name)
	}
	if err != nil || enc == nil || enc == encoding.Replacement {
		return nil, fmt.Errorf("unsupported encoding %q", truncLabel(label))
	}
	return enc.NewDecoder().Reader(input), nil
}

// truncLabel is an encoding label cut short for a message.
func truncLabel(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}
