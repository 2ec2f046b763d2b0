package solr

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/rsharvest/rsharvest/errclass"
)

const (
	formType = "application/x-www-form-urlencoded"
	// walkRows is the page size of Walk.
	walkRows = 500
	// walkLimit bounds one page of Walk: walkRows ids of up to
	// maxTermBytes, escaped.
	walkLimit = 64 << 20
)

// selectDocs posts a query to /select (as a form, so that long ids fit)
// and decodes the answer's response and nextCursorMark.
func (s *Solr) selectDocs(ctx context.Context, params url.Values, limit int64) (docs []map[string]json.RawMessage, next string, err error) {
	params.Set("wt", "json")
	data, err := s.do(ctx, request{
		method: http.MethodPost, handler: "select",
		contentType: formType, body: []byte(params.Encode()), limit: limit,
	})
	if err != nil {
		return nil, "", err
	}
	var answer struct {
		Response struct {
			Docs []map[string]json.RawMessage `json:"docs"`
		} `json:"response"`
		NextCursorMark string `json:"nextCursorMark"`
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, "", errclass.Fatalf("solr %s: select: %w", s.name, err)
	}
	return answer.Response.Docs, answer.NextCursorMark, nil
}

// Get returns the stored body of uri. It first sends the queue and commits
// (see the package documentation). When uri is not indexed the error wraps
// fs.ErrNotExist; when it is indexed without its body (Options.StoreBody
// off), errors.ErrUnsupported.
func (s *Solr) Get(ctx context.Context, uri string) (io.ReadCloser, error) {
	if err := s.sync(ctx); err != nil {
		return nil, fmt.Errorf("solr: get %s: %w", short(uri), err)
	}
	params := url.Values{
		"q":      {"{!term f=id v=$rsh_id}"},
		"rsh_id": {docID(uri)},
		"fl":     {"id,length,body"},
		"rows":   {"1"},
	}
	limit := base64.StdEncoding.EncodedLen(int(s.opts.BodyMaxBytes)) + 2*maxTermBytes + defaultResponseLimit
	docs, _, err := s.selectDocs(ctx, params, int64(limit))
	if err != nil {
		return nil, fmt.Errorf("solr: get %s: %w", short(uri), err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("solr: get %s: %w", short(uri), iofs.ErrNotExist)
	}
	var length int64
	if err := json.Unmarshal(docs[0]["length"], &length); err != nil {
		return nil, errclass.Permanentf("solr: get %s: the document has no length: %w", short(uri), err)
	}
	raw, stored := docs[0]["body"]
	switch {
	case !stored && length == 0:
		return io.NopCloser(strings.NewReader("")), nil
	case !stored:
		return nil, fmt.Errorf("solr: get %s: the body was not stored (Options.StoreBody): %w", short(uri), errors.ErrUnsupported)
	}
	var body []byte // encoding/json decodes base64 into a []byte
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, errclass.Permanentf("solr: get %s: the stored body: %w", short(uri), err)
	}
	if int64(len(body)) != length {
		return nil, errclass.Permanentf("solr: get %s: the stored body has %d bytes, the length field says %d", short(uri), len(body), length)
	}
	return io.NopCloser(bytes.NewReader(body)), nil
}

// Walk calls fn with the URI of every document of the core, in the order
// of their ids. It first sends the queue and commits (see the package
// documentation), then pages through the ids with a cursor. Ids that this
// sink cannot have written are logged and skipped. An error from fn stops
// the walk and is returned as it is.
func (s *Solr) Walk(ctx context.Context, fn func(uri string) error) error {
	if err := s.sync(ctx); err != nil {
		return fmt.Errorf("solr: walk: %w", err)
	}
	cursor := "*"
	for {
		params := url.Values{
			"q":          {"*:*"},
			"fl":         {"id"},
			"sort":       {"id asc"},
			"rows":       {fmt.Sprint(walkRows)},
			"cursorMark": {cursor},
		}
		docs, next, err := s.selectDocs(ctx, params, walkLimit)
		if err != nil {
			return fmt.Errorf("solr: walk: %w", err)
		}
		for _, d := range docs {
			var id string
			if err := json.Unmarshal(d["id"], &id); err != nil {
				s.log.Warn("skipping a document without a string id", "err", err)
				continue
			}
			uri, err := uriOf(id)
			if err != nil {
				s.log.Warn("skipping a document the sink did not write", "err", err)
				continue
			}
			if err := fn(uri); err != nil {
				return err
			}
		}
		if next == "" || next == cursor {
			return nil
		}
		cursor = next
	}
}
