package xmlcap

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/orisano/gosax"
)

// fastSlack bounds what the fast tokenizer holds of a token that is not
// yet complete: a longer one is encoding/xml's to read (see tee).
const fastSlack = 64 << 10

// fastChunk is the most gosax is handed in one read: what it may have read
// ahead of the token it returns, and so what is read twice when
// encoding/xml takes over. encoding/xml reads at least as much before
// gosax takes over again (see rawToken), so that a document that makes
// them alternate costs no more than twice its reading.
const fastChunk = 4 << 10

const (
	xmlURL      = "http://www.w3.org/XML/1998/namespace"
	xmlnsPrefix = "xmlns"
	xmlPrefix   = "xml"
)

// fastState is what a strict Decoder keeps to read with gosax and to do
// itself what encoding/xml's Token does on top of its raw tokens: name
// spaces and the matching of end tags to start tags.
type fastState struct {
	started    bool
	strict     bool
	transcoded bool // the declaration named an encoding read through a decoder
	err        error

	fast      bool  // gosax reads now
	stdFrom   int64 // encoding/xml's offset when it last took over, -1 before
	sax       *gosax.Reader
	tee       *tee
	fastOff   int64 // bytes the fast tokenizer consumed
	fastLines int   // newlines among them

	closing  bool // the empty element just returned is closed next
	toClose  xml.Name
	open     []openElem
	ns       map[string]string
	undo     []binding
	names    [256]string
	text     []byte
	userChar func(string, io.Reader) (io.Reader, error)
}

// openElem is an element open: its name as written, and how many name
// space bindings were made before its own.
type openElem struct {
	name xml.Name
	undo int
}

// binding is a name space binding an element made, to undo at its end.
type binding struct {
	prefix, old string
	had         bool
}

// start fixes how the document is read, once the caller has set the
// decoder's fields: strictly (encoding/xml's raw tokens or gosax's, with
// the Decoder's own name spaces) or, non-strict, by encoding/xml alone.
func (d *Decoder) start() {
	d.started = true
	d.strict = d.Decoder.Strict
	if !d.strict {
		return
	}
	d.ns = map[string]string{}
	d.userChar = d.Decoder.CharsetReader
	if d.userChar == nil {
		return // a declared encoding fails the document
	}
	d.Decoder.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		r, err := d.userChar(label, in)
		if r != in {
			d.transcoded = true
		}
		return r, err
	}
}

// strictToken is encoding/xml's Token for a strict decoder, over raw
// tokens from either tokenizer.
func (d *Decoder) strictToken() (xml.Token, error) {
	if d.err != nil {
		return nil, d.err
	}
	tok, err := d.rawToken()
	if err != nil {
		if err == io.EOF && len(d.open) > 0 {
			err = d.syntaxError("unexpected EOF")
		}
		d.err = err
		return nil, err
	}
	switch t := tok.(type) {
	case xml.StartElement:
		mark := len(d.undo)
		for _, a := range t.Attr {
			if a.Name.Space == xmlnsPrefix {
				d.bind(a.Name.Local, a.Value)
			}
			if a.Name.Space == "" && a.Name.Local == xmlnsPrefix {
				d.bind("", a.Value)
			}
		}
		d.open = append(d.open, openElem{name: t.Name, undo: mark})
		d.translate(&t.Name, true)
		for i := range t.Attr {
			d.translate(&t.Attr[i].Name, false)
		}
		return t, nil
	case xml.EndElement:
		if len(d.open) == 0 {
			d.err = d.syntaxError("unexpected end element </" + t.Name.Local + ">")
			return nil, d.err
		}
		s := d.open[len(d.open)-1]
		d.open = d.open[:len(d.open)-1]
		switch {
		case s.name.Local != t.Name.Local:
			d.err = d.syntaxError("element <" + s.name.Local + "> closed by </" + t.Name.Local + ">")
			return nil, d.err
		case s.name.Space != t.Name.Space:
			ns := t.Name.Space
			if ns == "" {
				ns = `""`
			}
			d.err = d.syntaxError("element <" + s.name.Local + "> in space " + s.name.Space +
				" closed by </" + t.Name.Local + "> in space " + ns)
			return nil, d.err
		}
		d.translate(&t.Name, true)
		for len(d.undo) > s.undo {
			b := d.undo[len(d.undo)-1]
			d.undo = d.undo[:len(d.undo)-1]
			if b.had {
				d.ns[b.prefix] = b.old
			} else {
				delete(d.ns, b.prefix)
			}
		}
		return t, nil
	}
	return tok, nil
}

