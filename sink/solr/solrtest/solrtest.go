// Package solrtest is an in-memory fake of one Solr core, served over HTTP
// on 127.0.0.1 by httptest, for tests of the Solr sink and of pipelines
// that use it.
//
// The fake checks each request the way Solr documents it and answers the
// way Solr answers:
//
//   - /solr/CORE/update takes POST with Content-Type application/json (or
//     text/json) and a body that is a JSON array of documents or an object
//     of commands ("add", "delete", "commit", "optimize"; keys may repeat
//     and run in order). Parameters commit, softCommit, commitWithin, wt
//     (json only), overwrite, waitSearcher and openSearcher are checked;
//     any other parameter is a 400 (where Solr would ignore it silently,
//     the fake points out the typo).
//   - Documents are checked against a Schema: unknown fields, several
//     values in a single-valued field, bad numbers, dates and base64, and
//     terms over 32766 bytes are 400s with Solr's messages. As in Solr, the
//     commands of a request before the bad one still take effect.
//   - /solr/CORE/select (GET, or POST of a form) answers q=*:* and
//     q={!term f=FIELD v=$PARAM} (or {!term f=FIELD}VALUE), with fq, fl,
//     sort on single-valued fields, rows, start and cursorMark paging.
//   - /solr/CORE/admin/ping answers {"status":"OK"}.
//   - Any other path is a 404 like Jetty's, and errors have Solr's body:
//     {"responseHeader":{"status":400,…},"error":{"msg":…,"code":400}}.
//
// Visibility follows Solr: an update changes the index at once, but
// /select sees the change only after a commit (commit=true, softCommit=true
// or a "commit" command) or once its commitWithin has elapsed on the
// fake's clock, which moves only when Advance is called. Automatic commits
// of solrconfig.xml are not simulated (the default configset's autoCommit
// does not open a searcher).
//
// Tests can inject failures (Fail), slowness (SetDelay), a 400 for one
// document id (Reject) and an authentication requirement (RequireHeader),
// and can inspect every request (Requests, Count) and the index (Live,
// Visible, VisibleIDs, Commits).
package solrtest

import (
	"bytes"
	"encoding/json"
	"errors"
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
	"time"
)

// Handler names, as given to Fail and Count and found in Request.Handler.
const (
	Update = "update"
	Select = "select"
	Ping   = "admin/ping"
)

// Options configure a Server. The zero value is ready to use.
type Options struct {
	// Core is the core's name; default "rsharvest".
	Core string
	// Schema is the core's schema; nil means DefaultSchema().
	Schema Schema
}

// Request records one request the fake answered.
type Request struct {
	Method string
	// Handler is Update, Select, Ping, or "" for a path the fake does not
	// serve.
	Handler string
	Path    string
	Query   url.Values // URL query parameters (a POSTed form is not included)
	Header  http.Header
	Status  int
	// Adds and Deletes count the add and delete-by-id commands of an
	// update request that took effect.
	Adds, Deletes int
	// Commit reports an update request that committed (commit=true,
	// softCommit=true or a "commit" command).
	Commit bool
}

// Server is a fake Solr core. Its methods are safe for concurrent use.
type Server struct {
	srv    *httptest.Server
	core   string
	schema Schema

	mu       sync.Mutex
	now      time.Time
	live     map[string]Doc // the index as updated
	visible  map[string]Doc // what /select sees
	deadline time.Time      // a pending commitWithin; zero when none
	commits  int
	log      []Request
	fail     map[string][]int
	delay    time.Duration
	reject   map[string]string
	authKey  string
	authVal  string
}

// New starts a fake core on 127.0.0.1 and registers its shutdown with
// tb.Cleanup.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.Core == "" {
		opts.Core = "rsharvest"
	}
	if opts.Schema == nil {
		opts.Schema = DefaultSchema()
	}
	s := &Server{
		core:    opts.Core,
		schema:  opts.Schema,
		now:     time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		live:    map[string]Doc{},
		visible: map[string]Doc{},
		fail:    map[string][]int{},
		reject:  map[string]string{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.srv.Close)
	return s
}

// URL returns the core's URL, "http://127.0.0.1:PORT/solr/CORE".
func (s *Server) URL() string { return s.srv.URL + "/solr/" + s.core }

// Close shuts the server down; later requests fail to connect.
func (s *Server) Close() { s.srv.Close() }

// Now returns the fake's clock.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the fake's clock forward by d; a pending commitWithin
// whose time has come is carried out.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	s.autoCommitLocked()
}

// Fail makes the next n requests to handler (Update, Select or Ping) fail
// with status: 503 and 429 as Jetty answers them (HTML, Retry-After: 0 for
// 429), any other status with Solr's JSON error body. Calls add up.
func (s *Server) Fail(handler string, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fail[handler] = append(s.fail[handler], status)
	}
}

// SetDelay makes every later request wait d (or until the client gives up)
// before it is handled.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Reject makes every add of the document with this id fail with a 400
// whose message names the document and includes msg, as a failing field
// conversion would.
func (s *Server) Reject(id, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject[id] = msg
}

// RequireHeader makes every request without header key set to value fail
// with 401, as Solr's BasicAuthPlugin does.
func (s *Server) RequireHeader(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authKey, s.authVal = key, value
}

// Requests returns a copy of the log of every request answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Count returns the number of requests answered for handler, whatever
// their status.
func (s *Server) Count(handler string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.log {
		if r.Handler == handler {
			n++
		}
	}
	return n
}

