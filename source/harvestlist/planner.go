package harvestlist

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"strconv"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/source"
)

// Planner plans a harvest of a harvest list: every document it names, at
// the highest revision it lists, as a record fetched from its
// documentURL; the executor skips, without a request, what is held at
// that revision or a higher one.
type Planner struct {
	// OpenDocument reads the list (source.Services.OpenDocument).
	OpenDocument func(ctx context.Context, url string) (io.ReadCloser, error)
	// ScratchDir holds the list's spool while it is planned ("": the
	// system's).
	ScratchDir string
	Log        *slog.Logger
}

var _ source.Planner = (*Planner)(nil)

// Plan reads the list at task.Source in two passes: the first parses it,
// keeping the highest revision of each docid (8 bytes of hash and 8 of
// revision per document: a list of 100,000 documents holds under 4 MB)
// and spooling its document elements to a scratch file; the second
// replays the spool and emits the records, the documents listed twice
// (reported as skipped: the highest revision wins) and the document
// elements that cannot be used (failed). Nothing is emitted unless the
// whole list could be read.
// A list has no changes to follow: an incremental task reads it whole as
// a baseline does (what is held is skipped all the same). Its one
// resource set ("") has a checkpoint with no time to continue from.
func (p *Planner) Plan(ctx context.Context, task source.Task, _ source.Holdings, emit func(context.Context, source.Unit) error) ([]source.Checkpoint, error) {
	switch task.Mode {
	case source.Baseline, source.Incremental:
	default:
		return nil, errclass.Fatalf("harvestlist: no such task mode %q", task.Mode)
	}
	if p.OpenDocument == nil {
		return nil, errclass.Fatalf("harvestlist: no way to read documents")
	}
	best := map[uint64]int64{}
	// Pass 1: the highest revision of each docid, while the list is
	// spooled for pass 2.
	list, err := p.readList(ctx, task.Source, func(d Document) {
		k := key(d.DocID())
		if r, ok := best[k]; !ok || d.Revision > r {
			best[k] = d.Revision
		}
	})
	if err != nil {
		return nil, err
	}
	defer list.close()
	// Pass 2: the records. Once its winner is emitted, a docid's value in
	// best is -(revision+1) (revisions are never negative).
	err = list.replay(func(d Document) error {
		k := key(d.DocID())
		r := best[k]
		winner := "revision " + strconv.FormatInt(r, 10)
		if r < 0 {
			r = -r - 1
			winner = "revision " + strconv.FormatInt(r, 10)
			if d.Revision == r {
				winner = "the same revision earlier in the list"
			}
		}
		if best[k] < 0 || d.Revision < r {
			return emit(ctx, source.Unit{Skip: &source.Skip{URI: d.DocID(), Listed: task.Source,
				Reason: fmt.Sprintf("docid listed twice (line %d, revision %d): %s wins", d.Line, d.Revision, winner)}})
		}
		best[k] = -r - 1
		return emit(ctx, source.Unit{Record: &source.Record{URI: d.DocID(), Version: strconv.FormatInt(d.Revision, 10),
			Location: d.URL, Listed: task.Source, Length: -1, DocumentType: d.Type}})
	}, func(ee *EntryError) error {
		uri := ee.DocID
		if uri == "" {
			uri = fmt.Sprintf("%s#line%d", task.Source, ee.Line)
		}
		return emit(ctx, source.Unit{Failure: &source.Failure{URI: uri, Stage: "list", Listed: task.Source, Err: ee, Resource: true}})
	})
	if err != nil {
		if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
			return nil, err
		}
		var se *source.SourceError
		if errors.As(err, &se) || !errclass.IsPermanent(err) {
			return nil, err
		}
		return nil, &source.SourceError{URL: task.Source, Err: err}
	}
	// The one resource set, with no point to continue from: whatever the
	// mode, the next harvest reads the list whole again
	// (source.Protocol.WholeListing).
	return []source.Checkpoint{{ResourceSet: "", Next: task.From}}, nil
}

// readList reads the list at url once, calling seen with each document,
// and returns it spooled for the second pass. A list that cannot be read
// to its end is the source's error, of the class its reading had: nothing
// of it has been emitted.
func (p *Planner) readList(ctx context.Context, url string, seen func(Document)) (*listSpool, error) {
	rc, err := p.OpenDocument(ctx, url)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &source.SourceError{URL: url, Err: err}
	}
	defer rc.Close()
	list, err := newListSpool(p.ScratchDir)
	if err != nil {
		return nil, err
	}
	in := &readErr{r: rc}
	err = Read(in, func(d Document) error {
		if err := ctx.Err(); err != nil {
			return err // a list of millions is read in seconds: stop at once
		}
		seen(d)
		return list.document(d)
	}, list.entryError)
	switch {
	case err == nil:
		source.ReadWhole(rc) // Read ends only at the list's proper end
		return list, nil
	case errclass.IsFatal(err):
	case ctx.Err() != nil:
		err = ctx.Err()
	case in.err != nil:
		// Reading failed, not the list: the reading's class stands.
		err = &source.SourceError{URL: url, Err: in.err}
	default:
		err = &source.SourceError{URL: url, Err: err}
	}
	list.close()
	return nil, err
}

// readErr reads r and keeps its error, other than io.EOF.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// key is docid's 64-bit hash, the key of pass 1's map.
func key(docid string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(docid))
	return h.Sum64()
}
