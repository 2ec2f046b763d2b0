// Package oaipmh is the OAI-PMH 2.0 protocol's side of rsharvest. This
// file reads responses as streams: a Reader returns a response's records
// one at a time, each record's metadata copied byte for byte out of the
// page as a standalone XML document, so that a page is never held whole.
package oaipmh

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/xmlcap"
	"github.com/rsharvest/rsharvest/manifest"
)

// Namespace is the OAI-PMH 2.0 namespace of every response's elements.
const Namespace = "http://www.openarchives.org/OAI/2.0/"

// DefaultMaxRecordSize caps one record's metadata (Options.MaxRecordSize).
const DefaultMaxRecordSize = 16 << 20

// The limits of a response's parser: its memory is bounded by them, not by
// the response. A token (a tag, a text) may be 4 times the record cap (and
// at least manifest.DefaultMaxTokenSize), so that a record too large stays
// that record's failure; an element of the
// envelope decoded whole (Identify, a set, a format) at most 1 MiB.
const (
	MaxDepth       = 256
	maxItemSize    = 1 << 20
	tokenPerRecord = 4
)

// ErrMalformed is wrapped by the (permanent) error of a response that is
// not a well-formed OAI-PMH response.
var ErrMalformed = errors.New("malformed OAI-PMH response")

// ErrTooLarge is wrapped by the (permanent) error of a record whose
// metadata exceeds Options.MaxRecordSize.
var ErrTooLarge = errors.New("record too large")

// Error is one OAI-PMH error a response reports (spec §3.6): its code
// (badArgument, badResumptionToken, badVerb, cannotDisseminateFormat,
// idDoesNotExist, noRecordsMatch, noMetadataFormats, noSetHierarchy) and
// the server's message.
type Error struct {
	Code, Message string
}

// Errors are the OAI-PMH errors of one response; NewReader returns them
// as its error, permanent (the request itself is wrong, or there is
// nothing to harvest: see IsNoRecordsMatch).
type Errors []Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Code
		if e.Message != "" {
			parts[i] += ": " + e.Message
		}
	}
	return "OAI-PMH error " + strings.Join(parts, "; ")
}

// Has reports whether es holds an error with the given code.
func (es Errors) Has(code string) bool {
	return slices.ContainsFunc(es, func(e Error) bool { return e.Code == code })
}

// IsNoRecordsMatch reports whether err is a response saying that no record
// matches the request: an empty result, not a failure.
func IsNoRecordsMatch(err error) bool {
	var es Errors
	return errors.As(err, &es) && es.Has("noRecordsMatch")
}

// Options bound and observe a Reader. The zero value gives the defaults.
type Options struct {
	// MaxRecordSize caps one record's metadata, in bytes (0:
	// DefaultMaxRecordSize). A larger record is that record's error; the
	// rest of the page is read.
	MaxRecordSize int
	// Lenient also replaces the characters XML 1.0 forbids that arrive as
	// character references (&#26; or &#x1A;, in text and attribute
	// values; in CDATA such text is not a reference and stays), as a page
	// that is not well-formed is read the second time (see
	// Planner): every form a forbidden character arrives in is then
	// replaced by U+FFFD and counted (Replaced).
	Lenient bool
}

// Header is a record's header.
type Header struct {
	// Identifier is the record's OAI identifier, unique in the repository.
	Identifier string
	// Datestamp is the header's datestamp as sent (day or seconds
	// granularity); Time is it parsed (zero when it cannot be).
	Datestamp string
	Time      time.Time
	// Sets are the record's setSpecs.
	Sets []string
	// Deleted is set for a header with status="deleted": the record is
	// gone (it has no metadata).
	Deleted bool
}

