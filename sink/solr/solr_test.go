package solr

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinktest"
	"github.com/rsharvest/rsharvest/sink/solr/solrtest"
)

// newSink opens a sink on srv with fast backoff; opts.URL is filled in.
func newSink(t testing.TB, srv *solrtest.Server, opts Options) *Solr {
	t.Helper()
	if opts.URL == "" {
		opts.URL = srv.URL()
	}
	if opts.BackoffInitial == 0 {
		opts.BackoffInitial = time.Millisecond
	}
	if opts.BackoffMax == 0 {
		opts.BackoffMax = 5 * time.Millisecond
	}
	s, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func put(t testing.TB, s *Solr, r *sink.Resource, body string) {
	t.Helper()
	if r.Length == 0 {
		r.Length = int64(len(body))
	}
	if err := s.Put(context.Background(), r, strings.NewReader(body)); err != nil {
		t.Fatalf("Put(%q): %v", r.URI, err)
	}
}

func mustClose(t testing.TB, s *Solr) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestConformance(t *testing.T) {
	for _, batch := range []int{0, 3} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			sinktest.Run(t, func(t *testing.T) sink.Sink {
				srv := solrtest.New(t, solrtest.Options{})
				return newSink(t, srv, Options{StoreBody: true, BatchSize: batch, Concurrency: 8})
			})
		})
	}
}

// TestLive runs the conformance suite against a real Solr core named by
// RSHARVEST_SOLR_URL, whose schema has the fields the package
// documentation lists. The core is emptied before every subtest.
func TestLive(t *testing.T) {
	core := os.Getenv("RSHARVEST_SOLR_URL")
	if core == "" {
		t.Skip("RSHARVEST_SOLR_URL is not set: no real Solr to test against (set it to http://HOST:PORT/solr/CORE of a core with the schema in doc.go)")
	}
	t.Logf("running the conformance suite against the live core %s; it is emptied first", core)
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		emptyCore(t, core)
		s, err := New(t.Context(), Options{URL: core, StoreBody: true})
		if err != nil {
			t.Fatalf("New(%s): %v", core, err)
		}
		return s
	})
}

