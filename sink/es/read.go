package es

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/internal/retry"
	"github.com/rsharvest/rsharvest/sink"
)

// Reading back. A Reader reads the two indexes an ES sink wrote, for
// publishing them (publish/fromes); it never writes, creates or refreshes
// an index.
const (
	// DefaultReadPage is the number of documents a Reader asks for at once.
	DefaultReadPage = 1000
	// MaxReadPage is the largest page a Reader asks for: ZincSearch
	// silently caps a search at ZINC_MAX_RESULTS hits (10000 by default).
	MaxReadPage = 10000
	// maxGroup bounds the change documents of one datetime a Reader holds
	// at once to put them in the order they were written.
	maxGroup = 100_000
)

// ErrNotSink is wrapped by the errors of a Reader for an index the es sink
// did not write: missing, or without the sink's fields.
var ErrNotSink = errors.New("not written by rsharvest's es sink")

// ErrChanged is wrapped by the (retryable) error of a walk that met more
// or fewer documents than it was told to expect: the index changed while
// it was read.
var ErrChanged = errors.New("the index changed while it was read")

// ReaderOptions configure OpenReader. The zero value is ready to use.
type ReaderOptions struct {
	// HTTPClient sends the requests; nil means a client of the Reader's
	// own.
	HTTPClient *http.Client
	// PageSize is the number of documents asked for by one search
	// (DefaultReadPage when zero, at most MaxReadPage).
	PageSize int
	// Retries bounds the retries of one request that failed for a
	// temporary reason (DefaultRetries when zero, none when negative),
	// waiting RetryWait (DefaultRetryWait when zero) and then longer.
	Retries   int
	RetryWait time.Duration
	// RequestTimeout bounds each request (DefaultRequestTimeout when zero).
	RequestTimeout time.Duration
	// Logger receives debugging messages; nil discards them.
	Logger *slog.Logger
}

// Reader reads the resource and change documents an ES sink wrote. Its
// methods are safe for concurrent use. Errors never include credentials.
type Reader struct {
	s    *ES
	page int
}

// OpenReader opens the indexes spec names for reading. spec is the es
// sink's (see the package documentation): http://HOST:PORT[/PREFIX]/INDEX
// with options changes=INDEX and resource_set=NAME; the sink's other
// options are accepted and ignored, so that a sink's spec can be given as
// it is. Credentials come from the URL's user information or else from
// ES_USERNAME and ES_PASSWORD.
//
// It checks that the server answers, that both indexes exist and that
// their mappings hold the fields the sink writes. A missing index or one of
// other documents is a fatal error wrapping ErrNotSink; a server that
// cannot be reached or answers 429 or 5xx, retryable; refused credentials,
// fatal; other refusals, permanent.
func OpenReader(ctx context.Context, spec string, o ReaderOptions) (*Reader, error) {
	opts, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	if opts.Username == "" {
		opts.Username, opts.Password = os.Getenv("ES_USERNAME"), os.Getenv("ES_PASSWORD")
	}
	switch {
	case o.PageSize < 0 || o.PageSize > MaxReadPage:
		return nil, errclass.Fatalf("es reader %s/%s: page size %d: want 1 to %d", opts.URL, opts.Index, o.PageSize, MaxReadPage)
	case o.RetryWait < 0 || o.RequestTimeout < 0:
		return nil, errclass.Fatalf("es reader %s/%s: negative option", opts.URL, opts.Index)
	}
	opts.Retries, opts.RetryWait, opts.RequestTimeout = o.Retries, o.RetryWait, o.RequestTimeout
	opts.Logger, opts.HTTPClient = o.Logger, o.HTTPClient
	es, err := newES("es reader", opts)
	if err != nil {
		return nil, err
	}
	es.log = es.log.With("es_reader", es.base+"/"+es.opts.Index)
	r := &Reader{s: es, page: cmp.Or(o.PageSize, DefaultReadPage)}
	if r.s.flavor, err = r.detect(ctx); err != nil {
		return nil, err
	}
	if err := r.checkIndex(ctx, es.opts.Index, "doc_id", "uri", "rev", "timestamp"); err != nil {
		return nil, err
	}
	if err := r.checkIndex(ctx, es.opts.ChangesIndex, "uri", "change", "datetime", "rev"); err != nil {
		return nil, err
	}
	return r, nil
}