// Commits returns the number of explicit commits (commit=true, softCommit,
// or a "commit" or "optimize" command) the core has carried out;
// commitWithin commits are not counted.
func (s *Server) Commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// Live returns the document with this id as the index holds it, committed
// or not.
func (s *Server) Live(id string) (Doc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.live[id]
	if ok {
		d = d.clone()
	}
	return d, ok
}

// Visible returns the document with this id as /select sees it.
func (s *Server) Visible(id string) (Doc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.visible[id]
	if ok {
		d = d.clone()
	}
	return d, ok
}

// VisibleIDs returns the ids /select sees, sorted.
func (s *Server) VisibleIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.visible))
}

// solrError is an error answered with Solr's JSON error body.
type solrError struct {
	code int
	msg  string
}

func (e *solrError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &solrError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

// serve routes a request, after the injected delay, authentication and
// failures.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone()}
	prefix := "/solr/" + s.core + "/"
	if rest, ok := strings.CutPrefix(r.URL.Path, prefix); ok && (rest == Update || rest == Select || rest == Ping) {
		rec.Handler = rest
	}

	// Read the body first: only then does the server notice a client
	// that gives up during the delay.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	delay := s.delay
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.log = append(s.log, rec) }()
	s.autoCommitLocked()

	if s.authKey != "" && r.Header.Get(s.authKey) != s.authVal {
		w.Header().Set("WWW-Authenticate", `Basic realm="solr"`)
		rec.Status = s.writeError(w, &solrError{code: http.StatusUnauthorized, msg: "require authentication"}, start)
		return
	}
	if rec.Handler == "" {
		rec.Status = http.StatusNotFound
		w.Header().Set("Content-Type", "text/html;charset=iso-8859-1")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "<html>\n<head><title>Error 404 Not Found</title></head>\n<body><h2>HTTP ERROR 404 Not Found</h2>\n<table>\n<tr><th>URI:</th><td>%s</td></tr>\n</table>\n</body>\n</html>\n", htmlEscape(r.URL.Path))
		return
	}
	if q := s.fail[rec.Handler]; len(q) > 0 {
		status := q[0]
		s.fail[rec.Handler] = q[1:]
		rec.Status = s.writeInjected(w, status, start)
		return
	}

	var answer map[string]any
	switch rec.Handler {
	case Update:
		answer, err = s.update(r, &rec)
	case Select:
		answer, err = s.selectDocs(r)
	case Ping:
		answer, err = s.ping(r)
	}
	if err != nil {
		rec.Status = s.writeError(w, err, start)
		return
	}
	rec.Status = http.StatusOK
	answer["responseHeader"] = header(0, start, nil)
	writeJSON(w, http.StatusOK, answer)
}

// autoCommitLocked carries out a pending commitWithin whose time has come.
func (s *Server) autoCommitLocked() {
	if !s.deadline.IsZero() && !s.now.Before(s.deadline) {
		s.visible = maps.Clone(s.live)
		s.deadline = time.Time{}
	}
}

// commitLocked makes the index visible to /select.
func (s *Server) commitLocked() {
	s.visible = maps.Clone(s.live)
	s.deadline = time.Time{}
	s.commits++
}

// commitWithinLocked schedules a commit within d, unless one is due
// earlier, as Solr's CommitTracker does.
func (s *Server) commitWithinLocked(d time.Duration) {
	if d < 0 {
		return
	}
	at := s.now.Add(d)
	if s.deadline.IsZero() || at.Before(s.deadline) {
		s.deadline = at
	}
}

func header(status int, start time.Time, params url.Values) map[string]any {
	h := map[string]any{"status": status, "QTime": time.Since(start).Milliseconds()}
	if params != nil {
		p := map[string]any{}
		for k, v := range params {
			if len(v) == 1 {
				p[k] = v[0]
			} else {
				p[k] = v
			}
		}
		h["params"] = p
	}
	return h
}

func (s *Server) writeError(w http.ResponseWriter, err error, start time.Time) int {
	var se *solrError
	if !errors.As(err, &se) {
		se = &solrError{code: http.StatusInternalServerError, msg: err.Error()}
	}
	writeJSON(w, se.code, map[string]any{
		"responseHeader": header(se.code, start, nil),
		"error": map[string]any{
			"metadata": []string{"error-class", "org.apache.solr.common.SolrException", "root-error-class", "org.apache.solr.common.SolrException"},
			"msg":      se.msg,
			"code":     se.code,
		},
	})
	return se.code
}

func (s *Server) writeInjected(w http.ResponseWriter, status int, start time.Time) int {
	switch status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		w.Header().Set("Content-Type", "text/html;charset=iso-8859-1")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<html><head><title>Error %d %s</title></head><body><h2>HTTP ERROR %d %s</h2></body></html>\n",
			status, http.StatusText(status), status, http.StatusText(status))
		return status
	}
	return s.writeError(w, &solrError{code: status, msg: "injected failure: " + http.StatusText(status)}, start)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// checkWT accepts a missing wt or wt=json, the only writer the fake has.
func checkWT(v url.Values) error {
	if wt := v.Get("wt"); wt != "" && wt != "json" {
		return badRequest("fake Solr: unsupported wt=%q (only json)", wt)
	}
	return nil
}

// ping answers /admin/ping.
func (s *Server) ping(r *http.Request) (map[string]any, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return nil, &solrError{code: http.StatusMethodNotAllowed, msg: "fake Solr: ping takes GET"}
	}
	if err := checkWT(r.URL.Query()); err != nil {
		return nil, err
	}
	return map[string]any{"status": "OK"}, nil
}
