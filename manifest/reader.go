package manifest

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/internal/xmlcap"
)

// Defaults of Options: xmlcap's.
const (
	DefaultMaxTokenSize = xmlcap.DefaultMaxTokenSize
	DefaultMaxDepth     = xmlcap.DefaultMaxDepth
)

// ErrMalformed is wrapped by every terminal error of a Reader: broken XML,
// a truncated document, a DOCTYPE or entity declaration, nesting deeper than
// Options.MaxDepth, a token larger than Options.MaxTokenSize, more entries
// than Options.MaxEntries, content after the root element, and a document
// that is not a ResourceSync document at all (see ErrNotResourceSync).
// Such errors are permanent (errclass).
var ErrMalformed = errors.New("manifest: malformed document")

// ErrNotResourceSync is wrapped, together with ErrMalformed, by the error
// NewReader returns for a well-formed document that is not a ResourceSync
// document: a root other than <urlset> or <sitemapindex>, or a root without
// an rs:md capability (a plain sitemap).
var ErrNotResourceSync = errors.New("not a ResourceSync document")

// Options limit and observe a Reader. The zero value gives the defaults.
type Options struct {
	// MaxTokenSize is the largest single token the parser accepts, in bytes
	// of input: a start tag with all its attributes, a run of text, a
	// comment. It also caps the text of one <loc>, <lastmod> or
	// <changefreq>. Zero (or less) means DefaultMaxTokenSize (4 MiB).
	MaxTokenSize int
	// MaxDepth is the deepest element nesting accepted; the root is at
	// depth 1. Zero (or less) means DefaultMaxDepth (32).
	MaxDepth int
	// MaxEntries is the largest number of entries (<url> or <sitemap>,
	// well-formed or not) accepted. Zero (or less) means unlimited.
	MaxEntries int64
	// Logger receives a warning, at most once per kind and document, for
	// each tolerated deviation from the specification. Nil discards them.
	Logger *slog.Logger
}

// EntryError reports one malformed entry: a bad datetime, hash list,
// length or pri, a missing <loc> or rs:ln rel/href, a repeated <loc>,
// <lastmod>, rs:md or rs:md attribute. The document itself is still sound:
// after an EntryError, Reader.Next may be called again and continues with
// the following entry. Err is classified permanent (errclass).
type EntryError struct {
	// Index is the entry's position in the document, counting from 0 and
	// including malformed entries.
	Index int64
	// Loc is the entry's <loc>, whitespace-trimmed, if it was read.
	Loc string
	// Change is the change the entry's rs:md reports, if it was read
	// ("" otherwise): what a reader that asks for the resource again needs
	// to know, a deletion above all.
	Change Change
	// Time is the entry's change time (rs:md datetime, else lastmod), if
	// it was read: what orders it among the changes of its resource.
	Time time.Time
	// Err says what is wrong.
	Err error
}

// Error describes the entry and the problem.
func (e *EntryError) Error() string {
	if e.Loc != "" {
		return fmt.Sprintf("manifest: entry %d (%s): %v", e.Index, trunc(e.Loc, 200), e.Err)
	}
	return fmt.Sprintf("manifest: entry %d: %v", e.Index, e.Err)
}

// Unwrap returns Err.
func (e *EntryError) Unwrap() error { return e.Err }

// Reader streams a ResourceSync document: NewReader reads up to the first
// entry, so the Header is known at once, and each Next returns one entry.
// Memory use does not depend on the size of the document. A Reader is not
// safe for concurrent use.
type Reader struct {
	dec  *xmlcap.Decoder
	opts Options
	log  *slog.Logger

	header Header
	space  string // namespace of the root element

	pending    xml.StartElement // first entry, met while reading the header
	hasPending bool
	rootClosed bool

	seen  int64 // entries started
	count int64 // entries returned
	err   error // sticky: terminal error or io.EOF

	text    []byte // reused buffer for element text
	warned  uint32 // warnKind bits already logged
	sniffed string // the encoding the first bytes show (see sniffEncoding)
}

