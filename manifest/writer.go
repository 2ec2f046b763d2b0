package manifest

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// Writer streams a ResourceSync document to an io.Writer: NewWriter writes
// the XML declaration, the root element and the header's rs:ln and rs:md;
// each Write adds one entry; Close ends the document and flushes. Nothing is
// held in memory beyond a small buffer. Writers of index documents write
// <sitemap> entries, others <url> entries.
type Writer struct {
	bw    *bufio.Writer
	root  Root
	err   error
	close bool
}

// NewWriter starts a document with header h on w. h.Root must be URLSet or
// SitemapIndex, h.Metadata.Capability must be set and h.Links must follow
// the rules of Write; otherwise the error is permanent (errclass).
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if h.Root != URLSet && h.Root != SitemapIndex {
		return nil, errclass.NewPermanent(errors.New("manifest: writer needs a root (URLSet or SitemapIndex)"))
	}
	if h.Metadata.Capability == "" {
		return nil, errclass.NewPermanent(errors.New("manifest: writer needs a capability"))
	}
	if err := checkLinks(h.Links); err != nil {
		return nil, err
	}
	mw := &Writer{bw: bufio.NewWriterSize(w, 64<<10), root: h.Root}
	mw.str(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	mw.str("<" + h.Root.String() + ` xmlns="` + SitemapNS + `" xmlns:rs="` + RSNS + `">` + "\n")
	mw.writeMetadata("  ", h.Metadata)
	for _, l := range h.Links {
		mw.writeLink("  ", l)
	}
	return mw, mw.err
}

// Write appends one entry. The entry's Loc must not be blank, and each
// link needs a rel and an href and a Pri of 0 (absent) to 999999; an entry
// that breaks these rules is refused (a permanent error) and nothing of it
// is written.
func (w *Writer) Write(e *Entry) error {
	if w.err != nil {
		return w.err
	}
	if w.close {
		return errclass.NewPermanent(errors.New("manifest: write after close"))
	}
	if strings.TrimSpace(e.Loc) == "" {
		return errclass.NewPermanent(errors.New("manifest: entry without loc"))
	}
	if err := checkLinks(e.Links); err != nil {
		return err
	}
	el := "url"
	if w.root == SitemapIndex {
		el = "sitemap"
	}
	w.str("  <" + el + "><loc>")
	w.text(e.Loc)
	w.str("</loc>")
	if !e.Lastmod.IsZero() {
		w.str("<lastmod>" + FormatDatetime(e.Lastmod) + "</lastmod>")
	}
	if e.ChangeFreq != "" {
		w.str("<changefreq>")
		w.text(e.ChangeFreq)
		w.str("</changefreq>")
	}
	w.writeMetadata("", e.Metadata)
	for _, l := range e.Links {
		w.writeLink("", l)
	}
	w.str("</" + el + ">\n")
	return w.err
}

// Close ends the document and flushes the buffer. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if !w.close {
		w.close = true
		w.str("</" + w.root.String() + ">\n")
	}
	if w.err != nil {
		return w.err
	}
	return w.bw.Flush()
}

// FormatDatetime renders t as a W3C Datetime in UTC, exactly (it reads
// back as t): whole seconds without a fraction, a time of whole
// microseconds — every stamp the state records — with exactly six
// fraction digits, any other with nine. Times of one resolution are thus
// written with a fixed number of digits, and compare as strings as they
// do as times.
func FormatDatetime(t time.Time) string {
	t = t.UTC()
	switch ns := t.Nanosecond(); {
	case ns == 0:
		return t.Format("2006-01-02T15:04:05Z07:00")
	case ns%1000 == 0:
		return t.Format("2006-01-02T15:04:05.000000Z07:00")
	}
	return t.Format("2006-01-02T15:04:05.000000000Z07:00")
}

func (w *Writer) str(s string) {
	if w.err == nil {
		_, w.err = w.bw.WriteString(s)
	}
}

func (w *Writer) text(s string) {
	if w.err == nil {
		w.err = xml.EscapeText(w.bw, []byte(s))
	}
}

func (w *Writer) attr(name, value string) {
	if value == "" {
		return
	}
	w.str(" " + name + `="`)
	w.text(value)
	w.str(`"`)
}

func (w *Writer) timeAttr(name string, t time.Time) {
	if !t.IsZero() {
		w.attr(name, FormatDatetime(t))
	}
}

func (w *Writer) writeMetadata(indent string, m Metadata) {
	if m.isEmpty() {
		return
	}
	w.str(indent + "<rs:md")
	w.attr("capability", string(m.Capability))
	w.timeAttr("at", m.At)
	w.timeAttr("completed", m.Completed)
	w.timeAttr("from", m.From)
	w.timeAttr("until", m.Until)
	w.timeAttr("datetime", m.Datetime)
	w.attr("change", string(m.Change))
	w.attr("encoding", m.Encoding)
	w.attr("hash", m.Hashes.String())
	if m.Length >= 0 {
		w.attr("length", strconv.FormatInt(m.Length, 10))
	}
	w.attr("path", m.Path)
	w.attr("type", m.Type)
	w.str("/>")
	if indent != "" {
		w.str("\n")
	}
}

func (w *Writer) writeLink(indent string, l Link) {
	w.str(indent + "<rs:ln")
	w.attr("rel", l.Rel)
	w.attr("href", l.Href)
	w.attr("type", l.Type)
	w.attr("encoding", l.Encoding)
	w.attr("hash", l.Hashes.String())
	if l.Length >= 0 {
		w.attr("length", strconv.FormatInt(l.Length, 10))
	}
	w.timeAttr("modified", l.Modified)
	w.attr("path", l.Path)
	if l.Pri > 0 && l.Pri != DefaultPri {
		w.attr("pri", strconv.Itoa(l.Pri))
	}
	w.str("/>")
	if indent != "" {
		w.str("\n")
	}
}

// checkLinks rejects links a Reader would reject: without rel or href, or
// with a pri outside 1-999999 (0 stands for "absent").
func checkLinks(ls []Link) error {
	for _, l := range ls {
		if strings.TrimSpace(l.Rel) == "" || strings.TrimSpace(l.Href) == "" {
			return errclass.NewPermanent(errors.New("manifest: link without rel or href"))
		}
		if l.Pri < 0 || l.Pri > DefaultPri {
			return errclass.Permanentf("manifest: link pri %d outside 1-%d", l.Pri, DefaultPri)
		}
	}
	return nil
}

// String names the writer's root for debugging.
func (w *Writer) String() string { return fmt.Sprintf("manifest.Writer(%s)", w.root) }

func (m *Metadata) isEmpty() bool {
	return m.Capability == "" && m.At.IsZero() && m.Completed.IsZero() && m.From.IsZero() &&
		m.Until.IsZero() && m.Datetime.IsZero() && m.Change == "" && m.Encoding == "" &&
		m.Hashes.IsZero() && len(m.Hashes.Unknown) == 0 && m.Length < 0 && m.Path == "" && m.Type == ""
}
