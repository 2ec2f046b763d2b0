package oaipmh

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/url"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/xmlcap"
	"github.com/rsharvest/rsharvest/source"
)

// malformedPage reports whether err is a list page that could not be read
// as a well-formed OAI-PMH response (its XML broken, or cut short), as
// opposed to an OAI-PMH error the server reported, a record too large or
// a request that failed.
func malformedPage(err error) bool {
	var es Errors
	return errors.Is(err, ErrMalformed) && !errors.As(err, &es) && !errors.Is(err, ErrTooLarge) &&
		!errors.Is(err, xmlcap.ErrTooDeep) && !errors.Is(err, xmlcap.ErrTokenTooLarge)
}

// isolate recovers what it can of a list page that was not well-formed
// (err), so that one bad record never costs its neighbours: the page is
// asked for once more and read leniently (every forbidden character
// replaced, however it arrives); if that fails too, the page is asked for
// a third time and scanned tolerantly for its records' identifiers and its
// resumption token, and each record not read yet is asked for alone
// (GetRecord). A record that stays unreadable is its own permanent failure
// (the next task asks for it again). It returns the page's token; its
// error means the page's extent could not be known (no token, and the
// response cut short), and fails the list (its set's checkpoint held).
func (h *harvest) isolate(ctx context.Context, args url.Values, err error) (string, error) {
	h.log.Warn("a page not well-formed; asking for it again, read leniently", "source", h.base, "error", err)
	var token string
	err = h.requestWith(ctx, h.base, args, true, func(rd *Reader) error {
		if err := h.page(ctx, rd); err != nil {
			return err
		}
		token = rd.Token().Value
		return nil
	})
	if err == nil || h.stop != nil || !malformedPage(err) || ctx.Err() != nil {
		return token, err
	}
	h.log.Warn("a page still not well-formed; recovering its records one at a time", "source", h.base, "error", err)
	found := pageScan{max: h.maxPageRecords()}
	if err := h.open(ctx, h.base, args, func(in io.Reader) error { return found.scan(in) }); err != nil {
		return "", err
	}
	for _, id := range found.ids {
		if h.took(id) {
			continue
		}
		rec, err := h.getRecord(ctx, id)
		if h.stop != nil || ctx.Err() != nil {
			return "", cmp.Or(h.stop, ctx.Err())
		}
		if err != nil {
			h.log.Warn("a record unreadable on its own too", "source", h.base, "identifier", id, "error", err)
			rec = &Record{Header: Header{Identifier: id}}
		}
		if err := h.take(ctx, rec, err); err != nil {
			return "", err
		}
	}
	if !found.complete && found.token == "" {
		return "", errclass.Retryablef("%s?%s: a page cut short before its resumption token, %d records of it recovered alone: %w",
			h.base, args.Encode(), len(found.ids), ErrMalformed)
	}
	return found.token, nil
}

// getRecord asks for one record alone, read strictly and then, if it is
// not well-formed, leniently.
func (h *harvest) getRecord(ctx context.Context, id string) (*Record, error) {
	rec, err := h.Planner.getRecord(ctx, h.base, id, h.prefix, false)
	if malformedPage(err) && ctx.Err() == nil {
		rec, err = h.Planner.getRecord(ctx, h.base, id, h.prefix, true)
	}
	if err == nil && rec.Header.Identifier == "" {
		rec.Header.Identifier = id
	}
	return rec, err
}

// retry asks again, one at a time, for the records of the set whose own
// permanent failure is outstanding (source.Holdings.Retries): the
// checkpoint moved past them, so only this brings them.
func (h *harvest) retry(ctx context.Context, recs []source.Record) error {
	for _, r := range recs {
		rec, err := h.getRecord(ctx, r.URI)
		if h.stop != nil || ctx.Err() != nil {
			return cmp.Or(h.stop, ctx.Err())
		}
		var es Errors
		if errors.As(err, &es) && es.Has("idDoesNotExist") {
			// Gone from the repository: nothing to hold any more. The
			// delete is dated now (the server's clock), not left
			// undated, which would pass for older than the version
			// held and be dropped.
			h.log.Info("a record failed before no longer exists", "source", h.base, "identifier", r.URI)
			rec, err = &Record{Header: Header{Identifier: r.URI, Deleted: true, Time: h.now}}, nil
		}
		if err := h.emitRecord(ctx, r.URI, rec, err); err != nil {
			return err
		}
	}
	return nil
}

