// Package harvestlist is the planner of the Metacat-style harvest list: a site
// publishes a harvest list (the Metacat harvester's harvestList.xsd: a
// harvestList root in the namespace Namespace holding document elements,
// each a docid — scope, identifier, revision — with its documentType and
// documentURL); each document is one record whose identity is
// "scope.identifier" and whose version is its revision. A revision never
// changes: one held at that revision, or a higher one, is not fetched
// again (Protocol's CompareVersions orders them).
package harvestlist

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/xmlcap"
	"github.com/rsharvest/rsharvest/manifest"
)

// Namespace is the harvest list's namespace.
const Namespace = "eml://ecoinformatics.org/harvestList"

// Document is one document a harvest list names.
type Document struct {
	Scope      string
	Identifier int64
	Revision   int64
	// Type is the documentType: a namespace, a formal public identifier
	// or a MIME type.
	Type string
	// URL is the documentURL, where to GET it.
	URL string
	// Line is the line of its document element in the list.
	Line int
}

// DocID is the document's identity: "scope.identifier".
func (d Document) DocID() string { return d.Scope + "." + strconv.FormatInt(d.Identifier, 10) }

// ErrNotHarvestList is wrapped by Read's error for a document that is not
// a harvest list (the wrong root, or not XML).
var ErrNotHarvestList = errors.New("not a harvest list")

// EntryError is one document element that cannot be used; Read goes on
// after it.
type EntryError struct {
	// DocID is the element's docid as far as it could be read ("" when
	// unknown).
	DocID string
	Line  int
	Err   error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("harvest list line %d: document %s: %v", e.Line, e.DocID, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// rawDocument is a document element as the schema has it: unqualified
// children.
type rawDocument struct {
	DocID struct {
		Scope      string `xml:"scope"`
		Identifier string `xml:"identifier"`
		Revision   string `xml:"revision"`
	} `xml:"docid"`
	DocumentType string `xml:"documentType"`
	DocumentURL  string `xml:"documentURL"`
}

// The limits of a harvest list's parser: memory is bounded by them, not by
// the list (a list nested a million deep, or an attribute of 200 MB, is
// refused).
const (
	// MaxTokenSize is the largest token (a tag with its attributes, a
	// text) of a harvest list: a docid too long to be held (past
	// source.MaxURILength) below it is that document's failure, above it
	// the list's.
	MaxTokenSize = manifest.DefaultMaxTokenSize
	// MaxDepth is the deepest nesting of a harvest list's elements (the
	// schema's is 4).
	MaxDepth = 32
)

// Read reads the harvest list r as a stream, calling fn with each
// document in order (memory does not grow with the list). A document
// element that cannot be used is given to bad (an *EntryError) and the
// list goes on. A document that is not a harvest list is an error
// wrapping ErrNotHarvestList (permanent); fn's and bad's errors end Read.
func Read(r io.Reader, fn func(Document) error, bad func(*EntryError) error) error {
	dec := xmlcap.NewDecoder(r, MaxTokenSize, MaxDepth)
	root := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if !root {
				return errclass.NewPermanent(fmt.Errorf("%w: no harvestList element", ErrNotHarvestList))
			}
			return nil
		}
		if err != nil {
			if !root {
				return errclass.NewPermanent(fmt.Errorf("%w: %v", ErrNotHarvestList, err))
			}
			return errclass.NewPermanent(fmt.Errorf("harvest list: %w", err))
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if !root {
			if se.Name.Local != "harvestList" || se.Name.Space != Namespace {
				return errclass.NewPermanent(fmt.Errorf("%w: the root element is {%s}%s, not {%s}harvestList", ErrNotHarvestList, se.Name.Space, se.Name.Local, Namespace))
			}
			root = true
			continue
		}
		if se.Name.Local != "document" {
			if err := dec.Skip(); err != nil {
				return errclass.NewPermanent(fmt.Errorf("harvest list: %w", err))
			}
			continue
		}
		line, _ := dec.InputPos()
		raw, err := readDocument(dec)
		if err != nil {
			return errclass.NewPermanent(fmt.Errorf("harvest list line %d: %w", line, err))
		}
		d, ee := raw.document(line)
		if ee != nil {
			if err := bad(ee); err != nil {
				return err
			}
			continue
		}
		if err := fn(d); err != nil {
			return err
		}
	}
}

// readDocument reads the content of a document element, whose start dec
// has just read, through its end: each field of rawDocument is the
// character data directly in its element, matched by local name as
// encoding/xml's Unmarshal would (the last such element wins), and any
// other element is skipped. It walks the tokens itself, without
// Unmarshal's reflection: a harvest list names millions of documents.
func readDocument(dec *xmlcap.Decoder) (rawDocument, error) {
	var (
		raw     rawDocument
		field   *string // the field whose element is open
		inDocID bool
		text    []byte
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return raw, io.ErrUnexpectedEOF
		}
		if err != nil {
			return raw, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			var target *string
			switch name := t.Name.Local; {
			case field != nil: // an element inside a field's: not its text
			case !inDocID && name == "docid":
				inDocID = true
				continue
			case inDocID && name == "scope":
				target = &raw.DocID.Scope
			case inDocID && name == "identifier":
				target = &raw.DocID.Identifier
			case inDocID && name == "revision":
				target = &raw.DocID.Revision
			case !inDocID && name == "documentType":
				target = &raw.DocumentType
			case !inDocID && name == "documentURL":
				target = &raw.DocumentURL
			}
			if target == nil {
				if err := dec.Skip(); err != nil {
					return raw, err
				}
				continue
			}
			field, text = target, text[:0]
		case xml.CharData:
			if field != nil {
				text = append(text, t...)
			}
		case xml.EndElement:
			switch {
			case field != nil:
				*field, field = string(text), nil
			case inDocID:
				inDocID = false
			default:
				return raw, nil // the document's own end
			}
		}
	}
}

// document checks raw and makes it a Document.
func (raw rawDocument) document(line int) (Document, *EntryError) {
	scope := strings.TrimSpace(raw.DocID.Scope)
	id := strings.TrimSpace(raw.DocID.Identifier)
	fail := func(format string, a ...any) (Document, *EntryError) {
		docid := ""
		if scope != "" || id != "" {
			docid = scope + "." + id
		}
		return Document{}, &EntryError{DocID: docid, Line: line, Err: errclass.Permanentf(format, a...)}
	}
	if scope == "" {
		return fail("no scope")
	}
	ident, err := strconv.ParseInt(id, 10, 64)
	if err != nil || ident < 0 {
		return fail("identifier %q is not a number", id)
	}
	// From here on, the failure names the docid as a valid entry would
	// (0100 and +100 are 100): the document it keeps listed is that one.
	id = strconv.FormatInt(ident, 10)
	rev, err := strconv.ParseInt(strings.TrimSpace(raw.DocID.Revision), 10, 64)
	if err != nil || rev < 0 {
		return fail("revision %q is not a number", strings.TrimSpace(raw.DocID.Revision))
	}
	u := strings.TrimSpace(raw.DocumentURL)
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return fail("documentURL %q is not an http(s) URL", u)
	}
	return Document{Scope: scope, Identifier: ident, Revision: rev, Type: strings.TrimSpace(raw.DocumentType), URL: u, Line: line}, nil
}