func (d *Decoder) bind(prefix, uri string) {
	old, had := d.ns[prefix]
	d.undo = append(d.undo, binding{prefix: prefix, old: old, had: had})
	d.ns[prefix] = uri
}

// translate puts the name space bound to n's prefix in n.Space, as
// encoding/xml does: the default name space applies to elements only, and
// a prefix bound to nothing stays as it is.
func (d *Decoder) translate(n *xml.Name, element bool) {
	switch {
	case n.Space == xmlnsPrefix:
		return
	case n.Space == "" && !element:
		return
	case n.Space == xmlPrefix:
		n.Space = xmlURL
	case n.Space == "" && n.Local == xmlnsPrefix:
		return
	}
	if v, ok := d.ns[n.Space]; ok {
		n.Space = v
	} else if n.Space == "" {
		n.Space = d.Decoder.DefaultSpace
	}
}

// syntaxError is an error at the current line, as encoding/xml words it.
func (d *Decoder) syntaxError(msg string) error {
	line, _ := d.InputPos()
	return &xml.SyntaxError{Msg: msg, Line: line}
}

// rawToken is the next raw token, from gosax while it can be trusted and
// from encoding/xml's RawToken otherwise.
func (d *Decoder) rawToken() (xml.Token, error) {
	if d.closing {
		d.closing = false
		return xml.EndElement{Name: d.toClose}, nil
	}
	if d.fast {
		tok, err := d.fastToken()
		if tok != nil || err != nil {
			return tok, err
		}
		d.toStd()
	}
	tok, err := d.Decoder.RawToken()
	if err != nil {
		if se, ok := err.(*xml.SyntaxError); ok && d.fastLines > 0 {
			err = &xml.SyntaxError{Msg: se.Msg, Line: se.Line + d.fastLines}
		}
		return nil, err
	}
	switch tok.(type) {
	case xml.EndElement, xml.Comment, xml.ProcInst, xml.Directive:
		// encoding/xml has read through the token's '>' and holds no
		// byte back: gosax may go on from here, unless encoding/xml took
		// over less than fastChunk ago (see fastChunk).
		if !d.transcoded && (d.stdFrom < 0 || d.Decoder.InputOffset()-d.stdFrom >= fastChunk) {
			d.toFast()
		}
	}
	return tok, nil
}

// toFast hands the input to gosax.
func (d *Decoder) toFast() {
	if d.sax == nil {
		d.tee = &tee{src: d.in}
		d.sax = gosax.NewReaderSize(d.tee, 2*fastChunk) // grown by gosax for a longer token
	} else {
		d.tee.reset()
		d.sax.Reset(d.tee)
	}
	d.fast = true
	d.in.mark(fastSlack)
}

// toStd hands the input back to encoding/xml, from the first byte gosax
// read that no token consumed: the token encoding/xml reads now begins
// there, under the limit alone.
func (d *Decoder) toStd() {
	d.fast = false
	d.in.pushBack(d.tee.unconsumed())
	d.tee.reset()
	d.in.mark(0)
	d.stdFrom = d.Decoder.InputOffset()
}