// emptyCore deletes every document of a live core and commits.
func emptyCore(t *testing.T, core string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, core+"/update?commit=true&wt=json",
		strings.NewReader(`{"delete":{"query":"*:*"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("emptying %s: %v", core, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("emptying %s: HTTP %d: %s", core, resp.StatusCode, b)
	}
}

func uri(i int) string { return fmt.Sprintf("http://example.com/r/%03d", i) }

func TestBatching(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchSize: 10})
	for i := range 25 {
		put(t, s, &sink.Resource{URI: uri(i)}, "body")
	}
	if got := srv.Count(solrtest.Update); got != 2 {
		t.Errorf("after 25 puts with batch 10: %d update requests, want 2", got)
	}
	// Sent but not committed: invisible until commitWithin has passed.
	if _, ok := srv.Visible(uri(0)); ok {
		t.Error("a document is visible before any commit")
	}
	if _, ok := srv.Live(uri(0)); !ok {
		t.Error("the first batch is not in the index")
	}
	srv.Advance(DefaultCommitWithin)
	if _, ok := srv.Visible(uri(0)); !ok {
		t.Error("a document is not visible once commitWithin has passed")
	}
	if _, ok := srv.Visible(uri(20)); ok {
		t.Error("a queued document is visible before it was sent")
	}
	mustClose(t, s)

	var adds []int
	for _, r := range srv.Requests() {
		if r.Handler != solrtest.Update {
			continue
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || r.Status != http.StatusOK {
			t.Errorf("update %s %s, Content-Type %q: status %d", r.Method, r.Path, r.Header.Get("Content-Type"), r.Status)
		}
		if r.Query.Get("wt") != "json" {
			t.Errorf("update without wt=json: %v", r.Query)
		}
		if r.Commit {
			continue
		}
		adds = append(adds, r.Adds)
		if got := r.Query.Get("commitWithin"); got != "10000" {
			t.Errorf("commitWithin = %q, want 10000", got)
		}
	}
	if fmt.Sprint(adds) != "[10 10 5]" {
		t.Errorf("adds per request = %v, want [10 10 5] (ceil(25/10) requests)", adds)
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if !last.Commit || last.Query.Get("commit") != "true" {
		t.Errorf("the last request is not a hard commit: %+v", last)
	}
	if srv.Commits() != 1 || len(srv.VisibleIDs()) != 25 {
		t.Errorf("after Close: %d commits, %d visible documents; want 1 and 25", srv.Commits(), len(srv.VisibleIDs()))
	}
}

func TestBatchBytes(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchMaxBytes: 1000, TextMaxBytes: -1})
	for i := range 10 {
		put(t, s, &sink.Resource{URI: uri(i)}, "x")
	}
	n := srv.Count(solrtest.Update)
	mustClose(t, s)
	// Each document is about 250 bytes of JSON.
	if n < 2 || n > 4 {
		t.Errorf("%d update requests for 10 documents of ~250 bytes with a 1000-byte limit, want 2-4", n)
	}
	if got := len(srv.VisibleIDs()); got != 10 {
		t.Errorf("%d documents visible, want 10", got)
	}
}

func TestCommitWithinParameter(t *testing.T) {
	for _, tt := range []struct {
		within time.Duration
		want   string
	}{{2500 * time.Millisecond, "2500"}, {-1, ""}} {
		srv := solrtest.New(t, solrtest.Options{})
		s := newSink(t, srv, Options{CommitWithin: tt.within})
		put(t, s, &sink.Resource{URI: uri(1)}, "x")
		mustClose(t, s)
		got := srv.Requests()[1].Query
		if got.Get("commitWithin") != tt.want || got.Has("commitWithin") != (tt.want != "") {
			t.Errorf("CommitWithin %v: parameters %v, want commitWithin=%q", tt.within, got, tt.want)
		}
	}
}

func TestDeleteOrdering(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchSize: 4})
	ctx := context.Background()
	put(t, s, &sink.Resource{URI: uri(1)}, "x")
	if err := s.Delete(ctx, uri(1)); err != nil { // same batch as its add
		t.Fatal(err)
	}
	put(t, s, &sink.Resource{URI: uri(2)}, "x")
	if err := s.Delete(ctx, uri(2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, uri(3)); err != nil { // delete, then add: the add wins
		t.Fatal(err)
	}
	put(t, s, &sink.Resource{URI: uri(3)}, "x")
	put(t, s, &sink.Resource{URI: uri(4)}, "x") // next batch: add, then delete
	if err := s.Delete(ctx, uri(4)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	if got := fmt.Sprint(srv.VisibleIDs()); got != fmt.Sprint([]string{uri(3)}) {
		t.Errorf("visible = %s, want only %s", got, uri(3))
	}
	var shapes []string
	for _, r := range srv.Requests() {
		if r.Handler == solrtest.Update && !r.Commit {
			shapes = append(shapes, fmt.Sprintf("a%d/d%d", r.Adds, r.Deletes))
		}
	}
	if got := strings.Join(shapes, " "); got != "a1/d0 a0/d1 a1/d0 a0/d1 a0/d1 a2/d0 a0/d1" {
		t.Errorf("update requests = %s", got)
	}
}

func TestRetries(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := solrtest.New(t, solrtest.Options{})
			s := newSink(t, srv, Options{BatchSize: 2})
			srv.Fail(solrtest.Update, status, 3)
			put(t, s, &sink.Resource{URI: uri(1)}, "a")
			put(t, s, &sink.Resource{URI: uri(2)}, "b")
			mustClose(t, s)
			if got := srv.Count(solrtest.Update); got != 5 {
				t.Errorf("%d update requests, want 3 failures + 1 batch + 1 commit", got)
			}
			if got := len(srv.VisibleIDs()); got != 2 {
				t.Errorf("%d documents visible, want 2", got)
			}
		})
	}
}

func TestRetriesUsedUp(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchSize: 2, Retries: 2})
	srv.Fail(solrtest.Update, http.StatusServiceUnavailable, 3)
	put(t, s, &sink.Resource{URI: uri(1)}, "a")
	put(t, s, &sink.Resource{URI: uri(2)}, "b") // fills the batch, which fails
	if got := srv.Count(solrtest.Update); got != 3 {
		t.Errorf("%d update requests, want 1 + 2 retries", got)
	}
	// The next call returns the batch's error, classified, and does nothing else.
	err := s.Put(context.Background(), &sink.Resource{URI: uri(3)}, strings.NewReader("c"))
	var se *StatusError
	if !errclass.IsRetryable(err) || !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("Put after a failed batch = %v, want a retryable 503", err)
	}
	failed := s.Failed()
	if len(failed) != 2 || failed[0].URI != uri(1) || failed[1].URI != uri(2) || errclass.IsPermanent(failed[0].Err) {
		t.Errorf("Failed = %+v, want %s and %s, not permanent", failed, uri(1), uri(2))
	}
	// Once returned, the error is gone: the sink goes on.
	put(t, s, &sink.Resource{URI: uri(4)}, "d")
	mustClose(t, s)
	if got := fmt.Sprint(srv.VisibleIDs()); got != fmt.Sprint([]string{uri(4)}) {
		t.Errorf("visible = %s, want %s", got, uri(4))
	}
}

func TestErrorReturnedByClose(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{Retries: -1})
	put(t, s, &sink.Resource{URI: uri(1)}, "a")
	srv.Fail(solrtest.Update, http.StatusServiceUnavailable, 1)
	err := s.Close(context.Background())
	if !errclass.IsRetryable(err) || !strings.Contains(err.Error(), "503") {
		t.Errorf("Close = %v, want the batch's retryable 503", err)
	}
}

func TestBadDocumentIsolated(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchSize: 5})
	srv.Reject(uri(2), "bad value")
	for i := range 5 {
		put(t, s, &sink.Resource{URI: uri(i)}, "body") // the fifth sends the batch: no error
	}
	ctx := context.Background()
	if err := s.Delete(ctx, uri(9)); err != nil {
		t.Fatalf("Delete after a rejection = %v, want nil (rejections go to Failed)", err)
	}
	err := s.Close(ctx)
	if !errclass.IsPermanent(err) || !strings.Contains(err.Error(), "1 documents were rejected") {
		t.Errorf("Close = %v, want a permanent error counting 1 rejection", err)
	}
	failed := s.Failed()
	if len(failed) != 1 || failed[0].URI != uri(2) || failed[0].Op != "add" || !errclass.IsPermanent(failed[0].Err) {
		t.Fatalf("Failed = %+v, want only %s, permanent", failed, uri(2))
	}
	if !strings.Contains(failed[0].Err.Error(), "bad value") {
		t.Errorf("the failure does not carry Solr's message: %v", failed[0].Err)
	}
	want := []string{uri(0), uri(1), uri(3), uri(4)}
	if got := srv.VisibleIDs(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("visible = %v, want %v", got, want)
	}
	// One batch request (400), then the five documents one by one.
	if got := srv.Count(solrtest.Update); got != 1+5+1+1 {
		t.Errorf("%d update requests, want batch + 5 single + delete + commit", got)
	}
}

func TestDocumentFields(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{})
	md5sum, _ := hex.DecodeString("0123456789abcdef0123456789abcdef")
	r := &sink.Resource{
		URI:         "http://example.com/a.txt",
		Length:      -1,
		Hashes:      fixity.Hashes{MD5: md5sum, SHA1: bytes.Repeat([]byte{0xab}, 20)},
		Type:        "text/plain; charset=utf-8",
		Lastmod:     time.Date(2013, 1, 2, 14, 0, 0, 500, time.FixedZone("CET", 3600)),
		ResourceSet: "http://example.com/capabilitylist.xml",
		Links:       []sink.Link{{Rel: "describedby", Href: "http://example.com/a.meta"}},
	}
	put(t, s, r, "hello, world")
	mustClose(t, s)
	doc, ok := srv.Visible(r.URI)
	if !ok {
		t.Fatal("not indexed")
	}
	want := solrtest.Doc{
		"id":           r.URI,
		"location":     r.URI,
		"length":       int64(12),
		"md5":          "0123456789abcdef0123456789abcdef",
		"sha1":         strings.Repeat("ab", 20),
		"sha256":       "09ca7e4eaa6e8ae9c7d261167129184883644d07dfba7cbfbc4c8a2e08360d5b", // computed
		"mime":         "text/plain; charset=utf-8",
		"lastmod":      "2013-01-02T13:00:00Z",
		"text":         "hello, world",
		"resource_set": "http://example.com/capabilitylist.xml",
		"links":        []any{"describedby http://example.com/a.meta"},
	}
	if fmt.Sprint(doc) != fmt.Sprint(want) {
		t.Errorf("document:\n got %v\nwant %v", doc, want)
	}
}

// TestDublinCoreFields: an OAI-PMH oai_dc record's Dublin Core elements
// are fields of its document; its XML stays in text.
func TestDublinCoreFields(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{})
	rec := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<oai_dc:dc xmlns:oai_dc="` + sink.OAIDCNamespace + `" xmlns:dc="` + sink.DCNamespace + `">` +
		`<dc:title>On Rivers</dc:title><dc:creator>Ada</dc:creator><dc:creator>Bob</dc:creator><dc:date>2024</dc:date></oai_dc:dc>`
	about := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<provenance xmlns="http://www.openarchives.org/OAI/2.0/provenance"/>`
	put(t, s, &sink.Resource{URI: "oai:example.org:1", Length: -1, Type: "application/xml", Sets: []string{"physics", "math:algebra"}, About: []string{about}}, rec)
	mustClose(t, s)
	doc, ok := srv.Visible("oai:example.org:1")
	if !ok {
		t.Fatal("not indexed")
	}
	if fmt.Sprint(doc["sets"]) != "[physics math:algebra]" || fmt.Sprint(doc["about"]) != "["+about+"]" {
		t.Errorf("sets %v, about %v", doc["sets"], doc["about"])
	}
	if fmt.Sprint(doc["dc_title"]) != "[On Rivers]" || fmt.Sprint(doc["dc_creator"]) != "[Ada Bob]" || fmt.Sprint(doc["dc_date"]) != "[2024]" || doc["text"] != rec {
		t.Errorf("document %v", doc)
	}
	if _, ok := doc["dc_subject"]; ok {
		t.Error("an element the record lacks is a field")
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name, typ, body string
		max             int
		want            string
	}{
		{"plain", "text/plain", "abc", 0, "abc"},
		{"html", "text/html; charset=UTF-8", "<p>x</p>", 0, "<p>x</p>"},
		{"xml", "application/xml", "<a/>", 0, "<a/>"},
		{"json", "application/json", `{"a":1}`, 0, `{"a":1}`},
		{"atom", "application/atom+xml", "<feed/>", 0, "<feed/>"},
		{"ld+json", "application/ld+json", "{}", 0, "{}"},
		{"binary", "application/octet-stream", "abc", 0, ""},
		{"pdf", "application/pdf", "%PDF", 0, ""},
		{"no type", "", "abc", 0, ""},
		{"latin-1 charset", "text/plain; charset=iso-8859-1", "abc", 0, ""},
		{"invalid UTF-8", "text/plain", "ab\xffc", 0, ""},
		{"invalid UTF-8 past the cap", "text/plain", "abcdef\xff", 3, ""},
		{"capped", "text/plain", "abcdefgh", 5, "abcde"},
		{"capped before a character", "text/plain", "abcdé", 5, "abcd"},
		{"capped after a character", "text/plain", "abcé", 5, "abcé"},
		{"byte order mark", "text/plain", "\uFEFFabc", 0, "abc"},
		{"text off", "text/plain", "abc", -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := solrtest.New(t, solrtest.Options{})
			s := newSink(t, srv, Options{TextMaxBytes: tt.max})
			put(t, s, &sink.Resource{URI: uri(1), Type: tt.typ}, tt.body)
			mustClose(t, s)
			doc, _ := srv.Visible(uri(1))
			got, has := doc["text"]
			if tt.want == "" && has {
				t.Errorf("text = %q, want none", got)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTextCapBoundsMemory(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{TextMaxBytes: 1000})
	big := strings.Repeat("ü", 1<<20) // 2 MiB
	put(t, s, &sink.Resource{URI: uri(1), Type: "text/plain"}, big)
	mustClose(t, s)
	doc, _ := srv.Visible(uri(1))
	if got := doc["text"].(string); got != strings.Repeat("ü", 500) {
		t.Errorf("text has %d bytes, want the first 1000", len(got))
	}
	if doc["length"] != int64(len(big)) {
		t.Errorf("length = %v, want %d", doc["length"], len(big))
	}
}

func TestUTF8Checker(t *testing.T) {
	for _, s := range []string{"", "abc", "é", "日本語", "🎉x", "\xff", "a\xc3", "\xed\xa0\x80", "\xe6\x97", "é\x80", "\uFFFD"} {
		for split := 0; split <= len(s); split++ {
			for split2 := split; split2 <= len(s); split2++ {
				var u utf8Checker
				u.write([]byte(s[:split]))
				u.write([]byte(s[split:split2]))
				u.write([]byte(s[split2:]))
				if want := !strings.ContainsRune(strings.ToValidUTF8(s, "\x00"), 0); u.valid() != want {
					t.Errorf("%q split at %d,%d: valid = %t, want %t", s, split, split2, u.valid(), want)
				}
			}
		}
	}
}

func TestIDs(t *testing.T) {
	for _, u := range append(sinktest.OddURIs(), encodedPrefix, encodedPrefix+"AA") {
		id := docID(u)
		back, err := uriOf(id)
		if err != nil || back != u {
			t.Errorf("uriOf(docID(%q)) = %q, %v", u, back, err)
		}
		if want := u == "" || !isValid(u) || strings.HasPrefix(u, encodedPrefix) || strings.ContainsRune(u, 0); want != (id != u) {
			t.Errorf("docID(%q) = %q: encoded %t, want %t", u, id, id != u, want)
		}
	}
}

func isValid(s string) bool { return strings.ToValidUTF8(s, "") == s }

func TestIDTooLong(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{})
	long := "http://example.com/" + strings.Repeat("x", maxTermBytes)
	body := &eofReader{r: strings.NewReader("x")}
	err := s.Put(context.Background(), &sink.Resource{URI: long}, body)
	if !errclass.IsPermanent(err) {
		t.Errorf("Put of a URI over the term limit = %v, want permanent", err)
	}
	if err := s.Delete(context.Background(), long); err != nil {
		t.Errorf("Delete of a URI over the term limit = %v, want nil", err)
	}
	mustClose(t, s)
	if n := srv.Count(solrtest.Update); n != 0 {
		t.Errorf("%d update requests, want none", n)
	}
}

type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.eof = e.eof || err == io.EOF
	return n, err
}

func TestStoreBodyLimit(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{StoreBody: true, BodyMaxBytes: 10})
	err := s.Put(context.Background(), &sink.Resource{URI: uri(1), Length: 11}, strings.NewReader("0123456789a"))
	if !errclass.IsPermanent(err) {
		t.Errorf("Put of an 11-byte body with a 10-byte limit = %v, want permanent", err)
	}
	put(t, s, &sink.Resource{URI: uri(2)}, "0123456789")
	mustClose(t, s)
	if got := fmt.Sprint(srv.VisibleIDs()); got != fmt.Sprint([]string{uri(2)}) {
		t.Errorf("visible = %s", got)
	}
}

func TestGetWithoutStoredBody(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{})
	defer mustClose(t, s)
	put(t, s, &sink.Resource{URI: uri(1)}, "x")
	put(t, s, &sink.Resource{URI: uri(2)}, "")
	if _, err := s.Get(t.Context(), uri(1)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Get of a body not stored = %v, want errors.ErrUnsupported", err)
	}
	rc, err := s.Get(t.Context(), uri(2))
	if err != nil {
		t.Fatalf("Get of an empty body = %v", err)
	}
	rc.Close()
	// Get committed; a second Get with nothing new commits no more.
	commits := srv.Commits()
	if _, err := s.Get(t.Context(), uri(2)); err != nil {
		t.Fatal(err)
	}
	if srv.Commits() != commits {
		t.Error("Get committed although nothing changed")
	}
}

func TestOpen(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{Core: "c1"})
	ctx := context.Background()
	sk, err := Open(ctx, srv.URL()+"?batch=7&commitWithin=1500&textMax=0&storeBody=true&bodyMax=99&concurrency=3&retries=0&batchBytes=4096")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s := sk.(*Solr)
	got := s.opts
	if got.BatchSize != 7 || got.CommitWithin != 1500*time.Millisecond || got.TextMaxBytes != -1 || !got.StoreBody ||
		got.BodyMaxBytes != 99 || got.Concurrency != 3 || got.Retries != 0 || got.BatchMaxBytes != 4096 {
		t.Errorf("options = %+v", got)
	}
	if s.Concurrency() != 3 || s.URL() != srv.URL() {
		t.Errorf("Concurrency %d, URL %q", s.Concurrency(), s.URL())
	}
	mustClose(t, s)

	for _, arg := range []string{
		srv.URL() + "?bogus=1",
		srv.URL() + "?batch=0",
		srv.URL() + "?batch=x",
		srv.URL() + "?storeBody=maybe",
		"ftp://127.0.0.1/solr/c1",
		"http:///solr/c1",
		strings.TrimSuffix(srv.URL(), "/solr/c1"),
	} {
		if _, err := Open(ctx, arg); !errclass.IsFatal(err) {
			t.Errorf("Open(%q) = %v, want a fatal error", arg, err)
		}
	}
}

func TestPingFailures(t *testing.T) {
	ctx := context.Background()
	srv := solrtest.New(t, solrtest.Options{Core: "c1"})

	_, err := New(ctx, Options{URL: strings.Replace(srv.URL(), "/c1", "/nocore", 1)})
	if !errclass.IsFatal(err) || !strings.Contains(err.Error(), "no such core") {
		t.Errorf("New on a missing core = %v, want fatal 'no such core'", err)
	}

	srv.Fail(solrtest.Ping, http.StatusServiceUnavailable, 1)
	if s, err := New(ctx, Options{URL: srv.URL(), BackoffInitial: time.Millisecond}); err != nil {
		t.Errorf("New after one 503 to the ping = %v, want a retry that succeeds", err)
	} else {
		mustClose(t, s)
	}

	down := solrtest.New(t, solrtest.Options{})
	down.Close()
	start := time.Now()
	_, err = New(ctx, Options{URL: down.URL()})
	if !errclass.IsFatal(err) {
		t.Errorf("New on a server that is down = %v, want fatal", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("New took %v to report an unreachable Solr", time.Since(start))
	}
	if srv.Count(solrtest.Update) != 0 {
		t.Error("an update was sent by a failed New")
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestHeaderSentNeverLogged(t *testing.T) {
	const secret = "Bearer s3cr3t-t0ken"
	srv := solrtest.New(t, solrtest.Options{})
	srv.RequireHeader("Authorization", secret)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	if _, err := New(context.Background(), Options{URL: srv.URL(), Logger: logger}); !errclass.IsFatal(err) {
		t.Errorf("New without credentials = %v, want fatal", err)
	}
	s := newSink(t, srv, Options{BatchSize: 2, Logger: logger, Header: http.Header{"Authorization": {secret}}})
	srv.Fail(solrtest.Update, http.StatusServiceUnavailable, 1)
	srv.Reject(uri(2), "nope")
	put(t, s, &sink.Resource{URI: uri(1)}, "a")
	put(t, s, &sink.Resource{URI: uri(2)}, "b")
	err := s.Close(context.Background())
	if err == nil {
		t.Fatal("Close = nil, want the rejection")
	}
	for _, r := range srv.Requests()[1:] {
		if r.Header.Get("Authorization") != secret {
			t.Errorf("%s %s sent without the header", r.Method, r.Path)
		}
	}
	for name, text := range map[string]string{"logs": logs.String(), "error": err.Error(), "failure": s.Failed()[0].Err.Error()} {
		if strings.Contains(text, "s3cr3t") {
			t.Errorf("the secret appears in the %s:\n%s", name, text)
		}
	}
	if !strings.Contains(logs.String(), "retrying") || !strings.Contains(logs.String(), "rejected") {
		t.Errorf("the logs lack the retry and the rejection:\n%s", logs.String())
	}
}

func TestPasswordInURLRedacted(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	srv.RequireHeader("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("user:pw-s3cr3t")))
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	u, _ := url.Parse(srv.URL())
	u.User = url.UserPassword("user", "pw-s3cr3t")
	s := newSink(t, srv, Options{URL: u.String(), Logger: logger, Retries: -1})
	put(t, s, &sink.Resource{URI: uri(1)}, "a")
	srv.Fail(solrtest.Update, http.StatusServiceUnavailable, 1)
	err := s.Close(context.Background())
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(logs.String(), "s3cr3t") || strings.Contains(s.URL(), "s3cr3t") {
		t.Errorf("the password leaks, or Close did not fail: %v\n%s", err, logs.String())
	}
}

func TestFatalStopsTheSink(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchSize: 1})
	srv.RequireHeader("Authorization", "x") // credentials revoked after New
	put(t, s, &sink.Resource{URI: uri(1)}, "a")
	err := s.Delete(context.Background(), uri(1))
	if !errclass.IsFatal(err) {
		t.Errorf("Delete after a 401 = %v, want fatal", err)
	}
	err = s.Put(context.Background(), &sink.Resource{URI: uri(2)}, strings.NewReader("b"))
	if !errclass.IsFatal(err) {
		t.Errorf("Put after a 401 = %v, want fatal again", err)
	}
	if err := s.Close(context.Background()); !errclass.IsFatal(err) {
		t.Errorf("Close after a 401 = %v, want fatal", err)
	}
	if n := srv.Count(solrtest.Update); n != 1 {
		t.Errorf("%d update requests, want 1 (nothing after the 401)", n)
	}
}

func TestCancelledFlushKeepsQueue(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchSize: 2})
	put(t, s, &sink.Resource{URI: uri(1)}, "a")
	srv.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// The Put fills the batch; the send is cut by ctx, the document stays queued.
	if err := s.Put(ctx, &sink.Resource{URI: uri(2)}, strings.NewReader("b")); err != nil {
		t.Fatalf("Put whose send was interrupted = %v, want nil (queued)", err)
	}
	srv.SetDelay(0)
	mustClose(t, s)
	if got := len(srv.VisibleIDs()); got != 2 {
		t.Errorf("%d visible, want 2", got)
	}
	if len(s.Failed()) != 0 {
		t.Errorf("Failed = %v", s.Failed())
	}
}

func TestClosedSink(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{})
	mustClose(t, s)
	mustClose(t, s) // a no-op
	if err := s.Put(context.Background(), &sink.Resource{URI: uri(1)}, strings.NewReader("")); err == nil {
		t.Error("Put after Close succeeded")
	}
}

func TestConcurrentPutsKeepOrder(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchSize: 7, Concurrency: 8})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				u := fmt.Sprintf("http://example.com/w%d/%d", w, i%5)
				if i%3 == 2 {
					if err := s.Delete(context.Background(), u); err != nil {
						t.Error(err)
					}
					continue
				}
				if err := s.Put(context.Background(), &sink.Resource{URI: u, Length: 1}, strings.NewReader("x")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mustClose(t, s)
	// Each worker's own URIs end in a known state: the last operation on
	// http://example.com/wW/K is at the largest i < 50 with i%5 == K.
	for w := range 8 {
		for k := range 5 {
			last := 45 + k
			if last >= 50 {
				last -= 5
			}
			u := fmt.Sprintf("http://example.com/w%d/%d", w, k)
			_, held := srv.Visible(u)
			if want := last%3 != 2; held != want {
				t.Errorf("%s held = %t, want %t", u, held, want)
			}
		}
	}
}

func TestFlush(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{BatchSize: 3, Retries: 1})
	ctx := context.Background()
	srv.Reject(uri(1), "bad")
	put(t, s, &sink.Resource{URI: uri(0)}, "a")
	put(t, s, &sink.Resource{URI: uri(1)}, "b")
	srv.Fail(solrtest.Update, http.StatusServiceUnavailable, 2) // the next request and its retry
	if err := s.Delete(ctx, uri(2)); err != nil {               // fills the batch, which fails
		t.Fatal(err)
	}
	if got := srv.Count(solrtest.Update); got != 2 {
		t.Fatalf("before Flush: %d requests, want the failed batch's 2", got)
	}

	failed := s.Flush(ctx)
	got := map[string]string{}
	for _, f := range failed {
		got[f.URI] = fmt.Sprintf("delete=%t %v", f.Delete, errclass.Of(f.Err))
	}
	want := map[string]string{
		uri(0): "delete=false retryable",
		uri(1): "delete=false retryable",
		uri(2): "delete=true retryable",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Flush = %v, want %v", got, want)
	}
	// Reported by Flush: not returned again by Put.
	put(t, s, &sink.Resource{URI: uri(3)}, "d")
	put(t, s, &sink.Resource{URI: uri(0)}, "a")
	put(t, s, &sink.Resource{URI: uri(1)}, "b")
	failed = s.Flush(ctx)
	if len(failed) != 1 || failed[0].URI != uri(1) || !errclass.IsPermanent(failed[0].Err) {
		t.Errorf("second Flush = %v, want %s rejected", failed, uri(1))
	}
	if _, ok := srv.Live(uri(3)); !ok {
		t.Error("Flush did not send the queue")
	}
	if f := s.Flush(ctx); len(f) != 0 {
		t.Errorf("third Flush = %v, want nothing", f)
	}
	mustClose(t, s)
	if got, want := fmt.Sprint(srv.VisibleIDs()), fmt.Sprint([]string{uri(0), uri(3)}); got != want {
		t.Errorf("visible = %s, want %s", got, want)
	}
	if len(s.Failed()) != 4 {
		t.Errorf("Failed = %v, want all 4 failures of the sink's life", s.Failed())
	}
}

func TestFlushGivesUp(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{})
	put(t, s, &sink.Resource{URI: uri(1)}, "a")
	srv.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	failed := s.Flush(ctx)
	if len(failed) != 1 || failed[0].URI != uri(1) || !errclass.IsRetryable(failed[0].Err) {
		t.Errorf("Flush cut by ctx = %v, want %s failed, retryable", failed, uri(1))
	}
	srv.SetDelay(0)
	mustClose(t, s) // nothing left to send, nothing to report
	// The cut request and Close's commit, at most: the dropped operation
	// is not sent again.
	if n := srv.Count(solrtest.Update); n > 2 {
		t.Errorf("%d update requests: the dropped operation was sent again", n)
	}
}

func TestFlushFatal(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{})
	put(t, s, &sink.Resource{URI: uri(1)}, "a")
	srv.RequireHeader("Authorization", "x")
	failed := s.Flush(context.Background())
	if len(failed) != 1 || !errclass.IsFatal(failed[0].Err) {
		t.Errorf("Flush after a 401 = %v, want a fatal failure", failed)
	}
	if err := s.Close(context.Background()); !errclass.IsFatal(err) {
		t.Errorf("Close = %v, want fatal", err)
	}
}
