// Package estest is an in-memory fake of the part of the Elasticsearch REST
// API that the es sink uses — the root document, index creation, _bulk, GET
// _doc, _search (match_all and ids queries, sort on one keyword field,
// search_after, from/size, _source filtering) and _refresh — with fault
// injection for tests: whole bulk requests answered with an error status,
// single items rejected, a request size limit, and basic authentication.
//
// Like Elasticsearch, it makes documents visible to searches only at a
// refresh, while GET _doc sees them at once; it refuses an _id over 512
// bytes for the whole request, and sorting on _id.
package estest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Bulk describes one bulk request the server received.
type Bulk struct {
	// Actions is the number of actions in the request, Bytes its size and
	// Status the status it was answered with.
	Actions int
	Bytes   int
	Status  int
}

// Item is one action of a bulk request, as shown to an item fault.
type Item struct {
	Op     string // "index", "create" or "delete"
	Index  string
	ID     string
	Source json.RawMessage // nil for a delete
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	srv *httptest.Server

	mu         sync.Mutex
	indices    map[string]*index
	user, pass string
	bulkFaults []int
	itemFault  func(Item) int
	maxRequest int
	bulks      []Bulk
}

// index holds one index's documents: docs is the live state GET _doc reads,
// visible the state searches see, copied from docs at each refresh.
type index struct {
	mapping json.RawMessage
	docs    map[string]*doc
	visible map[string]*doc
	order   []string // ids in the order they were first written
}

// doc is a stored document: its source, and its top-level fields.
type doc struct {
	src    json.RawMessage
	fields map[string]json.RawMessage
}

// field returns a top-level string field, or "".
func (d *doc) field(name string) string {
	var v string
	_ = json.Unmarshal(d.fields[name], &v)
	return v
}

// filter returns the source with only the listed top-level fields (all of
// them when fields is empty).
func (d *doc) filter(fields []string) json.RawMessage {
	if len(fields) == 0 {
		return d.src
	}
	kept := maps.Clone(d.fields)
	maps.DeleteFunc(kept, func(k string, _ json.RawMessage) bool { return !slices.Contains(fields, k) })
	out, _ := json.Marshal(kept)
	return out
}

// New starts a fake on a loopback port and stops it when tb's test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{indices: map[string]*index{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	tb.Cleanup(s.srv.Close)
	return s
}

// SetAuth makes the server require these basic-authentication credentials.
func (s *Server) SetAuth(user, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user, s.pass = user, password
}

// FailBulk answers the next len(statuses) bulk requests with these statuses
// (and an Elasticsearch error body) instead of handling them; 0 lets one
// through.
func (s *Server) FailBulk(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bulkFaults = append(s.bulkFaults, statuses...)
}

// SetItemFault installs fn, called for every action of every bulk request
// handled: a non-zero status fails that item alone with that status.
func (s *Server) SetItemFault(fn func(Item) int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.itemFault = fn
}

// SetMaxRequestBytes makes bulk requests larger than n fail with 413, as
// Elasticsearch's http.max_content_length does; 0 lifts the limit.
func (s *Server) SetMaxRequestBytes(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxRequest = n
}

// Bulks returns the bulk requests received so far.
func (s *Server) Bulks() []Bulk {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bulks)
}

// Doc returns the live source of a document.
func (s *Server) Doc(indexName, id string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ix, ok := s.indices[indexName]
	if !ok {
		return nil, false
	}
	d, ok := ix.docs[id]
	if !ok {
		return nil, false
	}
	return d.src, true
}

// Docs returns the live sources of an index's documents in the order they
// were first written.
func (s *Server) Docs(indexName string) []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	ix, ok := s.indices[indexName]
	if !ok {
		return nil
	}
	var out []json.RawMessage
	for _, id := range ix.order {
		if d, ok := ix.docs[id]; ok {
			out = append(out, d.src)
		}
	}
	return out
}

