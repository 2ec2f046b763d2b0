package es

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"

	"github.com/rsharvest/rsharvest/errclass"
)

// walkPage is the number of hits Walk asks for at once.
const walkPage = 1000

// storedDoc is the part of a resource document that Get and Walk read.
type storedDoc struct {
	DocID  string  `json:"doc_id"`
	URI    string  `json:"uri"`
	URIB64 string  `json:"uri_b64"`
	Rev    string  `json:"rev"`
	Body   *string `json:"body"`
}

// uri returns the document's URI exactly as it was given to Put.
func (d *storedDoc) uri() (string, error) {
	if d.URIB64 == "" {
		return d.URI, nil
	}
	b, err := base64.StdEncoding.DecodeString(d.URIB64)
	if err != nil {
		return "", fmt.Errorf("es sink: malformed uri_b64 of document %q: %w", d.DocID, err)
	}
	return string(b), nil
}

// searchHit is one hit of a search response, with its sort values.
type searchHit struct {
	ID     string          `json:"_id"`
	Source json.RawMessage `json:"_source"`
	Sort   json.RawMessage `json:"sort"`
}

// requester sends one request with a JSON body (nil: none): the sink's
// once, the Reader's with retries.
type requester func(ctx context.Context, method, path string, body []byte) (*response, error)

// once sends one request.
func (s *ES) once(ctx context.Context, method, path string, body []byte) (*response, error) {
	contentType := ""
	if body != nil {
		contentType = "application/json"
	}
	return s.do(ctx, method, path, nil, contentType, body)
}

// search runs query against index and returns its hits.
func (s *ES) search(ctx context.Context, index string, query map[string]any) ([]searchHit, error) {
	hits, _, err := s.searchWith(ctx, s.once, "es sink", index, query)
	return hits, err
}