// URL returns the resource index's URL, without credentials.
func (r *Reader) URL() string { return r.s.base + "/" + r.s.opts.Index }

// ChangesURL returns the change index's URL, without credentials.
func (r *Reader) ChangesURL() string { return r.s.base + "/" + r.s.opts.ChangesIndex }

// ResourceSet returns the spec's resource_set option, or "".
func (r *Reader) ResourceSet() string { return r.s.opts.ResourceSet }

// Flavor returns the kind of server the Reader reads from.
func (r *Reader) Flavor() Flavor { return r.s.flavor }

// detect is the sink's detect, with errors classified for reading: a
// server that cannot be reached, or answers 429 or 5xx, is retryable.
func (r *Reader) detect(ctx context.Context) (Flavor, error) {
	resp, err := r.do(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return FlavorAuto, err
	}
	if resp.status != http.StatusOK {
		return FlavorAuto, r.s.statusError("GET /", resp)
	}
	f, _, err := rootFlavor("es reader", r.s.base, resp.body)
	return f, err
}

// checkIndex checks that index exists and that its mapping has fields.
func (r *Reader) checkIndex(ctx context.Context, index string, fields ...string) error {
	where := r.s.base + "/" + index
	path := "/" + escapeSegment(index)
	resp, err := r.do(ctx, http.MethodHead, path, nil)
	if err != nil {
		return err
	}
	switch resp.status {
	case http.StatusOK:
	case http.StatusNotFound:
		return errclass.Fatalf("es index %s does not exist: %w", where, ErrNotSink)
	default:
		return r.s.statusError("HEAD /"+index, resp)
	}
	resp, err = r.do(ctx, http.MethodGet, path+"/_mapping", nil)
	if err != nil {
		return err
	}
	if resp.status != http.StatusOK {
		return r.s.statusError("mapping of "+index, resp)
	}
	// {"NAME":{"mappings":{"properties":{…}}}}; NAME is the concrete
	// index's, which differs from index when that is an alias.
	var got map[string]struct {
		Mappings struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"mappings"`
	}
	if err := json.Unmarshal(resp.body, &got); err != nil || len(got) != 1 {
		return errclass.Fatalf("es index %s: unexpected mapping (%s): %w", where, clip(string(resp.body)), ErrNotSink)
	}
	for _, m := range got {
		var missing []string
		for _, f := range fields {
			if _, ok := m.Mappings.Properties[f]; !ok {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			return errclass.Fatalf("es index %s has no field %s: %w", where, strings.Join(missing, ", "), ErrNotSink)
		}
	}
	return nil
}

// do sends one request, retrying transport errors and 408, 429 and 5xx
// answers (other answers are the caller's to judge).
func (r *Reader) do(ctx context.Context, method, path string, body []byte) (*response, error) {
	var resp *response
	err := retry.Do(ctx, retry.Policy{
		Retries: r.s.opts.Retries,
		Initial: r.s.opts.RetryWait,
		Max:     30 * time.Second,
		Floor: func(error) time.Duration {
			if resp != nil {
				return retryAfter(resp.header)
			}
			return 0
		},
		Notify: func(n retry.Retry) {
			r.s.log.Debug("retrying", "method", method, "path", path, "wait", n.Wait, "err", n.Err)
		},
	}, func() error {
		var err error
		resp, err = r.s.once(ctx, method, path, body)
		if err != nil {
			return err
		}
		if retryableStatus(resp.status) {
			return r.s.statusError(method+" "+path, resp)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// query runs a search of index and returns its hits and total.
func (r *Reader) query(ctx context.Context, index string, q map[string]any) ([]searchHit, int64, error) {
	return r.s.searchWith(ctx, r.do, "es reader", index, q)
}

// count counts the documents of index that match q (nil: all).
func (r *Reader) count(ctx context.Context, index string, q map[string]any) (int64, error) {
	if q == nil {
		q = map[string]any{"match_all": map[string]any{}}
	}
	_, n, err := r.query(ctx, index, map[string]any{"query": q, "size": 0, "track_total_hits": true})
	if err != nil {
		return 0, fmt.Errorf("es reader: counting %s: %w", index, err)
	}
	return n, nil
}

// walk calls fn with the hits of index in sort order, a page at a time:
// with search_after on Elasticsearch, with from and size on ZincSearch,
// which lacks search_after. sort must be a total order. It expects expect
// hits and asks for at most as many pages as they fill, and one more: a
// walk that meets more, or fewer, fails with ErrChanged (retryable).
func (r *Reader) walk(ctx context.Context, index string, sort []any, source []string, expect int64, fn func([]searchHit) error) error {
	zinc := r.s.flavor == FlavorZinc
	maxPages := expect/int64(r.page) + 2
	var (
		seen   int64
		after  json.RawMessage
		lastID string
	)
	for p := int64(0); ; p++ {
		if p == maxPages {
			return r.changed(index, expect, seen, "or more")
		}
		q := map[string]any{
			"query":   map[string]any{"match_all": map[string]any{}},
			"sort":    sort,
			"size":    r.page,
			"_source": source,
		}
		if zinc {
			q["from"] = seen
		} else {
			q["track_total_hits"] = false
			if after != nil {
				q["search_after"] = after
			}
		}
		hits, _, err := r.query(ctx, index, q)
		if err != nil {
			return fmt.Errorf("es reader: reading %s: %w", index, err)
		}
		if !zinc && len(hits) > 0 && p > 0 && hits[0].ID == lastID {
			return errclass.Permanentf("es reader %s: reading %s: the server does not page (the same document %q twice)", r.s.base, index, lastID)
		}
		if seen+int64(len(hits)) > expect {
			return r.changed(index, expect, seen+int64(len(hits)), "or more")
		}
		if len(hits) > 0 {
			seen += int64(len(hits))
			last := hits[len(hits)-1]
			after, lastID = last.Sort, last.ID
			if !zinc && len(after) == 0 {
				return errclass.Permanentf("es reader %s: reading %s: hits without sort values", r.s.base, index)
			}
			if err := fn(hits); err != nil {
				return err
			}
		}
		if len(hits) < r.page {
			break
		}
	}
	if seen != expect {
		return r.changed(index, expect, seen, "")
	}
	return nil
}

func (r *Reader) changed(index string, expect, seen int64, more string) error {
	if more != "" {
		more = " " + more
	}
	return errclass.Retryablef("es reader %s/%s: expected %d documents, met %d%s: %w", r.s.base, index, expect, seen, more, ErrChanged)
}

// StoredResource is a resource document, as Put wrote it.
type StoredResource struct {
	// URI is the resource's URI, exactly as given to Put; DocID the
	// document's _id.
	URI, DocID string
	// ResourceSet is the document's resource_set, or "".
	ResourceSet string
	// Length is the body's length in bytes.
	Length int64
	// Hashes are the body's md5, sha1 and sha256, when written.
	Hashes fixity.Hashes
	// Type is the media type, or "".
	Type string
	// Lastmod is the resource's lastmod, or zero; Timestamp when the sink
	// queued the document.
	Lastmod, Timestamp time.Time
	// Rev is the token of the write (the _id of its change document).
	Rev string
	// Links are the resource's links.
	Links []sink.Link
}

// resourceFields are the fields of a resource document a Reader reads.
var resourceFields = []string{"doc_id", "uri", "uri_b64", "resource_set", "length", "md5", "sha1", "sha256", "mime", "lastmod", "timestamp", "rev", "ln"}

// decodeResource decodes a resource document.
func (r *Reader) decodeResource(h *searchHit) (StoredResource, error) {
	var d resourceDoc
	bad := func(format string, a ...any) (StoredResource, error) {
		return StoredResource{}, errclass.Permanentf("es reader %s: resource document %q: %s", r.URL(), h.ID, fmt.Sprintf(format, a...))
	}
	if err := json.Unmarshal(h.Source, &d); err != nil {
		return bad("malformed: %v", err)
	}
	if d.DocID == "" || d.Rev == "" || d.Timestamp == "" {
		return StoredResource{}, errclass.Permanentf("es reader %s: resource document %q has no doc_id, rev or timestamp: %w", r.URL(), h.ID, ErrNotSink)
	}
	res := StoredResource{URI: d.URI, DocID: d.DocID, ResourceSet: d.ResourceSet, Length: d.Length, Type: d.Mime, Rev: d.Rev}
	var err error
	if d.URIB64 != "" {
		b, err := base64.StdEncoding.DecodeString(d.URIB64)
		if err != nil {
			return bad("malformed uri_b64: %v", err)
		}
		res.URI = string(b)
	}
	if res.URI == "" {
		return bad("no uri")
	}
	for _, f := range []struct {
		name, hex string
		dst       *[]byte
	}{{"md5", d.MD5, &res.Hashes.MD5}, {"sha1", d.SHA1, &res.Hashes.SHA1}, {"sha256", d.SHA256, &res.Hashes.SHA256}} {
		if f.hex == "" {
			continue
		}
		if *f.dst, err = hex.DecodeString(f.hex); err != nil {
			return bad("malformed %s %q", f.name, clip(f.hex))
		}
	}
	if res.Lastmod, err = parseTime(d.Lastmod); err != nil {
		return bad("lastmod: %v", err)
	}
	if res.Timestamp, err = parseTime(d.Timestamp); err != nil {
		return bad("timestamp: %v", err)
	}
	for _, l := range d.Ln {
		res.Links = append(res.Links, sink.Link{Rel: l.Rel, Href: l.Href.Value, Type: l.Mime})
	}
	return res, nil
}

// parseTime reads a datetime the sink wrote, or "" as the zero time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 datetime: %q", clip(s))
	}
	return t.UTC(), nil
}

// WalkResources calls fn with every resource document, in the order of
// their _id (the URI itself, but for URIs that are not valid UTF-8 or
// longer than 512 bytes: see the package documentation), which is the
// same order at every call while the index does not change. It expects
// expect documents (see Count): meeting more or fewer is a retryable
// error wrapping ErrChanged. On ZincSearch, which pages with from and
// size, a write during the walk may also show a document twice or hide
// one without changing the number met: see Stats.
func (r *Reader) WalkResources(ctx context.Context, expect int64, fn func(StoredResource) error) error {
	return r.walk(ctx, r.s.opts.Index, []any{map[string]any{"doc_id": "asc"}}, resourceFields, expect, func(hits []searchHit) error {
		for i := range hits {
			res, err := r.decodeResource(&hits[i])
			if err != nil {
				return err
			}
			if err := fn(res); err != nil {
				return err
			}
		}
		return nil
	})
}

// ResourcesByURI returns the resource documents of uris that the index
// holds, by URI: the current state of those resources.
func (r *Reader) ResourcesByURI(ctx context.Context, uris []string) (map[string]StoredResource, error) {
	ids := make([]string, 0, len(uris))
	seen := make(map[string]bool, len(uris))
	for _, u := range uris {
		if id := docID(u); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	out := make(map[string]StoredResource, len(ids))
	for chunk := range slices.Chunk(ids, r.page) {
		hits, _, err := r.query(ctx, r.s.opts.Index, map[string]any{
			"query":   map[string]any{"terms": map[string]any{"doc_id": chunk}},
			"size":    len(chunk),
			"_source": resourceFields,
		})
		if err != nil {
			return nil, fmt.Errorf("es reader: looking resources up in %s: %w", r.s.opts.Index, err)
		}
		for i := range hits {
			res, err := r.decodeResource(&hits[i])
			if err != nil {
				return nil, err
			}
			out[res.URI] = res
		}
	}
	return out, nil
}

// StoredChange is a change document, as Put and Delete wrote it.
type StoredChange struct {
	// URI is the changed resource's URI, exactly as given to Put or Delete.
	URI string
	// ResourceSet is the document's resource_set, or "".
	ResourceSet string
	// Change is "updated" (every Put) or "deleted" (every Delete).
	Change string
	// Datetime is when the sink saw the change; Lastmod the resource's
	// lastmod (Put only), or zero.
	Datetime, Lastmod time.Time
	// Rev is the token of the write: the document's _id, and the rev of
	// the resource document Put wrote.
	Rev string
}

// changeFields are the fields of a change document a Reader reads.
var changeFields = []string{"uri", "uri_b64", "resource_set", "change", "datetime", "lastmod", "rev"}

// decodeChange decodes a change document.
func (r *Reader) decodeChange(h *searchHit) (StoredChange, error) {
	var d changeDoc
	bad := func(format string, a ...any) (StoredChange, error) {
		return StoredChange{}, errclass.Permanentf("es reader %s: change document %q: %s", r.ChangesURL(), h.ID, fmt.Sprintf(format, a...))
	}
	if err := json.Unmarshal(h.Source, &d); err != nil {
		return bad("malformed: %v", err)
	}
	if d.Change == "" || d.Datetime == "" || d.Rev == "" {
		return StoredChange{}, errclass.Permanentf("es reader %s: change document %q has no change, datetime or rev: %w", r.ChangesURL(), h.ID, ErrNotSink)
	}
	c := StoredChange{URI: d.URI, ResourceSet: d.ResourceSet, Change: d.Change, Rev: d.Rev}
	var err error
	if d.URIB64 != "" {
		b, err := base64.StdEncoding.DecodeString(d.URIB64)
		if err != nil {
			return bad("malformed uri_b64: %v", err)
		}
		c.URI = string(b)
	}
	if c.URI == "" {
		return bad("no uri")
	}
	if c.Datetime, err = parseTime(d.Datetime); err != nil {
		return bad("datetime: %v", err)
	}
	if c.Lastmod, err = parseTime(d.Lastmod); err != nil {
		return bad("lastmod: %v", err)
	}
	return c, nil
}

// changeSort is the order the change index is read in; the changes of one
// datetime are then put in the order they were written (compareRevs).
var changeSort = []any{map[string]any{"datetime": "asc"}, map[string]any{"rev": "asc"}}

// compareRevs orders the revs of one sink in the order it made them: a rev
// is the sink's instance token, "-" and a sequence number, which sorts
// wrongly as text ("x-10" before "x-9").
func compareRevs(a, b string) int {
	ai, as, aok := strings.Cut(a, "-")
	bi, bs, bok := strings.Cut(b, "-")
	if aok && bok && ai == bi {
		an, aerr := strconv.ParseUint(as, 10, 64)
		bn, berr := strconv.ParseUint(bs, 10, 64)
		if aerr == nil && berr == nil {
			return cmp.Compare(an, bn)
		}
	}
	return strings.Compare(a, b)
}

// WalkChanges calls fn with every change document, a batch at a time, in
// the order they were recorded: by datetime, and the changes of one
// datetime in the order their sink made them (by the sequence number of
// their revs), the same order at every call while the index does not
// change. fn must not keep the batch. It expects expect documents (see
// Count), as WalkResources does.
func (r *Reader) WalkChanges(ctx context.Context, expect int64, fn func([]StoredChange) error) error {
	var group []StoredChange // the changes of the latest datetime met
	flush := func(out []StoredChange) []StoredChange {
		slices.SortStableFunc(group, func(a, b StoredChange) int { return compareRevs(a.Rev, b.Rev) })
		out = append(out, group...)
		group = group[:0]
		return out
	}
	err := r.walk(ctx, r.s.opts.ChangesIndex, changeSort, changeFields, expect, func(hits []searchHit) error {
		var out []StoredChange
		for i := range hits {
			c, err := r.decodeChange(&hits[i])
			if err != nil {
				return err
			}
			if len(group) > 0 && !c.Datetime.Equal(group[0].Datetime) {
				out = flush(out)
			}
			if len(group) == maxGroup {
				return errclass.Permanentf("es reader %s: more than %d changes at %s", r.ChangesURL(), maxGroup, c.Datetime.Format(time.RFC3339Nano))
			}
			group = append(group, c)
		}
		if len(out) == 0 {
			return nil
		}
		return fn(out)
	})
	if err != nil || len(group) == 0 {
		return err
	}
	return fn(flush(nil))
}

// Stats describe the two indexes at one time: two Stats that differ tell
// that the sink wrote in between (each Put and Delete adds a change
// document), and equal ones that it did not.
type Stats struct {
	// Resources and Changes count the documents of each index.
	Resources, Changes int64
	// Newest is the datetime of the newest change document (zero when
	// there is none) and NewestCount the number of change documents of
	// that datetime.
	Newest      time.Time
	NewestCount int64
	// ResourceSet is the resource_set every document of both indexes
	// carries (there is at least one), else "".
	ResourceSet string
}

// Equal reports whether s and o are the same.
func (s Stats) Equal(o Stats) bool {
	return s.Resources == o.Resources && s.Changes == o.Changes && s.Newest.Equal(o.Newest) &&
		s.NewestCount == o.NewestCount && s.ResourceSet == o.ResourceSet
}

// Stats counts the documents of both indexes, finds the newest change,
// and the resource set all documents share, in a few searches.
func (r *Reader) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	var err error
	if st.Resources, err = r.count(ctx, r.s.opts.Index, nil); err != nil {
		return Stats{}, err
	}
	if st.Changes, err = r.count(ctx, r.s.opts.ChangesIndex, nil); err != nil {
		return Stats{}, err
	}
	var set string // the resource set of one document
	if st.Changes > 0 {
		desc := []any{map[string]any{"datetime": "desc"}, map[string]any{"rev": "desc"}}
		hits, _, err := r.query(ctx, r.s.opts.ChangesIndex, map[string]any{
			"query": map[string]any{"match_all": map[string]any{}}, "sort": desc, "size": 1, "_source": changeFields,
		})
		if err != nil {
			return Stats{}, fmt.Errorf("es reader: newest change of %s: %w", r.s.opts.ChangesIndex, err)
		}
		if len(hits) == 0 {
			return Stats{}, errclass.Retryablef("es reader %s: counted %d changes, found none: %w", r.ChangesURL(), st.Changes, ErrChanged)
		}
		c, err := r.decodeChange(&hits[0])
		if err != nil {
			return Stats{}, err
		}
		var raw struct {
			Datetime string `json:"datetime"`
		}
		_ = json.Unmarshal(hits[0].Source, &raw) // decodeChange read it
		st.Newest, set = c.Datetime, c.ResourceSet
		// The datetime as written: a date field is matched by its value.
		if st.NewestCount, err = r.count(ctx, r.s.opts.ChangesIndex, map[string]any{
			"range": map[string]any{"datetime": map[string]any{"gte": raw.Datetime, "lte": raw.Datetime}},
		}); err != nil {
			return Stats{}, err
		}
		if st.NewestCount < 1 {
			return Stats{}, errclass.Permanentf("es reader %s: no change matches the newest datetime %s", r.ChangesURL(), raw.Datetime)
		}
	} else if st.Resources > 0 {
		hits, _, err := r.query(ctx, r.s.opts.Index, map[string]any{
			"query": map[string]any{"match_all": map[string]any{}}, "sort": []any{map[string]any{"doc_id": "asc"}}, "size": 1, "_source": resourceFields,
		})
		if err != nil {
			return Stats{}, fmt.Errorf("es reader: reading %s: %w", r.s.opts.Index, err)
		}
		if len(hits) > 0 {
			res, err := r.decodeResource(&hits[0])
			if err != nil {
				return Stats{}, err
			}
			set = res.ResourceSet
		}
	}
	if set != "" {
		term := map[string]any{"term": map[string]any{"resource_set": set}}
		nr, err := r.count(ctx, r.s.opts.Index, term)
		if err != nil {
			return Stats{}, err
		}
		nc, err := r.count(ctx, r.s.opts.ChangesIndex, term)
		if err != nil {
			return Stats{}, err
		}
		if nr == st.Resources && nc == st.Changes {
			st.ResourceSet = set
		}
	}
	return st, nil
}