// NewReader starts reading a ResourceSync document from r and reads its
// header: the root element and the rs:md and rs:ln children of the root up
// to the first entry (in any order). The root must be <urlset> or
// <sitemapindex> and must have an rs:md child with a capability; a root
// outside the sitemap namespace is tolerated with a warning. An error is
// permanent and wraps ErrMalformed (and ErrNotResourceSync when the
// document is well-formed but not ResourceSync), except for errors of r
// itself, which are returned wrapped but with their own class.
//
// The document is UTF-8 unless its XML declaration names another encoding
// (ISO-8859-1, windows-1252, … — see xmlcap.CharsetReader) or it starts as UTF-16
// does; a byte order mark wins over the declaration. An encoding that
// cannot be decoded fails the document (ErrMalformed), naming the label.
// DOCTYPE and entity declarations are rejected.
func NewReader(r io.Reader, opts Options) (*Reader, error) {
	if opts.MaxTokenSize <= 0 {
		opts.MaxTokenSize = DefaultMaxTokenSize
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	src, sniffed := sniffEncoding(r)
	dec := xmlcap.NewDecoder(src, opts.MaxTokenSize, opts.MaxDepth)
	if sniffed != "" {
		// A byte order mark (or UTF-16's own shape) decides; a declaration
		// naming something else is a producer's slip (see checkDecl).
		dec.CharsetReader = func(_ string, input io.Reader) (io.Reader, error) { return input, nil }
	}
	mr := &Reader{dec: dec, opts: opts, log: log, sniffed: sniffed}
	if err := mr.readHeader(); err != nil {
		return nil, err
	}
	return mr, nil
}

// Header returns what the document says about itself. It is complete as
// soon as NewReader returns; rs:md and rs:ln elements found after the first
// entry are ignored with a warning.
func (r *Reader) Header() Header {
	h := r.header
	h.Links = slices.Clone(h.Links)
	return h
}

// Count returns the number of entries Next has returned without error.
func (r *Reader) Count() int64 { return r.count }

// InputOffset returns the number of bytes of the document consumed so far.
func (r *Reader) InputOffset() int64 { return r.dec.InputOffset() }

// Ended reports whether Next returned io.EOF: the document was read to its
// proper end, whole.
func (r *Reader) Ended() bool { return r.err == io.EOF }

// Next returns the next entry of the document. At the end it checks that
// the document ends properly (the root closed, then nothing but
// whitespace, comments and processing instructions) and returns io.EOF.
//
// A malformed entry yields (nil, *EntryError) and Next may be called again
// to go on with the next entry. Any other error is terminal: it wraps
// ErrMalformed (or is an error of the underlying reader), and Next returns
// it again on every later call, as it does io.EOF.
//
// Every field of the returned Entry is filled: Loc trimmed and non-empty,
// datetimes in UTC, Metadata.Length -1 and Link.Pri DefaultPri when absent.
func (r *Reader) Next() (*Entry, error) {
	if r.err != nil {
		return nil, r.err
	}
	e, err := r.next()
	if err != nil {
		if _, ok := err.(*EntryError); !ok {
			r.err = err
		}
		return nil, err
	}
	r.count++
	return e, nil
}

func (r *Reader) next() (*Entry, error) {
	if r.hasPending {
		r.hasPending = false
		return r.readEntry(r.pending)
	}
	for !r.rootClosed {
		tok, err := r.token()
		if err != nil {
			return nil, r.unexpectedEOF(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch {
			case r.isEntry(t.Name):
				return r.readEntry(t)
			case isRS(t.Name, "md"), isRS(t.Name, "ln"):
				r.warn(warnLateHeader, "rs:"+t.Name.Local+" of the root after the first entry is ignored")
			}
			if err := r.skip(); err != nil {
				return nil, err
			}
		case xml.EndElement:
			r.rootClosed = true
		case xml.CharData:
			if !isSpace(t) {
				r.warn(warnText, "text directly inside the root element is ignored")
			}
		}
	}
	if err := r.readTrailer(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// token returns the next token, keeping the depth and enforcing the limits.
// io.EOF is returned as is, only at the very end of a document whose
// elements are all closed.
func (r *Reader) token() (xml.Token, error) {
	tok, err := r.dec.Token()
	if err != nil {
		return nil, r.decodeError(err)
	}
	if t, ok := tok.(xml.Directive); ok {
		return nil, r.malformed("%s is not allowed (no DOCTYPE or entity declarations)", directiveName(t))
	}
	return tok, nil
}

// decodeError turns an error of the decoder into one of the Reader.
func (r *Reader) decodeError(err error) error {
	switch {
	case err == io.EOF:
		return io.EOF
	case r.dec.SourceErr() != nil:
		line, _ := r.dec.InputPos()
		return fmt.Errorf("manifest: reading document at line %d: %w", line, r.dec.SourceErr())
	case errors.Is(err, xmlcap.ErrTokenTooLarge):
		return r.malformed("a token (tag, text or comment) is larger than %d bytes", r.opts.MaxTokenSize)
	case errors.Is(err, xmlcap.ErrTooDeep):
		return r.malformed("elements nested deeper than %d", r.opts.MaxDepth)
	}
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return errclass.Permanentf("%w: line %d: %s", ErrMalformed, se.Line, se.Msg)
	}
	return r.malformed("%v", err)
}

// malformed returns a terminal error at the current line.
// The format may use %w.
func (r *Reader) malformed(format string, a ...any) error {
	line, _ := r.dec.InputPos()
	return errclass.NewPermanent(fmt.Errorf("%w: line %d: "+format, append([]any{ErrMalformed, line}, a...)...))
}

// notRS returns the error for a document that is not ResourceSync.
func (r *Reader) notRS(format string, a ...any) error {
	line, _ := r.dec.InputPos()
	return errclass.Permanentf("%w: %w: line %d: %s", ErrMalformed, ErrNotResourceSync, line, fmt.Sprintf(format, a...))
}

// skip consumes the rest of the element whose start tag was just read.
func (r *Reader) skip() error {
	end := r.dec.Depth() - 1
	for r.dec.Depth() > end {
		if _, err := r.token(); err != nil {
			return r.unexpectedEOF(err)
		}
	}
	return nil
}

// unexpectedEOF turns io.EOF inside the document into a terminal error.
func (r *Reader) unexpectedEOF(err error) error {
	if err == io.EOF {
		return r.malformed("unexpected end of document")
	}
	return err
}

// readHeader reads the prolog, the root start tag and the header.
func (r *Reader) readHeader() error {
	sawDecl := false
	for {
		tok, err := r.token()
		if err == io.EOF {
			return r.malformed("empty document: no root element")
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.ProcInst:
			if t.Target == "xml" {
				sawDecl = true
				r.checkDecl(string(t.Inst))
			}
		case xml.CharData:
			rest := t
			if !sawDecl && r.dec.InputOffset() == int64(len(t)) && strings.HasPrefix(string(t), "\uFEFF") {
				r.warn(warnBOM, "document starts with a byte order mark")
				rest = t[len("\uFEFF"):]
			}
			if !isSpace(rest) {
				return r.malformed("text before the root element")
			}
		case xml.StartElement:
			if !sawDecl {
				r.warn(warnNoDecl, "document has no XML declaration")
			}
			return r.readRoot(t)
		}
	}
}

// readRoot reads the root's rs:md and rs:ln children up to the first entry
// or the end of the root.
func (r *Reader) readRoot(root xml.StartElement) error {
	h := Header{Metadata: NewMetadata()}
	switch root.Name.Local {
	case "urlset":
		h.Root = URLSet
	case "sitemapindex":
		h.Root = SitemapIndex
	default:
		return r.notRS("root element <%s> is not <urlset> or <sitemapindex>", trunc(root.Name.Local, 64))
	}
	if root.Name.Space != SitemapNS {
		r.warn(warnRootNS, "root element is not in the sitemap namespace", "namespace", root.Name.Space)
	}
	r.space = root.Name.Space
	sawMD := false
	strayMD := "" // namespace of an md element that is not rs:md, for the error
header:
	for {
		tok, err := r.token()
		if err != nil {
			return r.unexpectedEOF(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch {
			case r.isEntry(t.Name):
				r.pending = t.Copy()
				r.hasPending = true
				break header
			case isRS(t.Name, "md"):
				if sawMD {
					return r.malformed("the root has more than one rs:md")
				}
				sawMD = true
				if err := r.parseMetadata(t.Attr, &h.Metadata, true); err != nil {
					return r.malformed("root rs:md: %w", err)
				}
			case isRS(t.Name, "ln"):
				l, err := r.parseLink(t.Attr)
				if err != nil {
					return r.malformed("root rs:ln: %w", err)
				}
				h.Links = append(h.Links, l)
			case t.Name.Local == "md":
				strayMD = t.Name.Space
			}
			if err := r.skip(); err != nil {
				return err
			}
		case xml.EndElement:
			r.rootClosed = true
			break header
		case xml.CharData:
			if !isSpace(t) {
				r.warn(warnText, "text directly inside the root element is ignored")
			}
		}
	}
	if h.Metadata.Capability == "" {
		hint := ""
		if strayMD != "" {
			hint = fmt.Sprintf(" (found an md element in namespace %q)", strayMD)
		}
		return r.notRS("<%s> has no rs:md capability in namespace %s: a plain sitemap?%s", root.Name.Local, RSNS, hint)
	}
	r.header = h
	return nil
}

// readEntry reads one entry whose start tag has just been read.
func (r *Reader) readEntry(start xml.StartElement) (*Entry, error) {
	index := r.seen
	r.seen++
	if r.opts.MaxEntries > 0 && r.seen > r.opts.MaxEntries {
		return nil, r.malformed("more than %d entries", r.opts.MaxEntries)
	}
	if (start.Name.Local == "url") != (r.header.Root == URLSet) {
		r.warn(warnEntryName, "entry element does not match the root", "element", start.Name.Local, "root", r.header.Root.String())
	}
	line, _ := r.dec.InputPos()
	e := &Entry{Metadata: NewMetadata()}
	var bad error
	note := func(err error) {
		if bad == nil {
			bad = err
		}
	}
	var haveLoc, haveLastmod, haveMD bool
	base := r.dec.Depth()
	for {
		tok, err := r.token()
		if err != nil {
			return nil, r.unexpectedEOF(err)
		}
		if _, ok := tok.(xml.EndElement); ok && r.dec.Depth() < base {
			break
		}
		t, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch {
		case r.inSitemapNS(t.Name) && (t.Name.Local == "loc" || t.Name.Local == "lastmod" || t.Name.Local == "changefreq"):
			s, nested, err := r.readText()
			if err != nil {
				return nil, err
			}
			if nested {
				note(fmt.Errorf("<%s> contains an element", t.Name.Local))
			}
			s = strings.TrimSpace(s)
			switch t.Name.Local {
			case "loc":
				if haveLoc {
					note(errors.New("more than one <loc>"))
				}
				haveLoc = true
				e.Loc = s
			case "lastmod":
				if haveLastmod {
					note(errors.New("more than one <lastmod>"))
				}
				haveLastmod = true
				tm, err := r.datetime("lastmod", s, r.changeTimes())
				if err != nil {
					note(fmt.Errorf("<lastmod>: %w", err))
				}
				e.Lastmod = tm
			default:
				e.ChangeFreq = s
			}
			continue // readText consumed the end tag
		case isRS(t.Name, "md"):
			if haveMD {
				note(errors.New("more than one rs:md"))
			} else if err := r.parseMetadata(t.Attr, &e.Metadata, r.changeTimes()); err != nil {
				note(fmt.Errorf("rs:md: %w", err))
			}
			haveMD = true
		case isRS(t.Name, "ln"):
			l, err := r.parseLink(t.Attr)
			if err != nil {
				note(fmt.Errorf("rs:ln: %w", err))
			} else {
				e.Links = append(e.Links, l)
			}
		}
		if err := r.skip(); err != nil {
			return nil, err
		}
	}
	if e.Loc == "" && bad == nil {
		note(errors.New("no <loc>"))
	}
	if bad != nil {
		return nil, &EntryError{Index: index, Loc: e.Loc, Change: e.Metadata.Change, Time: e.ChangeTime(), Err: errclass.Permanentf("line %d: %w", line, bad)}
	}
	return e, nil
}

// readText returns the text of the element whose start tag has just been
// read, consuming its end tag. nested reports child elements (whose text
// is not included).
func (r *Reader) readText() (s string, nested bool, err error) {
	base := r.dec.Depth()
	r.text = r.text[:0]
	for {
		tok, err := r.token()
		if err != nil {
			return "", false, r.unexpectedEOF(err)
		}
		switch t := tok.(type) {
		case xml.CharData:
			if r.dec.Depth() != base {
				continue
			}
			if len(r.text)+len(t) > r.opts.MaxTokenSize {
				return "", false, r.malformed("element text is larger than %d bytes", r.opts.MaxTokenSize)
			}
			r.text = append(r.text, t...)
		case xml.StartElement:
			nested = true
		case xml.EndElement:
			if r.dec.Depth() < base {
				return string(r.text), nested, nil
			}
		}
	}
}

// readTrailer checks that nothing but whitespace, comments and processing
// instructions follows the root element.
func (r *Reader) readTrailer() error {
	for {
		tok, err := r.token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return r.malformed("element <%s> after the root element", trunc(t.Name.Local, 64))
		case xml.CharData:
			if !isSpace(t) {
				return r.malformed("text after the root element")
			}
		case xml.ProcInst:
			if strings.EqualFold(t.Target, "xml") {
				return r.malformed("XML declaration after the root element")
			}
		}
	}
}

// Attribute bits, to catch repeated attributes.
const (
	attrCapability = 1 << iota
	attrAt
	attrCompleted
	attrFrom
	attrUntil
	attrDatetime
	attrChange
	attrEncoding
	attrHash
	attrLength
	attrPath
	attrType
	attrRel
	attrHref
	attrModified
	attrPri
)

// parseMetadata fills m from the attributes of an rs:md element. Attributes
// with a namespace and unknown ones are ignored.
//
// A datetime that is not a W3C Datetime is read leniently (see
// ParseDatetimeLenient), with a warning; one that cannot be read at all is
// an error when strict, and is otherwise dropped with a warning.
func (r *Reader) parseMetadata(attrs []xml.Attr, m *Metadata, strict bool) error {
	// Every attribute is read, a bad one's error returned at the end: an
	// entry that fails still says its change and its time.
	var seen uint32
	var bad error
	for _, a := range attrs {
		if a.Name.Space != "" {
			continue
		}
		bit := metadataBit(a.Name.Local)
		switch {
		case bit == 0:
			continue
		case seen&bit != 0:
			if bad == nil {
				bad = errclass.Permanentf("attribute %s given twice", a.Name.Local)
			}
			continue // the first stands
		}
		seen |= bit
		var err error
		switch a.Name.Local {
		case "capability":
			m.Capability = Capability(strings.TrimSpace(a.Value))
		case "at":
			m.At, err = r.datetime("at", a.Value, strict)
		case "completed":
			m.Completed, err = r.datetime("completed", a.Value, strict)
		case "from":
			m.From, err = r.datetime("from", a.Value, strict)
		case "until":
			m.Until, err = r.datetime("until", a.Value, strict)
		case "datetime":
			m.Datetime, err = r.datetime("datetime", a.Value, strict)
		case "change":
			m.Change = Change(strings.TrimSpace(a.Value))
			switch m.Change {
			case Created, Updated, Deleted:
			default:
				r.warn(warnChange, "unknown change value", "change", trunc(string(m.Change), 64))
			}
		case "encoding":
			m.Encoding = strings.TrimSpace(a.Value)
		case "hash":
			m.Hashes, err = r.parseHashes(a.Value)
		case "length":
			m.Length, err = parseLength(a.Value)
		case "path":
			m.Path = a.Value
			if m.Path != "" && !strings.HasPrefix(m.Path, "/") {
				r.warn(warnPath, "rs:md path without a leading slash", "path", trunc(m.Path, 200))
			}
		case "type":
			m.Type = strings.TrimSpace(a.Value)
		}
		if err != nil && bad == nil {
			bad = fmt.Errorf("%s: %w", a.Name.Local, err)
		}
	}
	return bad
}

// metadataBit is the bit of the rs:md attribute name among those read (0
// for another).
func metadataBit(name string) uint32 {
	switch name {
	case "capability":
		return attrCapability
	case "at":
		return attrAt
	case "completed":
		return attrCompleted
	case "from":
		return attrFrom
	case "until":
		return attrUntil
	case "datetime":
		return attrDatetime
	case "change":
		return attrChange
	case "encoding":
		return attrEncoding
	case "hash":
		return attrHash
	case "length":
		return attrLength
	case "path":
		return attrPath
	case "type":
		return attrType
	}
	return 0
}

// changeTimes reports whether the document's datetimes order changes (a
// Change List, Change Dump or Change Dump manifest): there an entry whose
// datetime cannot be read fails, while elsewhere (snapshots, whose times
// are informative) it is dropped with a warning and the entry kept.
func (r *Reader) changeTimes() bool {
	switch r.header.Metadata.Capability {
	case ChangeList, ChangeDump, ChangeDumpManifest:
		return true
	}
	return false
}

// datetime parses the value of the datetime field name leniently (see
// ParseDatetimeLenient), warning when it was not a W3C Datetime. A value
// that cannot be read is an error when strict; otherwise it is dropped
// (zero time) with a warning.
func (r *Reader) datetime(name, v string, strict bool) (time.Time, error) {
	t, lenient, err := ParseDatetimeLenient(v)
	switch {
	case err == nil && lenient:
		r.warn(warnDatetimeLenient, "datetime is not a W3C Datetime; read leniently (no zone taken as UTC)", "field", name, "value", trunc(v, 64), "as", t.Format(time.RFC3339Nano))
	case err != nil && !strict:
		r.warn(warnDatetimeDropped, "datetime that cannot be read is ignored", "field", name, "error", err)
		return time.Time{}, nil
	}
	return t, err
}

// parseLink reads the attributes of an rs:ln element. rel and href are
// required.
func (r *Reader) parseLink(attrs []xml.Attr) (Link, error) {
	l := NewLink("", "")
	var seen uint32
	for _, a := range attrs {
		if a.Name.Space != "" {
			continue
		}
		var bit uint32
		var err error
		switch a.Name.Local {
		case "rel":
			bit = attrRel
			l.Rel = strings.TrimSpace(a.Value)
		case "href":
			bit = attrHref
			l.Href = strings.TrimSpace(a.Value)
		case "type":
			bit = attrType
			l.Type = strings.TrimSpace(a.Value)
		case "encoding":
			bit = attrEncoding
			l.Encoding = strings.TrimSpace(a.Value)
		case "hash":
			bit = attrHash
			var herr error
			l.Hashes, herr = r.parseHashes(a.Value)
			if herr != nil {
				// Links' digests are informative (the spec's own Example 27
				// has made-up ones): keep them verbatim, unverified.
				r.warn(warnLinkHash, "rs:ln hash that does not parse kept verbatim in Hashes.Unknown", "error", herr)
				l.Hashes = fixity.Hashes{Unknown: strings.Fields(a.Value)}
			}
		case "length":
			bit = attrLength
			l.Length, err = parseLength(a.Value)
		case "modified":
			bit = attrModified
			l.Modified, err = r.datetime("modified", a.Value, r.changeTimes())
		case "path":
			bit = attrPath
			l.Path = a.Value
		case "pri":
			bit = attrPri
			l.Pri, err = parsePri(a.Value)
		default:
			continue
		}
		if seen&bit != 0 {
			return Link{}, errclass.Permanentf("attribute %s given twice", a.Name.Local)
		}
		seen |= bit
		if err != nil {
			return Link{}, fmt.Errorf("%s: %w", a.Name.Local, err)
		}
	}
	if l.Rel == "" {
		return Link{}, errclass.Permanentf("no rel")
	}
	if l.Href == "" {
		return Link{}, errclass.Permanentf("no href")
	}
	return l, nil
}

// parseHashes parses a hash attribute, warning about untidy whitespace and
// unknown algorithms.
func (r *Reader) parseHashes(v string) (fixity.Hashes, error) {
	if !tidyList(v) {
		r.warn(warnHashSpace, "hash list with extra whitespace")
	}
	h, err := fixity.ParseList(v)
	if err != nil {
		return fixity.Hashes{}, err
	}
	if len(h.Unknown) > 0 {
		r.warn(warnHashAlg, "hash algorithm not verified", "token", trunc(h.Unknown[0], 80))
	}
	return h, nil
}

// parseLength parses a non-negative decimal length.
func parseLength(v string) (int64, error) {
	s := strings.TrimSpace(v)
	if s == "" || s[0] < '0' || s[0] > '9' {
		return -1, errclass.Permanentf("%q is not a non-negative integer", trunc(s, 32))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1, errclass.Permanentf("%q is not a non-negative integer", trunc(s, 32))
	}
	return n, nil
}

// parsePri parses a link priority, 1 to 999999.
func parsePri(v string) (int, error) {
	s := strings.TrimSpace(v)
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > DefaultPri || s[0] < '0' || s[0] > '9' {
		return DefaultPri, errclass.Permanentf("%q is not an integer 1-%d", trunc(s, 32), DefaultPri)
	}
	return n, nil
}

// checkDecl warns about the quirks of an XML declaration that the decoder
// copes with.
func (r *Reader) checkDecl(inst string) {
	if strings.Contains(inst, "'") {
		r.warn(warnDeclQuotes, "XML declaration in single quotes", "declaration", trunc(inst, 80))
	}
	if _, after, ok := strings.Cut(inst, "encoding="); ok && len(after) > 1 {
		enc, _, _ := strings.Cut(after[1:], after[:1])
		if enc != "UTF-8" && strings.EqualFold(enc, "utf-8") {
			r.warn(warnDeclCase, "XML declaration with lower-case encoding", "encoding", enc)
		}
		if r.sniffed != "" && !sameEncoding(enc, r.sniffed) {
			r.warn(warnDeclEncoding, "XML declaration names an encoding its byte order mark (or UTF-16 bytes) contradicts; reading the document as "+r.sniffed, "encoding", trunc(enc, 40))
		}
	}
}

// sniffEncoding looks at the first bytes of r. A UTF-16 document — a byte
// order mark, or "<?" in either byte order without one — is returned
// transcoded to UTF-8: encoding/xml reads only ASCII-compatible input, and
// could not even read a UTF-16 declaration. It also returns the encoding
// those bytes show ("UTF-8" for a UTF-8 byte order mark, "UTF-16LE" or
// "UTF-16BE"), "" when they show none; that encoding then wins over the
// one the declaration names.
func sniffEncoding(r io.Reader) (io.Reader, string) {
	br := bufio.NewReaderSize(r, 4096)
	b, _ := br.Peek(4)
	var e unicode.Endianness
	var name string
	switch {
	case len(b) >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf:
		return br, "UTF-8" // the decoder reads it; readHeader skips the mark
	case len(b) >= 2 && b[0] == 0xff && b[1] == 0xfe:
		e, name = unicode.LittleEndian, "UTF-16LE"
	case len(b) >= 2 && b[0] == 0xfe && b[1] == 0xff:
		e, name = unicode.BigEndian, "UTF-16BE"
	case len(b) == 4 && b[0] == '<' && b[1] == 0 && b[2] == '?' && b[3] == 0:
		e, name = unicode.LittleEndian, "UTF-16LE"
	case len(b) == 4 && b[0] == 0 && b[1] == '<' && b[2] == 0 && b[3] == '?':
		e, name = unicode.BigEndian, "UTF-16BE"
	default:
		return br, ""
	}
	// The byte order mark, when there is one, is taken off and decides.
	return transform.NewReader(br, unicode.UTF16(e, unicode.UseBOM).NewDecoder()), name
}

// sameEncoding reports whether a declared label names the encoding
// sniffEncoding found ("UTF-8", "UTF-16LE" or "UTF-16BE").
func sameEncoding(label, sniffed string) bool {
	l := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(label)), "_", "-")
	if sniffed == "UTF-8" {
		return l == "utf-8" || l == "utf8" || l == "us-ascii" || l == "ascii"
	}
	return l == "utf-16" || l == "utf16" || l == strings.ToLower(sniffed) || l == "ucs-2" || l == "iso-10646-ucs-2"
}

// directiveName names a <!…> directive for an error message.
func directiveName(d xml.Directive) string {
	word, _, _ := strings.Cut(strings.TrimSpace(string(d)), " ")
	switch up := strings.ToUpper(word); up {
	case "DOCTYPE", "ENTITY", "ELEMENT", "ATTLIST", "NOTATION":
		return "<!" + up + ">"
	}
	return "a <!…> declaration"
}

// isEntry reports whether n is an entry element: <url> or <sitemap> in the
// root's namespace or the sitemap namespace.
func (r *Reader) isEntry(n xml.Name) bool {
	return (n.Local == "url" || n.Local == "sitemap") && r.inSitemapNS(n)
}

func (r *Reader) inSitemapNS(n xml.Name) bool { return n.Space == r.space || n.Space == SitemapNS }

func isRS(n xml.Name, local string) bool { return n.Space == RSNS && n.Local == local }

// isSpace reports whether b is only XML whitespace.
func isSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// tidyList reports whether s is a list separated by single spaces, without
// leading or trailing whitespace.
func tidyList(s string) bool {
	prevSpace := true
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if prevSpace {
				return false
			}
			prevSpace = true
		case '\t', '\n', '\r':
			return false
		default:
			prevSpace = false
		}
	}
	return !prevSpace || s == ""
}

// warnKind is one kind of tolerated deviation; each is logged once per
// document.
type warnKind uint

const (
	warnNoDecl warnKind = iota
	warnDeclQuotes
	warnDeclCase
	warnBOM
	warnRootNS
	warnEntryName
	warnText
	warnLateHeader
	warnHashSpace
	warnHashAlg
	warnLinkHash
	warnPath
	warnChange
	warnDatetimeLenient
	warnDatetimeDropped
	warnDeclEncoding
)

func (r *Reader) warn(k warnKind, msg string, args ...any) {
	if r.warned&(1<<k) != 0 {
		return
	}
	r.warned |= 1 << k
	line, _ := r.dec.InputPos()
	r.log.Warn("manifest: "+msg, append(args, "line", line)...)
}