// Record is one record of a response.
type Record struct {
	Header Header
	// Metadata is the single child element of <metadata>, as a standalone
	// UTF-8 XML document: an XML declaration, then the element as the
	// response held it, with every namespace declaration in scope in the
	// envelope that it does not make itself added to its start tag.
	// Empty for a deleted record.
	Metadata []byte
	// About holds each <about> container's element, standalone likewise.
	About [][]byte
}

// Token is a list response's resumptionToken (spec §3.5).
type Token struct {
	// Value is the token as sent: send it back exactly. Empty on the last
	// page (an empty element, or none).
	Value string
	// CompleteListSize and Cursor are -1 when not sent.
	CompleteListSize, Cursor int64
	// ExpirationDate is zero when not sent.
	ExpirationDate time.Time
}

// Reader reads one OAI-PMH response.
type Reader struct {
	tap  *tap
	dec  *xml.Decoder
	opts Options
	// depth is the number of elements open; maxToken the largest token.
	depth    int
	maxToken int64
	// ResponseDate is the server's time of the response (the clock
	// checkpoints are taken from); zero when it cannot be parsed.
	ResponseDate time.Time
	// Encoding says how the response's encoding was read when it was not
	// plain UTF-8 ("transcoded from ISO-8859-1", …), else "".
	Encoding string
	// Verb and the request's arguments, as the response echoes them.
	Verb string
	Args map[string]string
	// scopes are the namespace declarations of the open elements, the
	// innermost last.
	scopes [][]xml.Attr
	token  Token
	done   bool
	// verb is the start of the verb's element.
	verb xml.StartElement
}

// NewReader reads a response's envelope from r up to its verb's element:
// responseDate, request, and the errors a response may report instead
// (returned as Errors). The error of a response that is not OAI-PMH wraps
// ErrMalformed. Characters XML 1.0 forbids (control characters some
// servers let through) are replaced by U+FFFD and counted (Replaced).
// A response is read as UTF-8: one in another encoding is transcoded
// (manifest.UTF8), one that declares Latin-1 and sends UTF-8 is read as
// UTF-8, and bytes that are not UTF-8 in a UTF-8 response (Latin-1 text a
// server let through) are read as windows-1252 and counted (Replaced);
// Encoding says what was done.
func NewReader(r io.Reader, opts Options) (*Reader, error) {
	if opts.MaxRecordSize <= 0 {
		opts.MaxRecordSize = DefaultMaxRecordSize
	}
	in, note, err := manifest.UTF8(r)
	if err != nil {
		return nil, malformedErr(err)
	}
	t := &tap{r: bufio.NewReaderSize(in, 64<<10), lenient: opts.Lenient}
	rd := &Reader{tap: t, dec: xml.NewDecoder(t), opts: opts, Args: map[string]string{}, Encoding: note,
		maxToken: max(int64(opts.MaxRecordSize)*tokenPerRecord, manifest.DefaultMaxTokenSize)}
	t.mark(0, rd.maxToken)
	// Everything the decoder reads is UTF-8 by now (see manifest.UTF8),
	// whatever the declaration says.
	rd.dec.CharsetReader = func(_ string, input io.Reader) (io.Reader, error) { return input, nil }
	rd.token.CompleteListSize, rd.token.Cursor = -1, -1
	root, err := rd.start()
	if err != nil {
		return nil, err
	}
	if root.Name.Space != Namespace || root.Name.Local != "OAI-PMH" {
		return nil, malformed("root element <%s> in %q, expected <OAI-PMH> in %q", root.Name.Local, root.Name.Space, Namespace)
	}
	var errs Errors
	for {
		se, err := rd.start()
		if err == io.EOF || (err == nil && se == nil) {
			if len(errs) > 0 {
				return nil, errclass.NewPermanent(errs)
			}
			return nil, malformed("no verb element")
		}
		if err != nil {
			return nil, err
		}
		if se.Name.Space != Namespace {
			if err := rd.skip(); err != nil {
				return nil, err
			}
			continue
		}
		switch se.Name.Local {
		case "responseDate":
			s, err := rd.text()
			if err != nil {
				return nil, err
			}
			rd.ResponseDate = parseResponseDate(strings.TrimSpace(s))
		case "request":
			for _, a := range se.Attr {
				rd.Args[a.Name.Local] = a.Value
			}
			rd.Verb = rd.Args["verb"]
			if err := rd.skip(); err != nil {
				return nil, err
			}
		case "error":
			e := Error{Code: attr(se, "code")}
			if e.Message, err = rd.text(); err != nil {
				return nil, err
			}
			e.Message = strings.TrimSpace(e.Message)
			errs = append(errs, e)
		default:
			if len(errs) > 0 {
				return nil, errclass.NewPermanent(errs)
			}
			if rd.Verb == "" {
				rd.Verb = se.Name.Local
			}
			rd.verb = *se
			return rd, nil
		}
	}
}

