// Package fromes is the publish.Holdings of an Elasticsearch (or
// ZincSearch) index that rsharvest's es sink (sink/es) wrote, for
// `rsharvest publish --from-es URL/INDEX`: the resource index's
// documents are the resources held, the change index's the log of changes,
// instead of the state store's.
//
// # Source
//
// The indexes hold one source (one resource set of the published Source).
// Its name is the spec's resource_set option when given; else the
// resource_set every document of both indexes carries (the sink's
// Options.ResourceSet); else the resource index's URL, without credentials.
// Documents of several resource sets (a sink without the option stores each
// resource's capability list, and its change documents none) are one
// source, named by the URL.
//
// # Resources and changes
//
// Resources are read in the order of the documents' doc_id (the URI itself,
// but for URIs that are not valid UTF-8 or longer than 512 bytes, whose
// doc_id is their SHA-256), a page at a time (DefaultPage documents):
// search_after on Elasticsearch, from and size on ZincSearch, which lacks
// search_after. Each is a state.Resource with the document's URI, length,
// hashes, type, lastmod and links; ChangeTime and Updated are the
// document's timestamp.
//
// Changes are read by datetime (when the sink saw the change), the changes
// of one datetime in the order the sink made them. The sink writes
// "updated" for every Put and "deleted" for every Delete. A change's
// Recorded stamp is its datetime plus one nanosecond for each earlier change
// of the same datetime, so that stamps are unique and increase in walk
// order (the sink's datetimes are milliseconds: a walk fails if a
// datetime's changes would reach the next one). An "updated" change that is
// the latest write of its resource (the resource document has its rev)
// carries the resource's length, hashes and type; others have length -1 and
// are marked Superseded. A "deleted" change is marked Superseded when the
// resource is held again (not when it was put and deleted again since:
// that would take a search per deletion).
//
// # Consistency
//
// Neither Elasticsearch nor ZincSearch gives a snapshot that lasts across
// requests. A view counts both indexes and notes the newest change when it
// starts (es.Stats); every walk must meet exactly the documents counted, and
// when the view ends the indexes are counted again. Since the sink adds a
// change document for each Put and Delete, a sink that wrote anything while
// the view was open makes the view fail with a retryable error wrapping
// es.ErrChanged: publish again once the sink is idle. ZincSearch shows
// writes a moment after they are acknowledged (its WAL sync interval), so a
// view taken right after a harvest may fail that way too.
package fromes

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/sink/es"
	"github.com/rsharvest/rsharvest/state"
)

// DefaultPage is the number of documents read by one search.
const DefaultPage = es.DefaultReadPage

var (
	_ publish.Holdings = (*Holdings)(nil)
	_ publish.View     = (*view)(nil)
)

// Holdings are the documents an es sink wrote, as publish.Holdings.
type Holdings struct {
	r *es.Reader
}

// Open returns the Holdings of the indexes spec names, in the es sink's
// syntax: http://HOST:PORT[/PREFIX]/INDEX[?changes=INDEX&resource_set=NAME]
// (the sink's other options are accepted and ignored). Credentials come
// from the URL's user information or else ES_USERNAME and ES_PASSWORD.
// client sends the requests; nil means a client of its own. Each request
// is bounded by es.DefaultRequestTimeout and retried (es.DefaultRetries
// times) when it fails for a temporary reason.
//
// It checks that the server answers and that both indexes exist and were
// written by the es sink: an index that does not exist, or whose mapping
// lacks the sink's fields, is a fatal error naming it and wrapping
// es.ErrNotSink. An unreachable server is a retryable error.
func Open(ctx context.Context, spec string, client *http.Client) (publish.Holdings, error) {
	return open(ctx, spec, es.ReaderOptions{HTTPClient: client})
}

// open is Open with the reader's options (the tests' page size, retries).
func open(ctx context.Context, spec string, o es.ReaderOptions) (*Holdings, error) {
	r, err := es.OpenReader(ctx, spec, o)
	if err != nil {
		return nil, fmt.Errorf("publish from es: %w", err)
	}
	return &Holdings{r: r}, nil
}

// View calls fn with a view of the indexes. When fn returns nil, it checks
// that the indexes did not change meanwhile: if they did, it returns a
// retryable error wrapping es.ErrChanged (see the package documentation).
// fn's error is returned unchanged.
func (h *Holdings) View(ctx context.Context, fn func(publish.View) error) error {
	before, err := h.r.Stats(ctx)
	if err != nil {
		return fmt.Errorf("publish from es: %w", err)
	}
	v := &view{r: h.r, st: before, source: h.sourceName(before)}
	err = fn(v)
	v.close()
	if err != nil {
		return err
	}
	after, err := h.r.Stats(ctx)
	if err != nil {
		return fmt.Errorf("publish from es: %w", err)
	}
	if !after.Equal(before) {
		return errclass.Retryablef("publish from es: %s: %d resources and %d changes when the view began, %d and %d when it ended (newest change %s, then %s): %w; publish again when the sink is idle",
			h.r.URL(), before.Resources, before.Changes, after.Resources, after.Changes,
			stamp(before.Newest), stamp(after.Newest), es.ErrChanged)
	}
	return nil
}

