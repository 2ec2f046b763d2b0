package manifest

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

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
// (its input is handed over byte by byte and cut past the limit, so a
// 200 MB attribute costs no more than the limit), and no element nests
// deeper than its depth limit (the decoder's stack of open elements). Every
// parser of a document a source sends reads through one: ResourceSync
// documents (Reader), OAI-PMH responses and harvest lists.
//
// Token and Skip are the Decoder's own; the other methods are the embedded
// xml.Decoder's, and reading tokens through them would not be bounded.
type Decoder struct {
	*xml.Decoder
	in       *capReader
	maxToken int64
	maxDepth int
	depth    int
}

// NewDecoder returns a strict Decoder reading r, whose tokens are at most
// maxToken bytes and whose elements nest at most maxDepth deep (the root at
// depth 1); a limit of 0 or less is the ResourceSync reader's default
// (DefaultMaxTokenSize, DefaultMaxDepth).
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
	return &Decoder{Decoder: dec, in: in, maxToken: int64(maxToken), maxDepth: maxDepth}
}

// Token returns the next token as xml.Decoder.Token does, or an error
// wrapping ErrTooDeep or ErrTokenTooLarge past a limit. An error of the
// underlying reader is returned as that reader returned it (see
// SourceErr), io.EOF at the end of the input.
func (d *Decoder) Token() (xml.Token, error) {
	tok, err := d.Decoder.Token()
	if err != nil {
		switch {
		case err == io.EOF:
			return nil, io.EOF
		case d.in.err != nil:
			return nil, d.in.err
		case errors.Is(err, errTokenTooLarge):
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTokenTooLarge, d.maxToken)
		}
		return nil, err
	}
	d.in.mark(d.Decoder.InputOffset())
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

// SourceErr is the error of the underlying reader that stopped the
// decoder (other than io.EOF), or nil.
func (d *Decoder) SourceErr() error { return d.in.err }