// fastToken returns the next raw token read by gosax, or nil (and no
// error) when encoding/xml must read it: the token is one gosax is not
// trusted with, or is not certain to be read the same by both.
func (d *Decoder) fastToken() (xml.Token, error) {
	ev, err := d.sax.Event()
	if err != nil {
		// A truncated or unknown <…, a token past what gosax may hold,
		// the limit, the source's error: encoding/xml reads again what
		// gosax read ahead, and meets each where it comes.
		return nil, nil
	}
	b := ev.Bytes
	var tok xml.Token
	switch ev.Type() {
	case gosax.EventEOF:
		return nil, io.EOF
	case gosax.EventText:
		if t, ok := d.fastText(b); ok {
			tok = xml.CharData(t)
		}
	case gosax.EventStart:
		tok = d.fastStart(b)
	case gosax.EventEnd:
		tok = d.fastEnd(b)
	case gosax.EventComment:
		// encoding/xml ends a comment at its first "--", which must be
		// followed by '>'.
		if len(b) >= 7 && bytes.HasPrefix(b, []byte("<!--")) && bytes.Index(b[4:], []byte("--")) == len(b)-7 {
			tok = xml.Comment(b[4 : len(b)-3])
		}
	}
	if tok == nil {
		return nil, nil
	}
	if int64(len(b)) > d.maxToken {
		return nil, errTokenTooLarge
	}
	d.fastOff += int64(len(b))
	d.fastLines += bytes.Count(b, []byte{'\n'})
	d.tee.consume(len(b))
	return tok, nil
}

// fastStart reads a start tag as encoding/xml's RawToken would, or returns
// nil when it cannot be sure to: a name outside ASCII, a value with a
// character reference, anything encoding/xml would refuse.
func (d *Decoder) fastStart(b []byte) xml.Token {
	name, i, ok := d.fastName(b, 1)
	if !ok {
		return nil
	}
	attrs := []xml.Attr{}
	last := len(b) - 1 // b[last] == '>'
	for {
		i = skipSpace(b, i)
		switch {
		case i > last:
			return nil
		case b[i] == '>':
			if i != last {
				return nil
			}
			return xml.StartElement{Name: name, Attr: attrs}
		case b[i] == '/':
			if i+1 != last {
				return nil
			}
			d.closing, d.toClose = true, name
			return xml.StartElement{Name: name, Attr: attrs}
		}
		var a xml.Attr
		if a.Name, i, ok = d.fastName(b, i); !ok {
			return nil
		}
		i = skipSpace(b, i)
		if i > last || b[i] != '=' {
			return nil
		}
		i = skipSpace(b, i+1)
		if i > last || (b[i] != '"' && b[i] != '\'') {
			return nil
		}
		j := bytes.IndexByte(b[i+1:], b[i])
		if j < 0 {
			return nil
		}
		v, ok := d.fastValue(b[i+1:i+1+j], false)
		if !ok {
			return nil
		}
		a.Value = string(v)
		attrs = append(attrs, a)
		i += j + 2
	}
}

// fastEnd reads an end tag: "</", a name, spaces, '>'.
func (d *Decoder) fastEnd(b []byte) xml.Token {
	if len(b) < 3 || b[1] != '/' {
		return nil
	}
	name, i, ok := d.fastName(b, 2)
	if !ok || skipSpace(b, i) != len(b)-1 {
		return nil
	}
	return xml.EndElement{Name: name}
}

// fastName reads the name starting at b[i] as encoding/xml's nsname does,
// for names in ASCII: ok is false for anything else, which encoding/xml
// reads (a name outside ASCII) or refuses (no name, two colons).
func (d *Decoder) fastName(b []byte, i int) (n xml.Name, end int, ok bool) {
	start := i
	if i >= len(b) || !nameStart[b[i]] {
		return n, i, false
	}
	for i++; i < len(b) && nameByte[b[i]]; i++ {
	}
	if i < len(b) && b[i] >= utf8.RuneSelf {
		return n, i, false
	}
	s := b[start:i]
	switch c := bytes.IndexByte(s, ':'); {
	case c < 0:
		n.Local = d.intern(s)
	case bytes.IndexByte(s[c+1:], ':') >= 0:
		return n, i, false
	case c == 0 || c == len(s)-1:
		n.Local = d.intern(s)
	default:
		n.Space = d.intern(s[:c])
		n.Local = d.intern(s[c+1:])
	}
	return n, i, true
}

// intern returns b as a string, the same string for the same name: a
// document repeats a few names over and over. A name is remembered in one
// of 256 slots, chosen by its length and its first and last bytes.
func (d *Decoder) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	h := (uint(len(b))*31 + uint(b[0])*7 + uint(b[len(b)-1])) & 255
	if s := d.names[h]; s == string(b) {
		return s
	}
	s := string(b)
	if len(s) <= 64 {
		d.names[h] = s
	}
	return s
}