// Replaced returns how many characters XML 1.0 forbids were replaced so
// far.
func (rd *Reader) Replaced() int { return rd.tap.replaced }

// Next returns the next record of a ListRecords, ListIdentifiers or
// GetRecord response (headers only for ListIdentifiers), and io.EOF after
// the last. A record that cannot be read whole (its metadata too large,
// say) is returned with an error wrapping errclass.Permanent and its
// header as far as read; the next call goes on with the next record. Any
// other error ends the response.
func (rd *Reader) Next() (*Record, error) {
	for !rd.done {
		se, err := rd.start()
		if err != nil {
			return nil, err
		}
		if se == nil { // the verb element ended
			rd.done = true
			break
		}
		if se.Name.Space != Namespace {
			if err := rd.skip(); err != nil {
				return nil, err
			}
			continue
		}
		switch se.Name.Local {
		case "record":
			return rd.record()
		case "header": // ListIdentifiers
			rec := &Record{}
			over, err := rd.header(se, &rec.Header)
			switch {
			case err != nil:
				return nil, err
			case rec.Header.Identifier == "":
				return rec, errclass.Permanentf("%w: a header without identifier", ErrMalformed)
			case over:
				return rec, errclass.Permanentf("%w: its header's setSpecs pass %d bytes", ErrTooLarge, rd.opts.MaxRecordSize)
			}
			return rec, nil
		case "resumptionToken":
			if err := rd.resumption(se); err != nil {
				return nil, err
			}
		default:
			if err := rd.skip(); err != nil {
				return nil, err
			}
		}
	}
	return nil, io.EOF
}

// Identify is what an Identify response says of a repository (spec §4.2).
type Identify struct {
	RepositoryName    string   `xml:"repositoryName" json:"repository_name"`
	BaseURL           string   `xml:"baseURL" json:"base_url"`
	ProtocolVersion   string   `xml:"protocolVersion" json:"protocol_version"`
	AdminEmail        []string `xml:"adminEmail" json:"admin_email"`
	EarliestDatestamp string   `xml:"earliestDatestamp" json:"earliest_datestamp"`
	// DeletedRecord is the repository's deleted-record policy: no,
	// persistent or transient.
	DeletedRecord string `xml:"deletedRecord" json:"deleted_record"`
	// Granularity is YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ.
	Granularity string `xml:"granularity" json:"granularity"`
	// At is the Identify response's responseDate: the server's clock.
	At time.Time `xml:"-" json:"response_date,omitzero"`
}

// Seconds reports whether the repository takes datestamps to the second;
// otherwise only days may be sent.
func (id *Identify) Seconds() bool { return strings.Contains(id.Granularity, "hh") }

// Identify reads an Identify response's body.
func (rd *Reader) Identify() (*Identify, error) {
	if rd.verb.Name.Local != "Identify" {
		return nil, malformed("an %s response, expected Identify", rd.verb.Name.Local)
	}
	var id Identify
	if err := rd.decodeElement(&id, &rd.verb); err != nil {
		return nil, err
	}
	rd.done = true
	id.At = rd.ResponseDate
	return &id, nil
}