// pageScan is what a tolerant scan of a list page found: the identifiers
// of its records' headers, its resumption token, and whether the response
// was complete (its root element closed).
type pageScan struct {
	max      int // most ids (0: DefaultMaxPageRecords)
	ids      []string
	token    string
	complete bool
}

// maxScanText bounds the text of one element the scan reads.
const maxScanText = 64 << 10

// scan reads a response as a stream of tags, whatever its XML's faults:
// the text of each <identifier> inside a <header>, of <resumptionToken>,
// and the end of <OAI-PMH>. Nothing but one tag or text at a time is held.
func (s *pageScan) scan(in io.Reader) error {
	br := bufio.NewReaderSize(in, 64<<10)
	inHeader := false
	for {
		if _, err := br.ReadSlice('<'); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
		tag, err := readUntil(br, '>', 4096)
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		name, closing, selfClosing := tagName(tag)
		switch {
		case name == "header" && !closing:
			inHeader = !selfClosing
		case name == "header":
			inHeader = false
		case name == "OAI-PMH" && closing:
			s.complete = true
		case closing || selfClosing:
		case name == "identifier" && inHeader, name == "resumptionToken":
			text, err := readUntil(br, '<', maxScanText)
			if err != nil && err != io.EOF {
				return err
			}
			if err := br.UnreadByte(); err != nil && err != bufio.ErrInvalidUnreadByte {
				return err
			}
			v := string(bytes.TrimSpace(text))
			v = html.UnescapeString(v)
			if name == "resumptionToken" {
				s.token = v
			} else if v != "" {
				if n := cmp.Or(s.max, DefaultMaxPageRecords); len(s.ids) >= n {
					return errclass.Permanentf("%w: more than %d records in one page", ErrPageTooLong, n)
				}
				s.ids = append(s.ids, v)
			}
		}
	}
}

// readUntil reads up to and including delim, at most limit bytes, and
// returns what came before it; a longer run is cut (the rest skipped).
func readUntil(br *bufio.Reader, delim byte, limit int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice(delim)
		if len(out) < limit {
			out = append(out, chunk[:min(len(chunk), limit-len(out))]...)
		}
		switch {
		case err == nil:
			if len(out) > 0 && out[len(out)-1] == delim {
				out = out[:len(out)-1]
			}
			return out, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return out, err
		}
	}
}

// tagName returns a tag's local name (the text between '<' and '>'), and
// whether it closes an element or closes itself.
func tagName(tag []byte) (name string, closing, selfClosing bool) {
	if bytes.HasPrefix(tag, []byte("/")) {
		closing, tag = true, tag[1:]
	}
	selfClosing = bytes.HasSuffix(tag, []byte("/"))
	end := bytes.IndexAny(tag, " \t\r\n/")
	if end < 0 {
		end = len(tag)
	}
	n := tag[:end]
	if i := bytes.LastIndexByte(n, ':'); i >= 0 {
		n = n[i+1:]
	}
	return string(n), closing, selfClosing
}

// getRecord is GetRecord, read leniently when lenient is set.
func (p *Planner) getRecord(ctx context.Context, base, identifier, prefix string, lenient bool) (*Record, error) {
	var rec *Record
	args := url.Values{"verb": {"GetRecord"}, "identifier": {identifier}, "metadataPrefix": {prefix}}
	err := p.requestWith(ctx, base, args, lenient, func(rd *Reader) error {
		r, err := rd.Next()
		if err == io.EOF {
			return errclass.Permanentf("%w: a GetRecord response without a record", ErrMalformed)
		}
		rec = r
		return err
	})
	if rec != nil && rec.Header.Identifier != "" && rec.Header.Identifier != identifier {
		// Another record than the one asked for: not the asked record's
		// to stand for, whose own failure this is (asked for again by
		// the next task).
		return &Record{Header: Header{Identifier: identifier}},
			errclass.Permanentf("GetRecord %s: %w: the repository answered with the record %s", identifier, ErrWrongRecord, rec.Header.Identifier)
	}
	if err != nil && rec != nil && rec.Header.Identifier != "" && errclass.IsPermanent(err) {
		return rec, err
	}
	if err != nil {
		return nil, fmt.Errorf("GetRecord %s: %w", identifier, err)
	}
	return rec, nil
}

// ErrWrongRecord is wrapped by the (permanent) error of a GetRecord that
// the repository answered with another record than the one asked for.
var ErrWrongRecord = errors.New("another record than asked for")