// Mapping returns the mapping an index was created with, or nil.
func (s *Server) Mapping(indexName string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ix, ok := s.indices[indexName]; ok {
		return ix.mapping
	}
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.user != "" {
		u, p, ok := r.BasicAuth()
		if !ok || u != s.user || p != s.pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="security"`)
			writeError(w, http.StatusUnauthorized, "security_exception", "unable to authenticate user")
			return
		}
	}
	var segs []string
	for _, seg := range strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/") {
		if seg == "" {
			continue
		}
		dec, err := url.PathUnescape(seg)
		if err != nil {
			writeError(w, http.StatusBadRequest, "illegal_argument_exception", "bad escape in path")
			return
		}
		segs = append(segs, dec)
	}
	m := r.Method
	switch {
	case len(segs) == 0 && (m == http.MethodGet || m == http.MethodHead):
		writeJSON(w, http.StatusOK, map[string]any{
			"name": "estest", "cluster_name": "estest",
			"version": map[string]any{"number": "8.13.0"}, "tagline": "You Know, for Search",
		})
	case (len(segs) == 1 && segs[0] == "_bulk" || len(segs) == 2 && segs[1] == "_bulk") && (m == http.MethodPost || m == http.MethodPut):
		s.bulk(w, r, segs[0])
	case len(segs) == 1 && m == http.MethodHead:
		if _, ok := s.indices[segs[0]]; ok {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusNotFound)
		}
	case len(segs) == 1 && m == http.MethodPut:
		s.createIndex(w, r, segs[0])
	case len(segs) == 3 && segs[1] == "_doc" && m == http.MethodGet:
		s.get(w, r, segs[0], segs[2])
	case len(segs) == 2 && segs[1] == "_search" && (m == http.MethodPost || m == http.MethodGet):
		s.search(w, r, segs[0])
	case len(segs) == 2 && segs[1] == "_refresh" && m == http.MethodPost:
		ix, ok := s.indices[segs[0]]
		if !ok {
			writeError(w, http.StatusNotFound, "index_not_found_exception", "no such index ["+segs[0]+"]")
			return
		}
		ix.visible = maps.Clone(ix.docs)
		writeJSON(w, http.StatusOK, map[string]any{"_shards": map[string]int{"total": 1, "successful": 1, "failed": 0}})
	default:
		writeError(w, http.StatusMethodNotAllowed, "illegal_argument_exception", "unsupported: "+m+" "+r.URL.EscapedPath())
	}
}

func (s *Server) createIndex(w http.ResponseWriter, r *http.Request, name string) {
	if _, ok := s.indices[name]; ok {
		writeError(w, http.StatusBadRequest, "resource_already_exists_exception", "index ["+name+"] already exists")
		return
	}
	var req struct {
		Mappings json.RawMessage `json:"mappings"`
	}
	if body, _ := io.ReadAll(r.Body); len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "parse_exception", err.Error())
			return
		}
	}
	s.indices[name] = newIndex(req.Mappings)
	writeJSON(w, http.StatusOK, map[string]any{"acknowledged": true, "shards_acknowledged": true, "index": name})
}

func newIndex(mapping json.RawMessage) *index {
	return &index{mapping: mapping, docs: map[string]*doc{}, visible: map[string]*doc{}}
}

// bulkAction is one parsed action of a bulk request.
type bulkAction struct {
	Item
	fields    map[string]json.RawMessage // the source's top-level fields
	badSource string                     // why the source line is unusable, or ""
}

// bulk handles a bulk request; defaultIndex is the index in its path, or
// "_bulk" when there is none (and then every action must name its index).
func (s *Server) bulk(w http.ResponseWriter, r *http.Request, defaultIndex string) {
	if defaultIndex == "_bulk" {
		defaultIndex = ""
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "parse_exception", err.Error())
		return
	}
	record := func(actions, status int) {
		s.bulks = append(s.bulks, Bulk{Actions: actions, Bytes: len(body), Status: status})
	}
	if len(s.bulkFaults) > 0 {
		status := s.bulkFaults[0]
		s.bulkFaults = s.bulkFaults[1:]
		if status != 0 {
			record(0, status)
			writeError(w, status, faultType(status), "injected fault")
			return
		}
	}
	if s.maxRequest > 0 && len(body) > s.maxRequest {
		record(0, http.StatusRequestEntityTooLarge)
		writeError(w, http.StatusRequestEntityTooLarge, "content_too_long_exception", "request body is too large")
		return
	}
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/x-ndjson") && !strings.HasPrefix(ct, "application/json") {
		record(0, http.StatusNotAcceptable)
		writeError(w, http.StatusNotAcceptable, "media_type_header_exception", "Content-Type header ["+ct+"] is not supported")
		return
	}
	actions, err := parseBulk(body, defaultIndex)
	if err != nil {
		record(0, http.StatusBadRequest)
		writeError(w, http.StatusBadRequest, "action_request_validation_exception", err.Error())
		return
	}
	items := make([]map[string]any, len(actions))
	errorsSeen := false
	for i, a := range actions {
		item := map[string]any{"_index": a.Index, "_id": a.ID}
		items[i] = map[string]any{a.Op: item}
		status := 0
		if s.itemFault != nil {
			status = s.itemFault(a.Item)
		}
		switch {
		case status != 0:
			item["error"] = map[string]any{"type": faultType(status), "reason": "injected fault"}
		case a.badSource != "":
			status = http.StatusBadRequest
			item["error"] = map[string]any{"type": "document_parsing_exception", "reason": a.badSource}
		case a.Op == "delete":
			ix := s.indices[a.Index]
			if _, ok := ix.docs[a.ID]; ix != nil && ok {
				delete(ix.docs, a.ID)
				status, item["result"] = http.StatusOK, "deleted"
			} else {
				status, item["result"] = http.StatusNotFound, "not_found"
			}
		default:
			ix, ok := s.indices[a.Index]
			if !ok {
				ix = newIndex(nil)
				s.indices[a.Index] = ix
			}
			if _, ok := ix.docs[a.ID]; ok {
				if a.Op == "create" {
					status = http.StatusConflict
					item["error"] = map[string]any{"type": "version_conflict_engine_exception", "reason": "document already exists"}
					break
				}
				status, item["result"] = http.StatusOK, "updated"
			} else {
				status, item["result"] = http.StatusCreated, "created"
				if !slices.Contains(ix.order, a.ID) {
					ix.order = append(ix.order, a.ID)
				}
			}
			ix.docs[a.ID] = &doc{src: slices.Clone(a.Source), fields: a.fields}
		}
		item["status"] = status
		if _, failed := item["error"]; failed {
			errorsSeen = true
		}
	}
	record(len(actions), http.StatusOK)
	writeJSON(w, http.StatusOK, map[string]any{"took": 1, "errors": errorsSeen, "items": items})
}

// parseBulk parses an NDJSON bulk body. As Elasticsearch does, it refuses
// the whole request for a malformed action line or an _id over 512 bytes,
// and fails only its item for a malformed source line.
func parseBulk(body []byte, defaultIndex string) ([]bulkAction, error) {
	var out []bulkAction
	rd := bufio.NewReader(bytes.NewReader(body))
	next := func() ([]byte, bool) {
		for {
			line, err := rd.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				return bytes.TrimRight(line, "\r\n"), true
			}
			if err != nil {
				return nil, false
			}
		}
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		var meta map[string]struct {
			Index string `json:"_index"`
			ID    string `json:"_id"`
		}
		if err := json.Unmarshal(line, &meta); err != nil || len(meta) != 1 {
			return nil, fmt.Errorf("malformed action/metadata line [%d]", len(out)+1)
		}
		for op, m := range meta {
			a := bulkAction{Item: Item{Op: op, Index: m.Index, ID: m.ID}}
			if a.Index == "" {
				a.Index = defaultIndex
			}
			switch {
			case op != "index" && op != "create" && op != "delete":
				return nil, fmt.Errorf("unsupported action [%s]", op)
			case a.Index == "":
				return nil, fmt.Errorf("index is missing")
			case len(a.ID) > 512:
				return nil, fmt.Errorf("id is too long, must be no longer than 512 bytes but was: %d", len(a.ID))
			case op == "delete" && a.ID == "":
				return nil, fmt.Errorf("id is missing")
			}
			if op != "delete" {
				src, ok := next()
				if !ok {
					return nil, fmt.Errorf("the bulk request must be terminated by a newline")
				}
				if err := json.Unmarshal(src, &a.fields); err != nil {
					a.badSource = "failed to parse: " + err.Error()
				}
				a.Source = src
			}
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, indexName, id string) {
	ix, ok := s.indices[indexName]
	if !ok {
		writeError(w, http.StatusNotFound, "index_not_found_exception", "no such index ["+indexName+"]")
		return
	}
	d, ok := ix.docs[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"_index": indexName, "_id": id, "found": false})
		return
	}
	var fields []string
	if inc := r.URL.Query().Get("_source_includes"); inc != "" {
		fields = strings.Split(inc, ",")
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"_index": indexName, "_id": id, "found": true, "_source": d.filter(fields),
	})
}

func (s *Server) search(w http.ResponseWriter, r *http.Request, indexName string) {
	ix, ok := s.indices[indexName]
	if !ok {
		writeError(w, http.StatusNotFound, "index_not_found_exception", "no such index ["+indexName+"]")
		return
	}
	var req struct {
		Query       map[string]json.RawMessage `json:"query"`
		Sort        []map[string]any           `json:"sort"`
		SearchAfter []string                   `json:"search_after"`
		From        int                        `json:"from"`
		Size        *int                       `json:"size"`
		Source      []string                   `json:"_source"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && err != io.EOF {
		writeError(w, http.StatusBadRequest, "parsing_exception", err.Error())
		return
	}
	ids := slices.Sorted(maps.Keys(ix.visible))
	for kind, q := range req.Query {
		switch kind {
		case "match_all":
		case "ids":
			var v struct {
				Values []string `json:"values"`
			}
			if err := json.Unmarshal(q, &v); err != nil {
				writeError(w, http.StatusBadRequest, "parsing_exception", "[ids] "+err.Error())
				return
			}
			ids = slices.DeleteFunc(ids, func(id string) bool { return !slices.Contains(v.Values, id) })
		default:
			writeError(w, http.StatusBadRequest, "parsing_exception", "unknown query ["+kind+"]")
			return
		}
	}
	sortField, desc := "", false
	if len(req.Sort) > 1 || len(req.Sort) == 1 && len(req.Sort[0]) != 1 {
		writeError(w, http.StatusBadRequest, "parsing_exception", "the fake sorts on one field only")
		return
	}
	for _, spec := range req.Sort {
		for field, order := range spec {
			if field == "_id" {
				writeError(w, http.StatusBadRequest, "illegal_argument_exception", "Fielddata access on the _id field is disallowed")
				return
			}
			sortField, desc = field, order == "desc"
		}
	}
	key := func(id string) string { return ix.visible[id].field(sortField) }
	if sortField != "" {
		slices.SortStableFunc(ids, func(a, b string) int {
			if desc {
				return strings.Compare(key(b), key(a))
			}
			return strings.Compare(key(a), key(b))
		})
	}
	if len(req.SearchAfter) > 0 {
		if sortField == "" {
			writeError(w, http.StatusBadRequest, "illegal_argument_exception", "search_after needs a sort")
			return
		}
		after := req.SearchAfter[0]
		ids = slices.DeleteFunc(ids, func(id string) bool {
			c := strings.Compare(key(id), after)
			return desc && c >= 0 || !desc && c <= 0
		})
	}
	size := 10
	if req.Size != nil {
		size = *req.Size
	}
	ids = ids[min(req.From, len(ids)):]
	ids = ids[:min(size, len(ids))]
	hits := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		hit := map[string]any{"_index": indexName, "_id": id, "_score": nil, "_source": ix.visible[id].filter(req.Source)}
		if sortField != "" {
			hit["sort"] = []string{key(id)}
		}
		hits = append(hits, hit)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"took": 1, "timed_out": false,
		"hits": map[string]any{"total": map[string]any{"value": len(hits), "relation": "gte"}, "hits": hits},
	})
}

func faultType(status int) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "security_exception"
	case status == http.StatusTooManyRequests:
		return "es_rejected_execution_exception"
	case status >= 500:
		return "unavailable_shards_exception"
	default:
		return "mapper_parsing_exception"
	}
}

func writeError(w http.ResponseWriter, status int, typ, reason string) {
	e := map[string]any{"type": typ, "reason": reason}
	writeJSON(w, status, map[string]any{"error": map[string]any{"root_cause": []any{e}, "type": typ, "reason": reason}, "status": status})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Elastic-Product", "Elasticsearch")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