// MetadataFormat is a format a repository disseminates
// (ListMetadataFormats).
type MetadataFormat struct {
	Prefix    string `xml:"metadataPrefix" json:"prefix"`
	Schema    string `xml:"schema" json:"schema"`
	Namespace string `xml:"metadataNamespace" json:"namespace"`
}

// Set is a set of a repository (ListSets); its description is not read.
type Set struct {
	Spec string `xml:"setSpec" json:"spec"`
	Name string `xml:"setName" json:"name"`
}

// NextFormat returns the next format of a ListMetadataFormats response,
// io.EOF after the last.
func (rd *Reader) NextFormat() (*MetadataFormat, error) {
	var f MetadataFormat
	return &f, rd.nextItem("metadataFormat", &f)
}

// NextSet returns the next set of a ListSets response, io.EOF after the
// last (then Token tells whether more pages follow).
func (rd *Reader) NextSet() (*Set, error) {
	var s Set
	return &s, rd.nextItem("set", &s)
}

// nextItem decodes the verb element's next child named local into v.
func (rd *Reader) nextItem(local string, v any) error {
	for !rd.done {
		se, err := rd.start()
		if err != nil {
			return err
		}
		switch {
		case se == nil:
			rd.done = true
		case se.Name.Space == Namespace && se.Name.Local == local:
			return rd.decodeElement(v, se)
		case se.Name.Space == Namespace && se.Name.Local == "resumptionToken":
			if err := rd.resumption(se); err != nil {
				return err
			}
		default:
			if err := rd.skip(); err != nil {
				return err
			}
		}
	}
	return io.EOF
}

// Token returns the response's resumptionToken once Next returned io.EOF.
func (rd *Reader) Token() Token { return rd.token }

// record reads a <record> element, its start just read.
func (rd *Reader) record() (*Record, error) {
	rec := &Record{}
	var (
		recErr     error
		aboutBytes int
	)
	for {
		se, err := rd.start()
		if err != nil {
			return nil, err
		}
		if se == nil {
			if rec.Header.Identifier == "" && recErr == nil {
				recErr = errclass.Permanentf("%w: a record without identifier", ErrMalformed)
			}
			return rec, recErr
		}
		switch {
		case se.Name.Space == Namespace && se.Name.Local == "header":
			over, err := rd.header(se, &rec.Header)
			if err != nil {
				return nil, err
			}
			if over && recErr == nil {
				recErr = errclass.Permanentf("%w: its header's setSpecs pass %d bytes", ErrTooLarge, rd.opts.MaxRecordSize)
			}
		case se.Name.Space == Namespace && (se.Name.Local == "metadata" || se.Name.Local == "about"):
			body, err := rd.child()
			switch {
			case errors.Is(err, ErrTooLarge):
				recErr = err
			case err != nil:
				return nil, err
			case se.Name.Local == "metadata":
				rec.Metadata = body
			case body != nil:
				if aboutBytes += len(body); aboutBytes > rd.opts.MaxRecordSize {
					if recErr == nil {
						recErr = errclass.Permanentf("%w: its about containers pass %d bytes", ErrTooLarge, rd.opts.MaxRecordSize)
					}
					break
				}
				rec.About = append(rec.About, body)
			}
		default:
			if err := rd.skip(); err != nil {
				return nil, err
			}
		}
	}
}

// header reads a <header> element, its start se just read, into h: its
// setSpecs up to Options.MaxRecordSize bytes (each counted with a
// string's own 16), over saying there were more. Its error ends the
// response: the XML is broken.
func (rd *Reader) header(se *xml.StartElement, h *Header) (over bool, err error) {
	h.Deleted = attr(se, "status") == "deleted"
	sets := 0
	for {
		c, err := rd.start()
		if err != nil {
			return over, err
		}
		if c == nil {
			return over, nil
		}
		s, err := rd.text()
		if err != nil {
			return over, err
		}
		s = strings.TrimSpace(s)
		switch c.Name.Local {
		case "identifier":
			h.Identifier = s
		case "datestamp":
			h.Datestamp, h.Time = s, ParseDatestamp(s)
		case "setSpec":
			if sets += len(s) + 16; sets > rd.opts.MaxRecordSize {
				over = true
				continue
			}
			h.Sets = append(h.Sets, s)
		}
	}
}

