// Package sinktest is the conformance suite every sink.Sink implementation
// runs from its tests: round trips of empty, small and large streamed
// bodies, overwrite, atomic Put under body errors, fixity errors and
// cancellation, Delete, odd URIs (see OddURIs), concurrency, and Close.
//
// The suite reads the sink back through sink.Inventory, so every sink under
// test must implement it.
package sinktest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/sink"
)

// Run runs the conformance suite as subtests of t. open is called once per
// subtest and must return a new, empty sink that also implements
// sink.Inventory (Run fails the test if not). Run closes every sink it
// opens, once; open must not close it, but may register other cleanup with
// t.Cleanup. When the sink implements sink.Limiter, Run never has more than
// Concurrency() writes in flight.
func Run(t *testing.T, open func(t *testing.T) sink.Sink) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"AtomicPut", testAtomicPut},
		{"Delete", testDelete},
		{"GetMissing", testGetMissing},
		{"WalkStops", testWalkStops},
		{"OddURIs", testOddURIs},
		{"Concurrent", testConcurrent},
		{"Close", testClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newHarness(t, open))
		})
	}
}

// harness wraps the sink under test with checking helpers.
type harness struct {
	s      sink.Sink
	inv    sink.Inventory
	closed bool
}

func newHarness(t *testing.T, open func(t *testing.T) sink.Sink) *harness {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatal("open returned a nil sink")
	}
	inv, ok := s.(sink.Inventory)
	if !ok {
		t.Fatalf("%T does not implement sink.Inventory", s)
	}
	h := &harness{s: s, inv: inv}
	t.Cleanup(func() {
		if !h.closed {
			if err := s.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	return h
}

// put stores body under uri and fails the test on error.
func (h *harness) put(t *testing.T, uri, body string) {
	t.Helper()
	r := &sink.Resource{URI: uri, Length: int64(len(body))}
	src := &eofReader{r: strings.NewReader(body)}
	if err := h.s.Put(t.Context(), r, src); err != nil {
		t.Fatalf("Put(%s): %v", short(uri), err)
	}
	if !src.eof {
		t.Fatalf("Put(%s) returned before reading the body to io.EOF", short(uri))
	}
}

// get returns the held body of uri, and whether it is held.
func (h *harness) get(t *testing.T, uri string) (string, bool) {
	t.Helper()
	rc, err := h.inv.Get(t.Context(), uri)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatalf("Get(%s): %v", short(uri), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%s): reading: %v", short(uri), err)
	}
	return string(b), true
}

// walk returns every URI Walk reports, sorted, duplicates kept.
func (h *harness) walk(t *testing.T) []string {
	t.Helper()
	var got []string
	err := h.inv.Walk(t.Context(), func(uri string) error {
		got = append(got, uri)
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	slices.Sort(got)
	return got
}

// wantState checks that the sink holds exactly want (URI → body): Walk
// reports each of its URIs once and nothing else, and Get returns each body.
func (h *harness) wantState(t *testing.T, want map[string]string) {
	t.Helper()
	wantURIs := make([]string, 0, len(want))
	for uri := range want {
		wantURIs = append(wantURIs, uri)
	}
	slices.Sort(wantURIs)
	if got := h.walk(t); !slices.Equal(got, wantURIs) {
		t.Errorf("Walk reported %d URIs, want %d:\n%s", len(got), len(wantURIs), diff(got, wantURIs))
	}
	for _, uri := range wantURIs {
		got, ok := h.get(t, uri)
		switch {
		case !ok:
			t.Errorf("Get(%s): not held", short(uri))
		case got != want[uri]:
			t.Errorf("Get(%s) = %s, want %s", short(uri), short(got), short(want[uri]))
		}
	}
}

// wantAbsent checks that Get reports uri as not held.
func (h *harness) wantAbsent(t *testing.T, uri string) {
	t.Helper()
	if got, ok := h.get(t, uri); ok {
		t.Errorf("Get(%s) = %s, want fs.ErrNotExist", short(uri), short(got))
	}
}

func testRoundTrip(t *testing.T, h *harness) {
	const big = 6<<20 + 7 // several MB, not a multiple of any buffer size
	tests := []struct {
		name   string
		uri    string
		size   int64
		length int64 // as published; -1 unknown
	}{
		{"empty", "http://example.com/rt/empty", 0, 0},
		{"one byte", "http://example.com/rt/one", 1, 1},
		{"64 KiB unknown length", "http://example.com/rt/unknown", 64 << 10, -1},
		{"several MB streamed", "http://example.com/rt/big.bin", big, big},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &eofReader{r: genReader(uint64(i), tt.size)}
			r := &sink.Resource{URI: tt.uri, Length: tt.length, Type: "application/octet-stream",
				Lastmod: time.Date(2013, 1, 2, 13, 0, 0, 0, time.UTC)}
			if err := h.s.Put(t.Context(), r, src); err != nil {
				t.Fatalf("Put: %v", err)
			}
			if !src.eof {
				t.Fatal("Put returned before reading the body to io.EOF")
			}
			rc, err := h.inv.Get(t.Context(), tt.uri)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			defer rc.Close()
			gotSum, gotN := digest(t, rc)
			wantSum, _ := digest(t, genReader(uint64(i), tt.size))
			if gotN != tt.size || gotSum != wantSum {
				t.Fatalf("Get returned %d bytes (sha-256 %x), want %d bytes (%x)", gotN, gotSum, tt.size, wantSum)
			}
		})
	}
	h.wantURIs(t, "http://example.com/rt/big.bin", "http://example.com/rt/empty",
		"http://example.com/rt/one", "http://example.com/rt/unknown")
}

// wantURIs checks that Walk reports exactly uris (sorted), without bodies.
func (h *harness) wantURIs(t *testing.T, uris ...string) {
	t.Helper()
	if got := h.walk(t); !slices.Equal(got, uris) {
		t.Errorf("Walk:\n%s", diff(got, uris))
	}
}

func testOverwrite(t *testing.T, h *harness) {
	const uri = "http://example.com/over/write.txt"
	long := strings.Repeat("first version, long. ", 20000)
	h.put(t, uri, long)
	h.wantState(t, map[string]string{uri: long})
	h.put(t, uri, "second")
	h.wantState(t, map[string]string{uri: "second"})
	h.put(t, uri, "")
	h.wantState(t, map[string]string{uri: ""})
	h.put(t, uri, "third")
	h.wantState(t, map[string]string{uri: "third"})
}

var errBody = errors.New("sinktest: body failed")

func testAtomicPut(t *testing.T, h *harness) {
	const size = 3<<20 + 11
	bodies := []struct {
		name string
		// body returns the body to Put and the error Put must wrap.
		body func(cancel context.CancelFunc) (io.Reader, error)
	}{
		{"fails before any data", func(context.CancelFunc) (io.Reader, error) {
			return &failReader{r: genReader(1, size), after: 0, err: errBody}, errBody
		}},
		{"fails midway", func(context.CancelFunc) (io.Reader, error) {
			return &failReader{r: genReader(1, size), after: size / 2, err: errBody}, errBody
		}},
		{"fixity error instead of EOF", func(context.CancelFunc) (io.Reader, error) {
			return &failReader{r: genReader(1, size), after: size, err: errBody}, errBody
		}},
		{"fixity error with the last data", func(context.CancelFunc) (io.Reader, error) {
			return &lastReadErrReader{r: genReader(1, size), left: size, err: errBody}, errBody
		}},
		{"ctx cancelled midway", func(cancel context.CancelFunc) (io.Reader, error) {
			return &cancelReader{r: genReader(1, size), after: size / 3, cancel: cancel}, context.Canceled
		}},
		{"ctx cancelled at the end", func(cancel context.CancelFunc) (io.Reader, error) {
			return &cancelReader{r: genReader(1, size), after: size, cancel: cancel}, context.Canceled
		}},
		{"ctx cancelled before Put", func(cancel context.CancelFunc) (io.Reader, error) {
			cancel()
			return genReader(1, size), context.Canceled
		}},
	}
	for i, b := range bodies {
		for _, previous := range []bool{false, true} {
			name := b.name + "/new"
			if previous {
				name = b.name + "/over previous"
			}
			t.Run(name, func(t *testing.T) {
				uri := fmt.Sprintf("http://example.com/atomic/%d/%t/r.bin", i, previous)
				want := map[string]string{}
				if previous {
					h.put(t, uri, "previous version")
					want[uri] = "previous version"
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				body, wantErr := b.body(cancel)
				err := h.s.Put(ctx, &sink.Resource{URI: uri, Length: size}, body)
				if err == nil {
					t.Fatal("Put succeeded, want an error")
				}
				if !errors.Is(err, wantErr) {
					t.Errorf("Put error %q does not wrap %q", err, wantErr)
				}
				if !previous {
					h.wantAbsent(t, uri)
				}
				h.wantState(t, want)
				if previous {
					h.mustDelete(t, uri)
				}
			})
		}
	}
}

func (h *harness) mustDelete(t *testing.T, uri string) {
	t.Helper()
	if err := h.s.Delete(t.Context(), uri); err != nil {
		t.Fatalf("Delete(%s): %v", short(uri), err)
	}
}

func testDelete(t *testing.T, h *harness) {
	const (
		a    = "http://example.com/del/a"
		ab   = "http://example.com/del/a/b"
		abc  = "http://example.com/del/a/b/c"
		sibl = "http://example.com/del/a/sibling"
	)
	for _, uri := range []string{a, ab, abc, sibl} {
		h.put(t, uri, "body of "+uri)
	}
	h.mustDelete(t, abc)
	h.wantState(t, map[string]string{a: "body of " + a, ab: "body of " + ab, sibl: "body of " + sibl})
	h.mustDelete(t, a)
	h.wantState(t, map[string]string{ab: "body of " + ab, sibl: "body of " + sibl})
	h.mustDelete(t, ab)
	h.wantState(t, map[string]string{sibl: "body of " + sibl})
	h.mustDelete(t, sibl)
	h.wantState(t, map[string]string{})

	tests := []struct{ name, uri string }{
		{"deleted twice", sibl},
		{"never held", "http://example.com/del/never"},
		{"under a never-held hierarchy", "http://nowhere.example/x/y/z"},
		{"not a URL", "urn:never:held"},
		{"empty string", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := h.s.Delete(t.Context(), tt.uri); err != nil {
				t.Errorf("Delete(%s) = %v, want nil", short(tt.uri), err)
			}
		})
	}
	// The hierarchy is usable again after everything in it was deleted.
	h.put(t, abc, "again")
	h.wantState(t, map[string]string{abc: "again"})
}

func testGetMissing(t *testing.T, h *harness) {
	h.put(t, "http://example.com/held/a", "x")
	for _, uri := range []string{
		"http://example.com/held/b",
		"http://example.com/held",
		"http://example.com/held/",
		"http://example.com/held/a/",
		"http://example.com/held/a/b",
		"http://example.com/",
		"",
	} {
		rc, err := h.inv.Get(t.Context(), uri)
		if err == nil {
			rc.Close()
			t.Errorf("Get(%s) succeeded for a URI not held", short(uri))
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Get(%s) error %q does not wrap fs.ErrNotExist", short(uri), err)
		}
	}
}

func testWalkStops(t *testing.T, h *harness) {
	for i := range 3 {
		h.put(t, fmt.Sprintf("http://example.com/walk/%d", i), "x")
	}
	stop := errors.New("sinktest: stop")
	calls := 0
	err := h.inv.Walk(t.Context(), func(string) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("Walk = %v, want the callback's error", err)
	}
	if calls != 1 {
		t.Errorf("callback called %d times after returning an error, want 1", calls)
	}
}

func testOddURIs(t *testing.T, h *harness) {
	uris := OddURIs()
	want := make(map[string]string, len(uris))
	for i, uri := range uris {
		body := strconv.Itoa(i) + ":" + strconv.Quote(uri)
		want[uri] = body
		h.put(t, uri, body)
	}
	h.wantState(t, want)
	// Deleting each one leaves the others intact; start with the shortest
	// so that prefixes go before the URIs they are prefixes of.
	slices.SortFunc(uris, func(a, b string) int { return len(a) - len(b) })
	for i, uri := range uris {
		h.mustDelete(t, uri)
		delete(want, uri)
		if i%16 == 0 {
			h.wantState(t, want)
		}
	}
	h.wantState(t, want)
}

func testConcurrent(t *testing.T, h *harness) {
	const (
		workers = 16
		rounds  = 30
	)
	shared := []string{
		"http://example.com/conc/shared/0",
		"http://example.com/conc/shared/1",
		"http://example.com/conc/shared/1/deeper",
	}
	slots := workers
	if l, ok := h.s.(sink.Limiter); ok {
		slots = max(1, min(slots, l.Concurrency()))
	}
	sem := make(chan struct{}, slots)
	do := func(op func() error) error {
		sem <- struct{}{}
		defer func() { <-sem }()
		return op()
	}
	put := func(t *testing.T, uri string, w, i int) error {
		body := &chunkReader{r: strings.NewReader(concBody(w, i)), chunk: 4 << 10}
		return do(func() error {
			return h.s.Put(t.Context(), &sink.Resource{URI: uri, Length: int64(body.r.Len())}, body)
		})
	}
	del := func(t *testing.T, uri string) error {
		return do(func() error { return h.s.Delete(t.Context(), uri) })
	}

	// own[w] is written by worker w alone; its final state is known. The
	// own URIs share one directory, so deletes prune it under others' puts.
	own := func(w int) string { return fmt.Sprintf("http://example.com/conc/own/w%02d", w) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				var err error
				if i%3 == 2 {
					err = del(t, own(w))
				} else {
					err = put(t, own(w), w, i)
				}
				if err != nil {
					t.Errorf("worker %d round %d: own: %v", w, i, err)
					return
				}
				uri := shared[(w+i)%len(shared)]
				if (w+i)%4 == 3 {
					err = del(t, uri)
				} else {
					err = put(t, uri, w, i)
				}
				if err != nil {
					t.Errorf("worker %d round %d: shared: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	held := h.walk(t)
	want := map[string]bool{}
	for w := range workers {
		// The last round, rounds-1, is a delete when (rounds-1)%3 == 2.
		if (rounds-1)%3 != 2 {
			want[own(w)] = true
		}
		got, ok := h.get(t, own(w))
		switch {
		case ok != want[own(w)]:
			t.Errorf("%s held = %t, want %t", own(w), ok, want[own(w)])
		case ok && got != concBody(w, rounds-1):
			t.Errorf("%s = %s, want the body of the last round", own(w), short(got))
		}
	}
	for _, uri := range shared {
		got, ok := h.get(t, uri)
		if ok {
			want[uri] = true
			if !validConcBody(got) {
				t.Errorf("%s holds a torn or foreign body %s", uri, short(got))
			}
		}
	}
	var wantURIs []string
	for uri := range want {
		wantURIs = append(wantURIs, uri)
	}
	slices.Sort(wantURIs)
	if !slices.Equal(held, wantURIs) {
		t.Errorf("Walk disagrees with Get:\n%s", diff(held, wantURIs))
	}
}

// concBody is the body worker w puts in round i: a header naming both,
// repeated so that it spans several reads.
func concBody(w, i int) string {
	return strings.Repeat(fmt.Sprintf("<w%02d-r%03d>", w, i), 3000)
}

// validConcBody reports whether s is concBody(w, i) for some w and i.
func validConcBody(s string) bool {
	if len(s) < len("<w00-r000>") {
		return false
	}
	w, err1 := strconv.Atoi(s[2:4])
	i, err2 := strconv.Atoi(s[6:9])
	return err1 == nil && err2 == nil && s == concBody(w, i)
}

func testClose(t *testing.T, h *harness) {
	h.put(t, "http://example.com/close/a", "a")
	h.mustDelete(t, "http://example.com/close/a")
	h.put(t, "http://example.com/close/b", "b")
	h.closed = true
	if err := h.s.Close(t.Context()); err != nil {
		t.Errorf("Close after use = %v, want nil", err)
	}
}

// genReader returns size deterministic pseudo-random bytes for seed,
// generated as they are read.
func genReader(seed uint64, size int64) io.Reader {
	var key [32]byte
	key[0] = byte(seed)
	return io.LimitReader(rand.NewChaCha8(key), size)
}

func digest(t *testing.T, r io.Reader) ([sha256.Size]byte, int64) {
	t.Helper()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	return [sha256.Size]byte(h.Sum(nil)), n
}

// eofReader records whether its reader returned io.EOF.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

// failReader passes on the first after bytes of r, then returns err.
type failReader struct {
	r     io.Reader
	after int64
	err   error
}

func (f *failReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, f.err
	}
	if int64(len(p)) > f.after {
		p = p[:f.after]
	}
	n, err := f.r.Read(p)
	f.after -= int64(n)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// lastReadErrReader passes on left bytes of r, and returns err together
// with the last of them, as a verifying reader does on a digest mismatch.
type lastReadErrReader struct {
	r    io.Reader
	left int64
	err  error
}

func (l *lastReadErrReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, l.err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := io.ReadFull(l.r, p)
	l.left -= int64(n)
	if err != nil {
		return n, err
	}
	if l.left == 0 {
		return n, l.err
	}
	return n, nil
}

// cancelReader calls cancel once after bytes have been read, and goes on
// passing r on to its end.
type cancelReader struct {
	r      io.Reader
	after  int64
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.after -= int64(n)
	if c.after <= 0 {
		c.cancel()
	}
	return n, err
}

// chunkReader returns at most chunk bytes per Read.
type chunkReader struct {
	r     *strings.Reader
	chunk int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.chunk {
		p = p[:c.chunk]
	}
	return c.r.Read(p)
}

// short quotes s for messages, cut to a readable length.
func short(s string) string {
	const shown = 120
	if len(s) > shown {
		return strconv.Quote(s[:shown]) + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// diff lists the URIs reported more often than wanted and those missing.
func diff(got, want []string) string {
	count := func(s []string) map[string]int {
		m := map[string]int{}
		for _, x := range s {
			m[x]++
		}
		return m
	}
	g, w := count(got), count(want)
	var b strings.Builder
	for _, x := range slices.Compact(slices.Clone(got)) {
		if g[x] > w[x] {
			fmt.Fprintf(&b, "  unexpected (×%d): %s\n", g[x]-w[x], short(x))
		}
	}
	for _, x := range slices.Compact(slices.Clone(want)) {
		if w[x] > g[x] {
			fmt.Fprintf(&b, "  missing: %s\n", short(x))
		}
	}
	return b.String()
}