// fastText reads text as encoding/xml does, when it can be sure to.
func (d *Decoder) fastText(b []byte) ([]byte, bool) {
	return d.fastValue(b, true)
}

// fastValue is text (text true) or an attribute value's bytes as
// encoding/xml returns them: "\r\n" and '\r' read as '\n', the five
// predefined entities replaced. ok is false where encoding/xml must read
// them: another reference, a character XML forbids, broken UTF-8, "]]>" in
// text, '<' in a value.
func (d *Decoder) fastValue(b []byte, text bool) ([]byte, bool) {
	k := 0
	for k < len(b) && plain[b[k]] {
		k++
	}
	if k == len(b) {
		return b, true
	}
	out := append(d.text[:0], b[:k]...)
	defer func() { d.text = out[:0] }()
	var b0, b1 byte
	if k > 0 {
		b1 = b[k-1]
		if k > 1 {
			b0 = b[k-2]
		}
	}
	for i := k; i < len(b); {
		c := b[i]
		switch {
		case c == '&':
			r, n := entity(b[i:])
			if n == 0 {
				return nil, false
			}
			out = append(out, r)
			i += n
			b0, b1 = 0, 0
			continue
		case c == '>' && text && b0 == ']' && b1 == ']':
			return nil, false
		case c == '<':
			return nil, false
		case c == '\r':
			out = append(out, '\n')
		case c == '\n' && b1 == '\r':
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 || !inCharRange(r) {
				return nil, false
			}
			out = append(out, b[i:i+n]...)
			b0, b1 = b[i+n-2], b[i+n-1]
			i += n
			continue
		case c < 0x20 && c != '\t' && c != '\n':
			return nil, false
		default:
			out = append(out, c)
		}
		b0, b1 = b1, c
		i++
	}
	return out, true
}

// entity reads one of the five predefined entities at the start of b,
// returning its character and its length (0 for anything else).
func entity(b []byte) (byte, int) {
	for _, e := range [...]struct {
		ref string
		c   byte
	}{{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}} {
		if bytes.HasPrefix(b, []byte(e.ref)) {
			return e.c, len(e.ref)
		}
	}
	return 0, 0
}

// inCharRange reports whether XML allows the character r.
func inCharRange(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// The ASCII bytes that may start a name, that may follow in one, and that
// text or a value may hold as they are.
var nameStart, nameByte, plain = func() (s, n, p [256]bool) {
	for c := 0; c < 256; c++ {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		s[c] = letter || c == '_' || c == ':'
		n[c] = s[c] || '0' <= c && c <= '9' || c == '.' || c == '-'
		p[c] = c >= 0x20 && c < utf8.RuneSelf && c != '&' && c != '<' && c != ']' || c == '\t' || c == '\n'
	}
	return
}()

// tee is gosax's input: it hands gosax at most fastChunk at a time, and
// keeps what gosax took and no token consumed yet, to hand back to
// encoding/xml. It refuses to hold more than fastSlack of it: a token that
// long is encoding/xml's to read, which holds no second copy of it.
type tee struct {
	src *capReader
	buf []byte
	pos int
}

// errLongToken stops gosax at a token longer than the tee holds.
var errLongToken = errors.New("xmlcap: a token for encoding/xml to read")

func (t *tee) Read(p []byte) (int, error) {
	if len(t.buf)-t.pos >= fastSlack {
		return 0, errLongToken
	}
	if len(p) > fastChunk {
		p = p[:fastChunk]
	}
	n, err := t.src.Read(p)
	t.buf = append(t.buf, p[:n]...)
	return n, err
}

func (t *tee) consume(n int) {
	t.pos += n
	switch {
	case t.pos == len(t.buf):
		t.reset()
	case t.pos >= fastSlack:
		t.buf = t.buf[:copy(t.buf, t.buf[t.pos:])]
		t.pos = 0
	}
}

func (t *tee) unconsumed() []byte { return t.buf[t.pos:] }

func (t *tee) reset() { t.buf, t.pos = t.buf[:0], 0 }