// resumption reads a <resumptionToken>, its start se just read.
func (rd *Reader) resumption(se *xml.StartElement) error {
	s, err := rd.text()
	if err != nil {
		return err
	}
	rd.token.Value = strings.TrimSpace(s)
	if v := attr(se, "completeListSize"); v != "" {
		fmt.Sscan(v, &rd.token.CompleteListSize)
	}
	if v := attr(se, "cursor"); v != "" {
		fmt.Sscan(v, &rd.token.Cursor)
	}
	rd.token.ExpirationDate = ParseDatestamp(attr(se, "expirationDate"))
	return nil
}

// child copies the single element inside the container whose start was
// just read (<metadata>, <about>) out of the input, as a standalone
// document; nil for an empty container.
func (rd *Reader) child() ([]byte, error) {
	t := rd.tap
	t.record(rd.dec.InputOffset())
	defer t.stop()
	var body []byte
	depth, start := 0, int64(0)
	var decls []xml.Attr
	for {
		if depth == 0 {
			t.trim(rd.dec.InputOffset())
			start = rd.dec.InputOffset()
		}
		tok, err := rd.tok()
		if err != nil {
			return nil, malformedErr(err)
		}
		if t.size() > rd.opts.MaxRecordSize {
			t.stop()
			if err := rd.skipTo(depth); err != nil {
				return nil, err
			}
			return nil, errclass.Permanentf("%w: more than %d bytes", ErrTooLarge, rd.opts.MaxRecordSize)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				decls = rd.inScope(tok)
			}
			depth++
		case xml.EndElement:
			if depth == 0 { // the container ended
				rd.scopes = rd.scopes[:len(rd.scopes)-1]
				return body, nil
			}
			depth--
			if depth == 0 && body == nil {
				body = standalone(t.bytes(start, rd.dec.InputOffset()), decls)
			}
		}
	}
}

