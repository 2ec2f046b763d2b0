package es

// Failures at the sink's edges: credentials in a mistyped spec, a write
// the credentials may not make, a failed change document, a failure
// reported once, changes stamped when sent, the request size, and reads
// within their deadline.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/es/estest"
)

// TestSchemelessSpecHidesPassword: a spec whose URL lacks "http://"
// ("es:USER:PASSWORD@HOST:PORT/INDEX", an easy slip) is refused, and
// neither sink.Redact nor Open's error shows its password.
func TestSchemelessSpecHidesPassword(t *testing.T) {
	const secret = "s3cr3t-pa55"
	spec := "elastic:" + secret + "@127.0.0.1:9200/res"
	if got := sink.Redact("es:" + spec); strings.Contains(got, secret) {
		t.Errorf("sink.Redact(%q) = %q: shows the password", "es:"+spec, got)
	}
	_, err := Open(t.Context(), spec)
	if err == nil {
		t.Fatal("Open of a spec without http:// succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("Open error shows the password: %v", err)
	}
	reg := sink.Registry{"es": Open}
	if _, err := reg.Open(t.Context(), "es:"+spec); err != nil && strings.Contains(err.Error(), secret) {
		t.Errorf("Registry.Open error shows the password: %v", err)
	}
}

// TestUnescapedPasswordHidden: a password holding "/" (base64-made
// passwords do) not percent-encoded, which a URL parser reads as a port
// and a path, is shown neither by sink.Redact nor by Open's error.
func TestUnescapedPasswordHidden(t *testing.T) {
	for _, tc := range []struct{ password, secret string }{
		{"s3cr3tpart/rest", "s3cr3tpart"},
		{"4711/s3cr3tpart", "s3cr3tpart"},
	} {
		spec := "http://elastic:" + tc.password + "@127.0.0.1:1/res"
		if got := sink.Redact("es:" + spec); strings.Contains(got, tc.secret) {
			t.Errorf("sink.Redact(%q) = %q: shows the password", "es:"+spec, got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := Open(ctx, spec)
		cancel()
		if err != nil && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("Open(%q) error shows the password: %v", spec, err)
		}
	}
}

// TestItemForbiddenIsFatal: Elasticsearch answers a bulk request whose
// user may not write an index with 200 and a 403 per item: fatal, as a
// 403 of the request is (a harvest without write permission stops rather
// than failing every resource for good).
func TestItemForbiddenIsFatal(t *testing.T) {
	s, srv := newFake(t, Options{BatchSize: 100})
	srv.SetItemFault(func(estest.Item) int { return http.StatusForbidden })
	put(t, s, "http://example.com/a", "", "x")
	failed := s.Flush(t.Context())
	if len(failed) != 1 {
		t.Fatalf("Flush = %+v, want the put of /a", failed)
	}
	if !errclass.IsFatal(failed[0].Err) {
		t.Errorf("a per-item 403 is %v (%v), want fatal as a 403 of the request is", errclass.Of(failed[0].Err), failed[0].Err)
	}
	if err := s.Put(t.Context(), &sink.Resource{URI: "http://example.com/b", Length: 1}, strings.NewReader("y")); !errclass.IsFatal(err) {
		t.Errorf("the next Put = %v, want the fatal error", err)
	}
}

// TestChangeFailureReported: a Put whose resource document is written but
// whose change document is not (retries ran out) is returned by Flush as
// that resource's failure, so the pipeline writes it again: its change is
// not lost from the change index that publish --from-es reads.
func TestChangeFailureReported(t *testing.T) {
	s, srv := newFake(t, Options{BatchSize: 100, Retries: 1})
	srv.SetItemFault(func(it estest.Item) int {
		if it.Index == "res-changes" {
			return http.StatusServiceUnavailable // retries run out
		}
		return 0
	})
	const uri = "http://example.com/a"
	put(t, s, uri, "", "x")
	failed := s.Flush(t.Context())
	if _, ok := srv.Doc("res", uri); !ok {
		t.Fatal("resource document not written")
	}
	if n := len(srv.Docs("res-changes")); n != 0 {
		t.Fatalf("%d change documents, want none (refused)", n)
	}
	if len(failed) == 0 {
		t.Errorf("Flush = no failure, while the change document of %s was not written: the pipeline records it synced and the change is lost", uri)
	}
}

// TestFlushFailureReportedOnce: a failure Flush returned is not returned
// again by the next Put, of another resource, which is queued.
func TestFlushFailureReportedOnce(t *testing.T) {
	s, srv := newFake(t, Options{BatchSize: 100, Retries: 1})
	const bad, good = "http://example.com/a", "http://example.com/b"
	srv.SetItemFault(func(it estest.Item) int {
		if it.Index == "res" && it.ID == bad {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	put(t, s, bad, "", "x")
	failed := s.Flush(t.Context())
	if len(failed) != 1 || failed[0].URI != bad {
		t.Fatalf("Flush = %+v, want the put of %s", failed, bad)
	}
	err := s.Put(t.Context(), &sink.Resource{URI: good, Length: 1}, strings.NewReader("y"))
	if err != nil {
		t.Errorf("Put(%s) after Flush reported %s = %v, want nil: %s's failure was already reported", good, bad, err, bad)
	}
	if f := s.Flush(t.Context()); len(f) != 0 {
		t.Errorf("second Flush = %+v", f)
	}
	if _, ok := srv.Doc("res", good); !ok {
		t.Errorf("%s not indexed", good)
	}
}

// TestRetriedChangeStampedWhenSent: two sinks write one index; A's request
// is refused once (503) and resent after the backoff, while B writes and
// is visible. A's change, visible after B's, is dated after it too (a
// change is stamped at each attempt): a publication made in between
// cannot leave it out of the later Change Lists.
func TestRetriedChangeStampedWhenSent(t *testing.T) {
	srv := estest.New(t)
	open := func(wait time.Duration) *ES {
		s, err := New(t.Context(), Options{URL: srv.URL, Index: "res", BatchSize: 100, Retries: 3, RetryWait: wait})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(time.Second), open(time.Millisecond)
	srv.FailBulk(http.StatusServiceUnavailable)
	put(t, a, "http://example.com/a", "", "alpha")
	done := make(chan []sink.Failed)
	go func() { done <- a.Flush(context.Background()) }()
	// A's first request has been refused: A is waiting to resend it.
	for deadline := time.Now().Add(5 * time.Second); len(srv.Bulks()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("A sent nothing")
		}
	}
	time.Sleep(5 * time.Millisecond)
	put(t, b, "http://example.com/b", "", "beta")
	if f := b.Flush(t.Context()); len(f) > 0 {
		t.Fatal(f)
	}
	if n := len(srv.Docs("res-changes")); n != 1 {
		t.Fatalf("%d change documents visible after B's flush, want B's alone (A still waits)", n)
	}
	if f := <-done; len(f) > 0 {
		t.Fatal(f)
	}
	dt := map[string]string{}
	for _, raw := range srv.Docs("res-changes") {
		var c changeDoc
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		dt[c.URI] = c.Datetime
	}
	ta, _ := time.Parse(time.RFC3339Nano, dt["http://example.com/a"])
	tb, _ := time.Parse(time.RFC3339Nano, dt["http://example.com/b"])
	if ta.Before(tb) {
		t.Errorf("A's change became visible after B's but is dated %s, before B's %s: a reader that has read up to B's misses it", dt["http://example.com/a"], dt["http://example.com/b"])
	}
}

// TestRequestWithinBatchBytes: callers that queue while a request is on
// the wire fill the queue past BatchBytes; the requests that follow still
// hold at most BatchBytes each (one action larger alone excepted).
func TestRequestWithinBatchBytes(t *testing.T) {
	const limit = 4000
	s, srv := newFake(t, Options{BatchBytes: limit, StoreBody: true, Concurrency: 8})
	release, held := make(chan struct{}), make(chan struct{})
	var once, closing sync.Once
	free := func() { closing.Do(func() { close(release) }) }
	t.Cleanup(free) // before the server's own cleanup
	srv.SetItemFault(func(estest.Item) int {
		once.Do(func() { close(held); <-release }) // hold the first bulk request
		return 0
	})
	body := strings.Repeat("x", 2500) // ~3.4 KB as a document: under the limit alone
	big := strings.Repeat("x", 3000)  // fills the batch alone
	first := make(chan error, 1)
	go func() {
		first <- s.Put(context.Background(), &sink.Resource{URI: "http://example.com/first", Length: int64(len(big))}, strings.NewReader(big))
	}()
	select { // the first batch is on the wire, held by the server
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the first batch was not sent")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &sink.Resource{URI: "http://example.com/" + string(rune('a'+i)), Length: int64(len(body))}
			errs <- s.Put(context.Background(), r, strings.NewReader(body))
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		n := len(s.pending.actions)
		s.mu.Unlock()
		if n >= 16 {
			break
		}
		if time.Now().After(deadline) {
			var ids []string
			s.mu.Lock()
			for _, a := range s.pending.actions {
				ids = append(ids, a.kind+":"+a.uri)
			}
			s.mu.Unlock()
			t.Fatalf("%d actions queued (%d bytes), want 16: %v", n, s.pending.bytes, ids)
		}
	}
	free()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, b := range srv.Bulks() {
		if b.Bytes > limit && b.Actions > 2 {
			t.Errorf("a bulk request of %d actions, %d bytes: BatchBytes is %d", b.Actions, b.Bytes, limit)
		}
	}
}

// TestGetWithinDeadline: Get first sends what is queued; while the server
// holds that request, Get returns when its caller's context ends (the
// request, which holds other callers' writes, goes on).
func TestGetWithinDeadline(t *testing.T) {
	s, srv := newFake(t, Options{StoreBody: true})
	release, held := make(chan struct{}), make(chan struct{})
	var once, freed sync.Once
	free := func() { freed.Do(func() { close(release) }) }
	t.Cleanup(free)
	srv.SetItemFault(func(estest.Item) int {
		once.Do(func() { close(held); <-release }) // the request is held
		return 0
	})
	put(t, s, "http://example.com/a", "", "x")
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, "http://example.com/b")
		got <- err
	}()
	<-held
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Get whose context ended: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Errorf("Get waited for the held request beyond its context")
	}
	free()
	if failed := s.Flush(t.Context()); len(failed) != 0 {
		t.Errorf("the queued write failed: %+v", failed)
	}
}