// sourceName names the one source (see the package documentation).
func (h *Holdings) sourceName(st es.Stats) string {
	switch {
	case h.r.ResourceSet() != "":
		return h.r.ResourceSet()
	case st.ResourceSet != "":
		return st.ResourceSet
	default:
		return h.r.URL()
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.Format(time.RFC3339Nano)
}

// view is one View: the Stats taken when it began bound its walks.
type view struct {
	r      *es.Reader
	st     es.Stats
	source string

	mu     sync.Mutex
	closed bool
}

func (v *view) close() {
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
}

// check returns the error of a call on v for source (any source when
// anySource).
func (v *view) check(ctx context.Context, source string, anySource bool) error {
	v.mu.Lock()
	closed := v.closed
	v.mu.Unlock()
	switch {
	case closed:
		return errclass.Fatalf("publish from es: a view used after its View returned")
	case !anySource && source != v.source:
		return errclass.Permanentf("publish from es: %s holds no source %q (it holds %q)", v.r.URL(), source, v.source)
	}
	return ctx.Err()
}

// At returns the Recorded stamp of the newest change, or the zero time
// when there is none.
func (v *view) At(ctx context.Context) (time.Time, error) {
	if err := v.check(ctx, "", true); err != nil {
		return time.Time{}, err
	}
	if v.st.Changes == 0 {
		return time.Time{}, nil
	}
	return v.st.Newest.Add(time.Duration(v.st.NewestCount - 1)), nil
}

// SiteOf returns "": the es sink's documents do not name the site.
func (v *view) SiteOf(ctx context.Context, source string) (string, error) {
	return "", v.check(ctx, "", true)
}

// DescribedBy returns "": the es sink's documents do not say what the
// source's own description is.
func (v *view) DescribedBy(ctx context.Context, source string) (string, error) {
	return "", v.check(ctx, "", true)
}

// Sources returns the one source of the indexes.
func (v *view) Sources(ctx context.Context) ([]string, error) {
	if err := v.check(ctx, "", true); err != nil {
		return nil, err
	}
	return []string{v.source}, nil
}

// CountResources returns the number of resource documents.
func (v *view) CountResources(ctx context.Context, source string) (int64, error) {
	if err := v.check(ctx, source, false); err != nil {
		return 0, err
	}
	return v.st.Resources, nil
}

// Resources calls fn for each resource document, in doc_id order.
func (v *view) Resources(ctx context.Context, source string, fn func(state.Resource) error) error {
	if err := v.check(ctx, source, false); err != nil {
		return err
	}
	return v.r.WalkResources(ctx, v.st.Resources, func(d es.StoredResource) error {
		return fn(v.resource(&d))
	})
}

// resource turns a resource document into a state.Resource.
func (v *view) resource(d *es.StoredResource) state.Resource {
	r := state.Resource{
		URI:         d.URI,
		Source:      v.source,
		ResourceSet: d.ResourceSet,
		Length:      d.Length,
		Hashes:      d.Hashes,
		Type:        d.Type,
		Lastmod:     d.Lastmod,
		ChangeTime:  d.Timestamp,
		Outcome:     state.OutcomeWritten,
		Updated:     d.Timestamp,
	}
	for _, l := range d.Links {
		r.Links = append(r.Links, state.Link{Rel: l.Rel, Href: l.Href, Type: l.Type})
	}
	return r
}

// Changes calls fn for each change document, in the order recorded, with
// increasing Recorded stamps (see the package documentation).
func (v *view) Changes(ctx context.Context, source string, _ bool, fn func(state.ChangeRecord) error) error {
	if err := v.check(ctx, source, false); err != nil {
		return err
	}
	var (
		started bool
		prev    time.Time // the previous change's stamp
		group   time.Time // the previous change's datetime
		k       int64     // its rank among the changes of its datetime
	)
	return v.r.WalkChanges(ctx, v.st.Changes, func(batch []es.StoredChange) error {
		uris := make([]string, len(batch))
		for i := range batch {
			uris[i] = batch[i].URI
		}
		held, err := v.r.ResourcesByURI(ctx, uris)
		if err != nil {
			return fmt.Errorf("publish from es: %w", err)
		}
		for i := range batch {
			c := &batch[i]
			if started && c.Datetime.Equal(group) {
				k++
			} else {
				group, k = c.Datetime, 0
			}
			rec := c.Datetime.Add(time.Duration(k))
			if started && !rec.After(prev) {
				return errclass.Permanentf("publish from es: %s: change %q at %s cannot be given a stamp after %s (too many changes of one datetime, or datetimes finer than milliseconds)",
					v.r.ChangesURL(), c.Rev, stamp(c.Datetime), stamp(prev))
			}
			prev, started = rec, true
			cr := state.ChangeRecord{URI: c.URI, Source: v.source, Length: -1, Recorded: rec}
			switch c.Change {
			case state.ChangeCreated, state.ChangeUpdated, state.ChangeDeleted:
				cr.Change = c.Change
			default:
				return errclass.Permanentf("publish from es: %s: change %q is %q, not updated or deleted: %w", v.r.ChangesURL(), c.Rev, c.Change, es.ErrNotSink)
			}
			r, ok := held[c.URI]
			switch {
			case c.Change == state.ChangeDeleted:
				// Put again since; a resource put and deleted again
				// since is not told.
				cr.Superseded = ok
			case ok && r.Rev == c.Rev:
				// The version held: the resource document's.
				cr.Length, cr.Hashes, cr.Type = r.Length, r.Hashes, r.Type
			default:
				cr.Superseded = true
			}
			if err := fn(cr); err != nil {
				return err
			}
		}
		return nil
	})
}