// searchWith runs query against index through do and returns its hits and
// their total (when the query asks for it). what names the caller in
// errors.
func (s *ES) searchWith(ctx context.Context, do requester, what, index string, query map[string]any) ([]searchHit, int64, error) {
	body, err := json.Marshal(query)
	if err != nil {
		return nil, 0, errclass.Permanentf("%s: encoding a query: %w", what, err)
	}
	resp, err := do(ctx, http.MethodPost, "/"+escapeSegment(index)+"/_search", body)
	if err != nil {
		return nil, 0, err
	}
	if resp.status != http.StatusOK {
		return nil, 0, s.statusError("search of "+index, resp)
	}
	var sr struct {
		Hits struct {
			Total struct {
				Value int64 `json:"value"`
			} `json:"total"`
			Hits []searchHit `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(resp.body, &sr); err != nil {
		return nil, 0, errclass.Retryablef("%s %s: search of %s: malformed response: %w", what, s.base, index, err)
	}
	return sr.Hits.Hits, sr.Hits.Total.Value, nil
}

// readable returns the error Get and Walk return before doing anything.
func (s *ES) readable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errclass.Fatalf("es sink: used after Close")
	case s.fatal != nil:
		return s.fatal
	}
	return nil
}

// Get returns the body stored for uri. It first sends what is queued, so
// it sees every earlier Put and Delete that did not fail. When the index
// holds no document for uri, the error wraps fs.ErrNotExist; when it holds
// one without a body (Options.StoreBody off), errors.ErrUnsupported.
func (s *ES) Get(ctx context.Context, uri string) (io.ReadCloser, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	if err := s.flushWithin(ctx); err != nil {
		return nil, fmt.Errorf("es sink: get %s: %w", short(uri), err)
	}
	doc, found, err := s.getDoc(ctx, docID(uri))
	if err != nil {
		return nil, fmt.Errorf("es sink: get %s: %w", short(uri), err)
	}
	if found {
		held, err := doc.uri()
		if err != nil {
			return nil, err
		}
		found = held == uri // else another URI with the same SHA-256
	}
	if !found {
		return nil, fmt.Errorf("es sink: get %s: %w", short(uri), fs.ErrNotExist)
	}
	if doc.Body == nil {
		return nil, fmt.Errorf("es sink: get %s: the body is not stored (Options.StoreBody is off): %w", short(uri), errors.ErrUnsupported)
	}
	b, err := base64.StdEncoding.DecodeString(*doc.Body)
	if err != nil {
		return nil, errclass.Permanentf("es sink: get %s: malformed body: %w", short(uri), err)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// getDoc reads the resource document id: with GET _doc from Elasticsearch
// (real time, needs no refresh), with a search by _id from ZincSearch, which
// has no GET _doc under /es/.
func (s *ES) getDoc(ctx context.Context, id string) (*storedDoc, bool, error) {
	fields := []string{"doc_id", "uri", "uri_b64", "body"}
	var source json.RawMessage
	if s.flavor == FlavorZinc {
		hits, err := s.search(ctx, s.opts.Index, map[string]any{
			"query":   map[string]any{"ids": map[string]any{"values": []string{id}}},
			"size":    1,
			"_source": fields,
		})
		if err != nil || len(hits) == 0 {
			return nil, false, err
		}
		source = hits[0].Source
	} else {
		path := "/" + escapeSegment(s.opts.Index) + "/_doc/" + escapeSegment(id)
		query := url.Values{"_source_includes": {"doc_id,uri,uri_b64,body"}}
		resp, err := s.do(ctx, http.MethodGet, path, query, "", nil)
		if err != nil {
			return nil, false, err
		}
		if resp.status == http.StatusNotFound {
			return nil, false, nil
		}
		if resp.status != http.StatusOK {
			return nil, false, s.statusError("get", resp)
		}
		var got struct {
			Found  bool            `json:"found"`
			Source json.RawMessage `json:"_source"`
		}
		if err := json.Unmarshal(resp.body, &got); err != nil {
			return nil, false, errclass.Retryablef("es sink %s: get: malformed response: %w", s.base, err)
		}
		if !got.Found {
			return nil, false, nil
		}
		source = got.Source
	}
	var doc storedDoc
	if err := json.Unmarshal(source, &doc); err != nil {
		return nil, false, errclass.Permanentf("es sink %s: malformed document %q: %w", s.base, id, err)
	}
	return &doc, true, nil
}

// Walk calls fn with the URI of every resource document, in the order of
// their _id. It first sends what is queued (and, on Elasticsearch, refreshes
// the index) so that it sees every earlier Put and Delete that did not fail.
// Elasticsearch is paged with search_after; ZincSearch, which lacks it, with
// from and size, so that concurrent deletes may hide documents from a walk.
func (s *ES) Walk(ctx context.Context, fn func(uri string) error) error {
	if err := s.readable(); err != nil {
		return err
	}
	if err := s.flushWithin(ctx); err != nil {
		return err
	}
	zinc := s.flavor == FlavorZinc
	if !zinc {
		resp, err := s.do(ctx, http.MethodPost, "/"+escapeSegment(s.opts.Index)+"/_refresh", nil, "", nil)
		if err != nil {
			return err
		}
		if resp.status != http.StatusOK {
			return s.statusError("refresh", resp)
		}
	}
	var (
		after   string
		started bool
		from    int
	)
	for {
		query := map[string]any{
			"query":   map[string]any{"match_all": map[string]any{}},
			"sort":    []any{map[string]any{"doc_id": "asc"}},
			"size":    walkPage,
			"_source": []string{"doc_id", "uri", "uri_b64"},
		}
		if zinc {
			query["from"] = from
		} else {
			query["track_total_hits"] = false
			if started {
				query["search_after"] = []string{after}
			}
		}
		hits, err := s.search(ctx, s.opts.Index, query)
		if err != nil {
			return fmt.Errorf("es sink: walk: %w", err)
		}
		for _, h := range hits {
			var doc storedDoc
			if err := json.Unmarshal(h.Source, &doc); err != nil {
				return errclass.Permanentf("es sink %s: walk: malformed document %q: %w", s.base, h.ID, err)
			}
			if !zinc && started && doc.DocID <= after {
				return errclass.Permanentf("es sink %s: walk: the server ignores search_after (%q after %q)", s.base, doc.DocID, after)
			}
			uri, err := doc.uri()
			if err != nil {
				return err
			}
			if err := fn(uri); err != nil {
				return err
			}
			after, started = doc.DocID, true
		}
		if len(hits) < walkPage {
			return nil
		}
		from += len(hits)
	}
}

// flushWithin sends what is queued, as a read must see it, and waits for
// that no longer than ctx allows: the batch holds other callers' actions,
// so its sending goes on (its failures recorded) once ctx has ended.
func (s *ES) flushWithin(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.flush(context.WithoutCancel(ctx), false)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errclass.Retryablef("waiting for the queued writes: %w", ctx.Err())
	}
}
