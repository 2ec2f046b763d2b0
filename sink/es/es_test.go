package es

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/es/estest"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

// newFake opens a sink on a new fake server, with fast retries.
func newFake(t *testing.T, opts Options) (*ES, *estest.Server) {
	t.Helper()
	srv := estest.New(t)
	opts.URL = srv.URL
	if opts.Index == "" {
		opts.Index = "res"
	}
	if opts.RetryWait == 0 {
		opts.RetryWait = time.Millisecond
	}
	s, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if s.Flavor() != FlavorElasticsearch {
		t.Fatalf("flavour %v, want elasticsearch", s.Flavor())
	}
	return s, srv
}

func TestConformanceFake(t *testing.T) {
	// A small batch has concurrent Puts fill and send batches mid-test.
	for _, batch := range []int{7, DefaultBatchSize} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			sinktest.Run(t, func(t *testing.T) sink.Sink {
				s, _ := newFake(t, Options{StoreBody: true, BatchSize: batch, Concurrency: 8})
				return s
			})
		})
	}
}

// put puts body under uri and fails the test on error.
func put(t *testing.T, s *ES, uri, typ, body string) {
	t.Helper()
	r := &sink.Resource{URI: uri, Length: int64(len(body)), Type: typ,
		Lastmod: time.Date(2013, 1, 2, 13, 0, 0, 0, time.UTC)}
	if err := s.Put(t.Context(), r, strings.NewReader(body)); err != nil {
		t.Fatalf("Put(%s): %v", uri, err)
	}
}

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("document %s: %v", raw, err)
	}
	return m
}