// inScope returns the namespace declarations in scope in the envelope
// that the element se does not make itself.
func (rd *Reader) inScope(se xml.StartElement) []xml.Attr {
	own := map[string]bool{}
	for _, a := range se.Attr {
		if p, ok := declares(a); ok {
			own[p] = true
		}
	}
	var out []xml.Attr
	for i := len(rd.scopes) - 1; i >= 0; i-- {
		for _, a := range rd.scopes[i] {
			p, _ := declares(a)
			if !own[p] {
				own[p] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// declares returns the prefix an attribute declares ("" for the default
// namespace), and whether it is a declaration.
func declares(a xml.Attr) (string, bool) {
	switch {
	case a.Name.Space == "xmlns":
		return a.Name.Local, true
	case a.Name.Space == "" && a.Name.Local == "xmlns":
		return "", true
	}
	return "", false
}

// standalone makes a standalone document of an element's bytes: an XML
// declaration, and decls added to its start tag.
func standalone(elem []byte, decls []xml.Attr) []byte {
	end := bytes.IndexAny(elem, " \t\r\n/>")
	if end < 0 {
		end = len(elem)
	}
	var b bytes.Buffer
	b.Grow(len(elem) + 64*len(decls) + 40)
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.Write(elem[:end])
	for _, a := range decls {
		b.WriteString(" xmlns")
		if a.Name.Space == "xmlns" {
			b.WriteString(":" + a.Name.Local)
		}
		b.WriteString(`="`)
		xml.EscapeText(&b, []byte(a.Value))
		b.WriteString(`"`)
	}
	b.Write(elem[end:])
	return b.Bytes()
}

// start returns the next start element at the current level, nil when
// the enclosing element ends, keeping the namespace scopes.
func (rd *Reader) start() (*xml.StartElement, error) {
	for {
		tok, err := rd.tok()
		if err == io.EOF {
			return nil, io.EOF
		}
		if err != nil {
			return nil, malformedErr(err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			var decls []xml.Attr
			for _, a := range tok.Attr {
				if _, ok := declares(a); ok {
					decls = append(decls, a)
				}
			}
			rd.scopes = append(rd.scopes, decls)
			return &tok, nil
		case xml.EndElement:
			rd.scopes = rd.scopes[:len(rd.scopes)-1]
			return nil, nil
		}
	}
}

// text returns the character data of the element whose start was just
// read, and reads its end.
func (rd *Reader) text() (string, error) {
	var b strings.Builder
	for depth := 0; ; {
		tok, err := rd.tok()
		if err != nil {
			return "", malformedErr(err)
		}
		switch tok := tok.(type) {
		case xml.CharData:
			if b.Len() < 1<<20 {
				b.Write(tok)
			}
		case xml.StartElement:
			depth++
		case xml.EndElement:
			if depth == 0 {
				rd.scopes = rd.scopes[:len(rd.scopes)-1]
				return b.String(), nil
			}
			depth--
		}
	}
}

// skip reads past the end of the element whose start was just read.
func (rd *Reader) skip() error { return rd.skipTo(0) }

// skipTo reads past the end of the container a child() is in, depth
// elements inside it.
func (rd *Reader) skipTo(depth int) error {
	for end := rd.depth - depth - 1; rd.depth > end; {
		if _, err := rd.tok(); err != nil {
			return malformedErr(err)
		}
	}
	rd.scopes = rd.scopes[:len(rd.scopes)-1]
	return nil
}

// tok returns the decoder's next token under the parser's limits: elements
// at most MaxDepth deep, tokens at most maxToken bytes (the tap cuts the
// input past that). An error wrapping xmlcap.ErrTooDeep or
// xmlcap.ErrTokenTooLarge says which.
func (rd *Reader) tok() (xml.Token, error) {
	tok, err := rd.dec.Token()
	if err != nil {
		if errors.Is(err, errTokenTooLarge) {
			return nil, fmt.Errorf("%w: more than %d bytes", xmlcap.ErrTokenTooLarge, rd.maxToken)
		}
		return nil, err
	}
	rd.tap.mark(rd.dec.InputOffset(), rd.maxToken)
	switch tok.(type) {
	case xml.StartElement:
		if rd.depth++; rd.depth > MaxDepth {
			return nil, fmt.Errorf("%w: deeper than %d", xmlcap.ErrTooDeep, MaxDepth)
		}
	case xml.EndElement:
		rd.depth--
	}
	return tok, nil
}

// decodeElement decodes the element whose start se was just read into v,
// in at most maxItemSize bytes.
func (rd *Reader) decodeElement(v any, se *xml.StartElement) error {
	rd.tap.mark(rd.dec.InputOffset(), maxItemSize)
	err := rd.dec.DecodeElement(v, se)
	if errors.Is(err, errTokenTooLarge) {
		err = fmt.Errorf("%w: an element of more than %d bytes", xmlcap.ErrTokenTooLarge, maxItemSize)
	}
	if err != nil {
		return malformedErr(err)
	}
	rd.tap.mark(rd.dec.InputOffset(), rd.maxToken)
	rd.depth--
	rd.scopes = rd.scopes[:len(rd.scopes)-1]
	return nil
}

func attr(se *xml.StartElement, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}

// ParseDatestamp parses an OAI-PMH datestamp, of day (2006-01-02) or
// seconds (2006-01-02T15:04:05Z) granularity; zero when it is neither.
func ParseDatestamp(s string) time.Time {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

func malformed(format string, a ...any) error {
	return errclass.Permanentf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

func malformedErr(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return errclass.Permanentf("%w: %w", ErrMalformed, err)
}

// tap is the byte stream the XML decoder reads: it replaces the
// characters XML 1.0 forbids (C0 controls but tab, newline and carriage
// return) by U+FFFD, and records what the decoder reads while a record's
// metadata is being copied.
type tap struct {
	r *bufio.Reader
	// handed counts the bytes handed to the decoder; past limit, ReadByte
	// fails with errTokenTooLarge (see mark).
	handed, limit int64
	pending       []byte
	replaced      int
	// cont is how many continuation bytes of a valid UTF-8 sequence
	// follow.
	cont int
	// rec is set while recording: buf holds the bytes read from offset
	// base on.
	rec  bool
	base int64
	buf  []byte
	// lenient replaces forbidden character references too; cdata says the
	// bytes handed out are inside a CDATA section, and tail holds the
	// last of them, to tell.
	lenient bool
	cdata   bool
	tail    uint64
}

var replacement = []byte("\uFFFD")

// errTokenTooLarge is what the tap returns past its limit.
var errTokenTooLarge = errors.New("token too large")

// mark lets the decoder, at offset off, be handed at most max more bytes
// before its next mark: what bounds a token.
func (t *tap) mark(off, max int64) { t.limit = off + max }

// ReadByte serves the decoder (an io.ByteReader is read as is, unbuffered).
func (t *tap) ReadByte() (byte, error) {
	if t.handed >= t.limit {
		return 0, errTokenTooLarge
	}
	t.handed++
	var c byte
	if len(t.pending) > 0 {
		c, t.pending = t.pending[0], t.pending[1:]
	} else {
		b, err := t.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch {
		case t.cont > 0:
			t.cont--
			c = b
		case b < 0x20 && b != '\t' && b != '\n' && b != '\r':
			t.replaced++
			c, t.pending = replacement[0], replacement[1:]
		case b == '&' && t.lenient && !t.cdata && t.forbiddenRef():
			t.replaced++
			c, t.pending = replacement[0], replacement[1:]
		case b >= 0x80:
			c = b
			if n := t.runeLen(b); n > 0 {
				if n == 3 && b == 0xef {
					if rest, _ := t.r.Peek(2); rest[0] == 0xbf && (rest[1] == 0xbe || rest[1] == 0xbf) {
						// U+FFFE and U+FFFF: not characters in XML.
						t.r.Discard(2)
						t.replaced++
						c, t.pending = replacement[0], replacement[1:]
						break
					}
				}
				t.cont = n - 1
				break
			}
			// Not UTF-8: a byte of a single-byte encoding, read as
			// windows-1252 (which Latin-1 text is, in practice).
			t.replaced++
			enc := utf8.AppendRune(nil, charmap.Windows1252.DecodeByte(b))
			c, t.pending = enc[0], enc[1:]
		default:
			c = b
		}
	}
	if t.rec {
		t.buf = append(t.buf, c)
	}
	if t.lenient {
		t.see(c)
	}
	return c, nil
}

// The bytes that open and close a CDATA section, as the low bytes of tail.
const (
	cdataOpen  = uint64('<')<<56 | uint64('!')<<48 | uint64('[')<<40 | uint64('C')<<32 | uint64('D')<<24 | uint64('A')<<16 | uint64('T')<<8 | uint64('A')
	cdataClose = uint64(']')<<16 | uint64(']')<<8 | uint64('>')
)

// see follows the bytes handed out, to tell whether they are in a CDATA
// section ("<![CDATA[" … "]]>").
func (t *tap) see(c byte) {
	prev := t.tail
	t.tail = t.tail<<8 | uint64(c)
	switch {
	case !t.cdata && c == '[' && prev == cdataOpen:
		t.cdata = true
	case t.cdata && t.tail&0xffffff == cdataClose:
		t.cdata = false
	}
}

// forbiddenRef reports whether the '&' just read starts a character
// reference (&#N; or &#xH;) to a character XML 1.0 forbids; if so, the
// reference is consumed.
func (t *tap) forbiddenRef() bool {
	ahead, _ := t.r.Peek(32)
	if len(ahead) < 3 || ahead[0] != '#' {
		return false
	}
	end := bytes.IndexByte(ahead, ';')
	if end < 2 {
		return false
	}
	digits, base := ahead[1:end], 10
	if digits[0] == 'x' || digits[0] == 'X' {
		digits, base = digits[1:], 16
	}
	if len(digits) == 0 {
		return false
	}
	var n uint64
	for _, d := range digits {
		v := uint64(base)
		switch {
		case d >= '0' && d <= '9':
			v = uint64(d - '0')
		case base == 16 && d >= 'a' && d <= 'f':
			v = uint64(d-'a') + 10
		case base == 16 && d >= 'A' && d <= 'F':
			v = uint64(d-'A') + 10
		}
		if v >= uint64(base) {
			return false // not a character reference: the decoder says so
		}
		if n = n*uint64(base) + v; n > 0x10ffff {
			n = 0x110000
		}
	}
	if xmlChar(rune(n)) {
		return false
	}
	t.r.Discard(end + 1)
	return true
}

// xmlChar reports whether XML 1.0 allows character r (its production
// Char).
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0a || r == 0x0d || (r >= 0x20 && r <= 0xd7ff) ||
		(r >= 0xe000 && r <= 0xfffd) || (r >= 0x10000 && r <= 0x10ffff)
}

// runeLen returns the length of the valid UTF-8 sequence lead (just read)
// starts, or 0 when the bytes that follow do not make one.
func (t *tap) runeLen(lead byte) int {
	var n int
	switch {
	case lead&0xe0 == 0xc0:
		n = 2
	case lead&0xf0 == 0xe0:
		n = 3
	case lead&0xf8 == 0xf0:
		n = 4
	default:
		return 0
	}
	rest, _ := t.r.Peek(n - 1)
	if len(rest) < n-1 {
		return 0
	}
	var seq [utf8.UTFMax]byte
	seq[0] = lead
	copy(seq[1:], rest)
	if r, size := utf8.DecodeRune(seq[:n]); r == utf8.RuneError || size != n {
		return 0
	}
	return n
}

// Read serves readers that are not the decoder; the decoder uses ReadByte.
func (t *tap) Read(p []byte) (int, error) {
	for i := range p {
		c, err := t.ReadByte()
		if err != nil {
			return i, err
		}
		p[i] = c
	}
	return len(p), nil
}

// record starts recording at offset at (the decoder's position: nothing
// after it was read yet).
func (t *tap) record(at int64) { t.rec, t.base, t.buf = true, at, t.buf[:0] }

// trim forgets what was recorded before offset at.
func (t *tap) trim(at int64) {
	if n := at - t.base; n > 0 && n <= int64(len(t.buf)) {
		t.buf = t.buf[:copy(t.buf, t.buf[n:])]
		t.base = at
	}
}

func (t *tap) size() int { return len(t.buf) }

// bytes returns a copy of what was recorded from offset from to offset to.
func (t *tap) bytes(from, to int64) []byte {
	return bytes.Clone(t.buf[from-t.base : to-t.base])
}

func (t *tap) stop() { t.rec = false }

// parseResponseDate reads a responseDate: UTC in the W3C form the protocol
// requires, or the same without its zone designator (a habit of some
// servers), taken as UTC as the protocol says every date is; zero when it
// is neither.
func parseResponseDate(s string) time.Time {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t
	}
	if t, err := time.Parse("2006-01-02T15:04:05", s); err == nil {
		return t.UTC()
	}
	return time.Time{}
}