func TestBatching(t *testing.T) {
	s, srv := newFake(t, Options{BatchSize: 10})
	for i := range 4 {
		put(t, s, fmt.Sprintf("http://example.com/%d", i), "", "x")
	}
	if got := srv.Bulks(); len(got) != 0 {
		t.Fatalf("%d bulk requests after 8 actions, want none before the batch of 10 is full", len(got))
	}
	for i := 4; i < 12; i++ {
		put(t, s, fmt.Sprintf("http://example.com/%d", i), "", "x")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var sizes []int
	for _, b := range srv.Bulks() {
		sizes = append(sizes, b.Actions)
	}
	if fmt.Sprint(sizes) != "[10 10 4]" {
		t.Errorf("bulk requests of %v actions, want [10 10 4]", sizes)
	}
	if n := len(srv.Docs("res")); n != 12 {
		t.Errorf("%d resource documents, want 12", n)
	}
	if n := len(srv.Docs("res-changes")); n != 12 {
		t.Errorf("%d change documents, want 12", n)
	}
}

func TestBatchBytes(t *testing.T) {
	s, srv := newFake(t, Options{BatchBytes: 4000, StoreBody: true})
	for i := range 5 {
		put(t, s, fmt.Sprintf("http://example.com/%d", i), "", strings.Repeat("x", 1000))
	}
	if n := len(srv.Bulks()); n == 0 {
		t.Errorf("no bulk request after more than BatchBytes were queued")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, b := range srv.Bulks() {
		if b.Bytes > 8000 {
			t.Errorf("a bulk request of %d bytes, want about BatchBytes", b.Bytes)
		}
	}
}

func TestCoalesce(t *testing.T) {
	s, srv := newFake(t, Options{})
	const uri = "http://example.com/a"
	put(t, s, uri, "", "one")
	put(t, s, uri, "", "two")
	if err := s.Delete(t.Context(), uri); err != nil {
		t.Fatal(err)
	}
	put(t, s, uri, "", "three")
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	bulks := srv.Bulks()
	if len(bulks) != 1 || bulks[0].Actions != 5 {
		t.Errorf("bulk requests %+v, want one of 5 actions (1 resource + 4 changes)", bulks)
	}
	if doc, ok := srv.Doc("res", uri); !ok || decode(t, doc)["length"] != 5.0 {
		t.Errorf("resource document %s, want the last Put's", doc)
	}
}

func TestDocuments(t *testing.T) {
	s, srv := newFake(t, Options{ResourceSet: "dumps"})
	const uri = "http://example.com/doc.txt"
	body := "hello, world"
	r := &sink.Resource{URI: uri, Length: -1, Type: "text/plain; charset=utf-8",
		Lastmod: time.Date(2013, 1, 2, 13, 0, 0, 0, time.UTC),
		Hashes:  fixity.Hashes{SHA1: bytes.Repeat([]byte{0xab}, 20)}}
	if err := s.Put(t.Context(), r, strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	put(t, s, "http://example.com/bin", "application/octet-stream", "\x00\x01")
	if err := s.Delete(t.Context(), uri); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "http://example.com/never"); err != nil {
		t.Fatal(err)
	}
	// The deletion of doc.txt is queued: read its document before Close.
	s.flush(t.Context(), false)
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ok := srv.Doc("res", uri); ok {
		t.Errorf("%s still indexed after Delete", uri)
	}
	bin, ok := srv.Doc("res", "http://example.com/bin")
	if !ok {
		t.Fatal("bin not indexed")
	}
	doc := decode(t, bin)
	want := map[string]any{
		"doc_id": "http://example.com/bin", "uri": "http://example.com/bin",
		"resource_set": "dumps",
		"location":     map[string]any{"value": "http://example.com/bin", "type": "url"},
		"length":       2.0, "md5": fmt.Sprintf("%x", md5.Sum([]byte("\x00\x01"))),
		"sha256": fmt.Sprintf("%x", sha256.Sum256([]byte("\x00\x01"))),
		"mime":   "application/octet-stream", "lastmod": "2013-01-02T13:00:00Z",
	}
	for k, v := range want {
		if fmt.Sprint(doc[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v", k, doc[k], v)
		}
	}
	for _, k := range []string{"text", "body", "sha1", "uri_b64"} {
		if _, ok := doc[k]; ok {
			t.Errorf("field %s present, want it absent", k)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(doc["timestamp"])); err != nil {
		t.Errorf("timestamp: %v", err)
	}

	changes := srv.Docs("res-changes")
	if len(changes) != 4 {
		t.Fatalf("%d change documents, want 4", len(changes))
	}
	wantChanges := []struct{ uri, change string }{
		{uri, "updated"}, {"http://example.com/bin", "updated"}, {uri, "deleted"}, {"http://example.com/never", "deleted"},
	}
	for i, c := range changes {
		doc := decode(t, c)
		if doc["uri"] != wantChanges[i].uri || doc["change"] != wantChanges[i].change {
			t.Errorf("change %d = %v %v, want %v", i, doc["uri"], doc["change"], wantChanges[i])
		}
		for _, k := range []string{"datetime", "timestamp", "rev", "location", "resource_set"} {
			if _, ok := doc[k]; !ok {
				t.Errorf("change %d lacks %s", i, k)
			}
		}
		if _, ok := doc["lastmod"]; ok != (wantChanges[i].change == "updated") {
			t.Errorf("change %d: lastmod present = %t", i, ok)
		}
	}
}

func TestTextField(t *testing.T) {
	s, srv := newFake(t, Options{TextMax: 10})
	put(t, s, "http://example.com/short", "text/plain", "short")
	put(t, s, "http://example.com/long", "text/plain", "longer than ten")
	put(t, s, "http://example.com/json", "application/ld+json", "{}")
	put(t, s, "http://example.com/latin1", "text/plain", "caf\xe9")
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for uri, want := range map[string]any{"short": "short", "long": nil, "json": "{}", "latin1": nil} {
		doc, _ := srv.Doc("res", "http://example.com/"+uri)
		if got := decode(t, doc)["text"]; got != want {
			t.Errorf("%s: text = %v, want %v", uri, got, want)
		}
	}
}

// oaiDCRecord is an OAI-PMH oai_dc record, as a harvest delivers it.
const oaiDCRecord = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<oai_dc:dc xmlns:oai_dc="` + sink.OAIDCNamespace + `" xmlns:dc="` + sink.DCNamespace + `">` +
	`<dc:title>On Rivers</dc:title><dc:creator>Ada</dc:creator><dc:creator>Bob</dc:creator><dc:date>2024</dc:date></oai_dc:dc>`

// TestDublinCoreFields: an oai_dc record's Dublin Core elements are fields
// of its document; its XML stays in text.
func TestDublinCoreFields(t *testing.T) {
	s, srv := newFake(t, Options{})
	put(t, s, "oai:example.org:1", "application/xml", oaiDCRecord)
	put(t, s, "http://example.com/other.xml", "application/xml", "<a/>")
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	raw, _ := srv.Doc("res", "oai:example.org:1")
	doc := decode(t, raw)
	if fmt.Sprint(doc["dc_title"]) != "[On Rivers]" || fmt.Sprint(doc["dc_creator"]) != "[Ada Bob]" || fmt.Sprint(doc["dc_date"]) != "[2024]" || doc["text"] != oaiDCRecord {
		t.Errorf("document %v", doc)
	}
	raw, _ = srv.Doc("res", "http://example.com/other.xml")
	for k := range decode(t, raw) {
		if strings.HasPrefix(k, "dc_") {
			t.Errorf("a document that is no oai_dc record has %s", k)
		}
	}
}

func TestDocID(t *testing.T) {
	long := "http://example.com/" + strings.Repeat("x", 600)
	for _, tt := range []struct {
		uri    string
		hashed bool
	}{
		{"http://example.com/a", false},
		{"http://example.com/" + strings.Repeat("x", 512-19), false},
		{long, true},
		{"", true},
		{"http://example.com/\xff", true},
		{"nul\x00byte", false},
	} {
		got := docID(tt.uri)
		if hashed := strings.HasPrefix(got, "sha256:"); hashed != tt.hashed || !tt.hashed && got != tt.uri {
			t.Errorf("docID(%q) = %q", tt.uri, got)
		}
		if len(got) > maxIDBytes {
			t.Errorf("docID(%q) is %d bytes", tt.uri, len(got))
		}
	}
	if docID(long) == docID(long+"y") {
		t.Error("two long URIs share an id")
	}
}

func TestItemRejected(t *testing.T) {
	s, srv := newFake(t, Options{BatchSize: 100})
	const bad = "http://example.com/bad"
	srv.SetItemFault(func(it estest.Item) int {
		if it.Index == "res" && it.ID == bad {
			return http.StatusBadRequest
		}
		return 0
	})
	for _, uri := range []string{"http://example.com/a", bad, "http://example.com/b"} {
		put(t, s, uri, "", "x") // queued: nil even for the bad one
	}
	err := s.Close(t.Context())
	if !errclass.IsPermanent(err) {
		t.Errorf("Close = %v, want a permanent error", err)
	}
	failed := s.Failed()
	if len(failed) != 1 || failed[0].URI != bad || failed[0].Op != "put" || !errclass.IsPermanent(failed[0].Err) {
		t.Fatalf("Failed() = %+v, want the bad put alone, permanent", failed)
	}
	if !strings.Contains(failed[0].Err.Error(), "mapper_parsing_exception") {
		t.Errorf("failure %q does not give the server's reason", failed[0].Err)
	}
	for _, uri := range []string{"http://example.com/a", "http://example.com/b"} {
		if _, ok := srv.Doc("res", uri); !ok {
			t.Errorf("%s not indexed", uri)
		}
	}
	if n := len(srv.Docs("res-changes")); n != 3 {
		t.Errorf("%d change documents, want 3", n)
	}
	if n := len(srv.Bulks()); n != 1 {
		t.Errorf("%d bulk requests, want 1: a rejected item is not retried", n)
	}
}

func TestRequestTooLargeIsSplit(t *testing.T) {
	s, srv := newFake(t, Options{StoreBody: true, BatchSize: 100})
	srv.SetMaxRequestBytes(50 << 10)
	const huge = "http://example.com/huge"
	for i := range 8 {
		put(t, s, fmt.Sprintf("http://example.com/%d", i), "", "small")
		if i == 4 {
			put(t, s, huge, "", strings.Repeat("h", 100<<10))
		}
	}
	err := s.Close(t.Context())
	if !errclass.IsPermanent(err) {
		t.Errorf("Close = %v, want permanent", err)
	}
	if failed := s.Failed(); len(failed) != 1 || failed[0].URI != huge {
		t.Errorf("Failed() = %+v, want the huge put alone", failed)
	}
	if n := len(srv.Docs("res")); n != 8 {
		t.Errorf("%d resource documents, want the 8 small ones", n)
	}
	if n := len(srv.Docs("res-changes")); n != 9 {
		t.Errorf("%d change documents, want 9", n)
	}
}

func TestRetryWholeRequest(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusBadGateway} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			s, srv := newFake(t, Options{Retries: 3})
			srv.FailBulk(status, status)
			put(t, s, "http://example.com/a", "", "x")
			if err := s.Close(t.Context()); err != nil {
				t.Fatalf("Close = %v, want nil after retries", err)
			}
			if n := len(srv.Bulks()); n != 3 {
				t.Errorf("%d bulk requests, want 3", n)
			}
			if _, ok := srv.Doc("res", "http://example.com/a"); !ok {
				t.Error("not indexed after retries")
			}
		})
	}
}

func TestRetryItems(t *testing.T) {
	s, srv := newFake(t, Options{Retries: 3, BatchSize: 100})
	var mu sync.Mutex
	attempts := map[string]int{}
	srv.SetItemFault(func(it estest.Item) int {
		mu.Lock()
		defer mu.Unlock()
		attempts[it.ID]++
		switch {
		case it.ID == "http://example.com/busy" && attempts[it.ID] <= 2:
			return http.StatusTooManyRequests
		case it.ID == "http://example.com/down" && attempts[it.ID] == 1:
			return http.StatusServiceUnavailable
		}
		return 0
	})
	for _, uri := range []string{"http://example.com/ok", "http://example.com/busy", "http://example.com/down"} {
		put(t, s, uri, "", "x")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	bulks := srv.Bulks()
	if len(bulks) != 3 || bulks[0].Actions != 6 || bulks[1].Actions != 2 || bulks[2].Actions != 1 {
		t.Errorf("bulk requests %+v, want 6 actions, then the 2 failed items, then 1", bulks)
	}
	if attempts["http://example.com/ok"] != 1 {
		t.Errorf("a successful item was sent %d times", attempts["http://example.com/ok"])
	}
	if n := len(srv.Docs("res")); n != 3 {
		t.Errorf("%d documents, want 3", n)
	}
}

func TestRetriesExhausted(t *testing.T) {
	s, srv := newFake(t, Options{Retries: 2, BatchSize: 2})
	srv.FailBulk(503, 503, 503)
	// This Put fills the batch, which it sends: the failure is its own.
	err := s.Put(t.Context(), &sink.Resource{URI: "http://example.com/a"}, strings.NewReader("x"))
	if !errclass.IsRetryable(err) || !strings.Contains(err.Error(), "2 queued actions were not applied") {
		t.Errorf("the Put whose flush failed = %v, want the flush's retryable error", err)
	}
	if err := s.Delete(t.Context(), "http://example.com/b"); err != nil {
		t.Errorf("the next call = %v, want nil: the error is returned once", err)
	}
	failed := s.Failed()
	if len(failed) != 2 || !errclass.IsRetryable(failed[0].Err) {
		t.Errorf("Failed() = %+v, want the put and its change, retryable", failed)
	}
	if err := s.Close(t.Context()); !errclass.IsRetryable(err) {
		t.Errorf("Close = %v, want retryable", err)
	}
	if n := len(srv.Bulks()); n != 4 {
		t.Errorf("%d bulk requests, want 3 failed + 1", n)
	}
}

func TestUnauthorizedMidRunIsFatal(t *testing.T) {
	s, srv := newFake(t, Options{BatchSize: 2})
	srv.FailBulk(http.StatusUnauthorized)
	if err := s.Put(t.Context(), &sink.Resource{URI: "http://example.com/a"}, strings.NewReader("x")); !errclass.IsFatal(err) {
		t.Errorf("the Put whose flush got a 401: %v, want fatal", err)
	}
	for range 2 {
		if err := s.Delete(t.Context(), "http://example.com/a"); !errclass.IsFatal(err) {
			t.Errorf("after a 401: %v, want fatal", err)
		}
	}
	if _, err := s.Get(t.Context(), "http://example.com/a"); !errclass.IsFatal(err) {
		t.Errorf("Get after a 401: %v, want fatal", err)
	}
	if err := s.Close(t.Context()); !errclass.IsFatal(err) {
		t.Errorf("Close = %v, want fatal", err)
	}
}

func TestBodyTooLarge(t *testing.T) {
	s, _ := newFake(t, Options{StoreBody: true, MaxBody: 100})
	err := s.Put(t.Context(), &sink.Resource{URI: "http://example.com/big", Length: -1}, strings.NewReader(strings.Repeat("x", 101)))
	if !errclass.IsPermanent(err) {
		t.Errorf("Put of a body over MaxBody = %v, want permanent", err)
	}
	put(t, s, "http://example.com/fits", "", strings.Repeat("x", 100))
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestGetWithoutStoredBody(t *testing.T) {
	s, _ := newFake(t, Options{})
	put(t, s, "http://example.com/a", "", "x")
	_, err := s.Get(t.Context(), "http://example.com/a")
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Get = %v, want ErrUnsupported", err)
	}
	if _, err := s.Get(t.Context(), "http://example.com/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a missing URI = %v, want ErrNotExist", err)
	}
	var uris []string
	if err := s.Walk(t.Context(), func(uri string) error { uris = append(uris, uri); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(uris) != "[http://example.com/a]" {
		t.Errorf("Walk = %v", uris)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestWalkPages(t *testing.T) {
	s, _ := newFake(t, Options{BatchSize: 1000})
	const n = 2*walkPage + 3
	for i := range n {
		put(t, s, fmt.Sprintf("http://example.com/%05d", i), "", "")
	}
	seen := map[string]bool{}
	err := s.Walk(t.Context(), func(uri string) error {
		if seen[uri] {
			t.Errorf("%s reported twice", uri)
		}
		seen[uri] = true
		return nil
	})
	if err != nil || len(seen) != n {
		t.Errorf("Walk = %v after %d URIs, want nil after %d", err, len(seen), n)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenUnreachableIsFatal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = Open(t.Context(), "http://"+addr+"/idx")
	if !errclass.IsFatal(err) || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("Open of a closed port = %v, want a fatal 'unreachable' error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Open took %v to fail", d)
	}
}

func TestOpenNotElasticsearch(t *testing.T) {
	srv := estest.New(t)
	_, err := Open(t.Context(), srv.URL+"/_bulk/idx")
	if !errclass.IsFatal(err) {
		t.Errorf("Open = %v, want fatal", err)
	}
}

func TestOpenSpec(t *testing.T) {
	srv := estest.New(t)
	s, err := Open(t.Context(), srv.URL+"/res?changes=log&batch=3&store_body=1&resource_set=rs&concurrency=2&retries=0&text_max=0")
	if err != nil {
		t.Fatal(err)
	}
	es := s.(*ES)
	o := es.opts
	if o.Index != "res" || o.ChangesIndex != "log" || o.BatchSize != 3 || !o.StoreBody ||
		o.ResourceSet != "rs" || o.Concurrency != 2 || o.Retries != 0 || o.TextMax != -1 || es.base != srv.URL {
		t.Errorf("options %+v, base %s", o, es.base)
	}
	if srv.Mapping("res") == nil || srv.Mapping("log") == nil {
		t.Error("indexes not created with a mapping")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{
		srv.URL,
		srv.URL + "/",
		srv.URL + "/res?bogus=1",
		srv.URL + "/res?batch=0",
		srv.URL + "/res?store_body=maybe",
		srv.URL + "/Upper",
		srv.URL + "/res?changes=res",
		"ftp://127.0.0.1/res",
		"http://[::1/res",
	} {
		if _, err := Open(t.Context(), arg); !errclass.IsFatal(err) {
			t.Errorf("Open(%q) = %v, want fatal", arg, err)
		}
	}
}

func TestCredentials(t *testing.T) {
	const secret = "s3cr3t-pa55"
	srv := estest.New(t)
	srv.SetAuth("elastic", secret)
	host := strings.TrimPrefix(srv.URL, "http://")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// Refused credentials: fatal at Open, without the password.
	_, err := Open(t.Context(), "http://elastic:wrong-"+secret+"@"+host+"/res")
	if !errclass.IsFatal(err) || strings.Contains(err.Error(), secret) {
		t.Errorf("Open with a wrong password = %v, want fatal and no password", err)
	}
	_, err = Open(t.Context(), "http://elastic:"+secret+"@127.0.0.1:port/res")
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Open with a malformed URL = %v, want an error without the password", err)
	}

	reg := sink.Registry{"es": Open}
	if _, err := reg.Open(t.Context(), "es:http://elastic:wrong-"+secret+"@"+host+"/res"); !errclass.IsFatal(err) || strings.Contains(err.Error(), secret) {
		t.Errorf("Registry.Open with a wrong password = %v, want fatal without the password", err)
	}

	// From the URL.
	s, err := Open(t.Context(), "http://elastic:"+secret+"@"+host+"/res")
	if err != nil {
		t.Fatalf("Open with credentials in the URL: %v", err)
	}
	es := s.(*ES)
	if strings.Contains(es.base, secret) {
		t.Errorf("base URL %s keeps the password", es.base)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	// From the environment, with a logger, through a failing run.
	t.Setenv("ES_USERNAME", "elastic")
	t.Setenv("ES_PASSWORD", secret)
	s2, err := New(t.Context(), Options{URL: srv.URL, Index: "res", Username: "elastic", Password: secret,
		Logger: logger, RetryWait: time.Millisecond, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv.FailBulk(503, 503)
	put(t, s2, "http://example.com/a", "", "x")
	err = s2.Close(t.Context())
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Close = %v, want an error without the password", err)
	}
	s3, err := Open(t.Context(), srv.URL+"/res")
	if err != nil {
		t.Fatalf("Open with ES_USERNAME/ES_PASSWORD: %v", err)
	}
	_ = s3.Close(t.Context())
	if logs.Len() == 0 {
		t.Error("nothing logged")
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log shows the password:\n%s", logs.String())
	}
}

func TestUseAfterClose(t *testing.T) {
	s, _ := newFake(t, Options{})
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), &sink.Resource{URI: "x"}, strings.NewReader("")); err == nil {
		t.Error("Put after Close succeeded")
	}
	if err := s.Close(t.Context()); err == nil {
		t.Error("second Close succeeded")
	}
}

func TestFlushSurvivesCallerCancel(t *testing.T) {
	s, srv := newFake(t, Options{BatchSize: 4})
	put(t, s, "http://example.com/a", "", "x")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The Put of b fills the batch; its ctx ends while the server handles
	// the request, which must not be cut: it holds a's actions too.
	srv.SetItemFault(func(estest.Item) int {
		cancel()
		return 0
	})
	if err := s.Put(ctx, &sink.Resource{URI: "http://example.com/b", Length: 1}, strings.NewReader("y")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Docs("res")); n != 2 {
		t.Errorf("%d documents, want 2", n)
	}
}
