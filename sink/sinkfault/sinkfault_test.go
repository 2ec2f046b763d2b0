package sinkfault

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

func newFS(t *testing.T) *fs.FS {
	t.Helper()
	s, err := fs.New(filepath.Join(t.TempDir(), "mirror"), fs.Options{Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance: without faults the wrapper is the sink it wraps.
func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink { return New(newFS(t), Options{}) })
}

func res(uri, body string) *sink.Resource {
	return &sink.Resource{URI: uri, Length: int64(len(body))}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestFaults runs a sequence of calls through each kind of fault and checks
// which fail, with what class, and whether the body was read.
func TestFaults(t *testing.T) {
	temp, perm := Temporary("503 slow down"), Permanent("403 access denied")
	type call struct {
		op   Op
		uri  string
		want errclass.Class // Unclassified: success
		gone bool
	}
	put := func(uri string, want errclass.Class) call { return call{op: OpPut, uri: uri, want: want} }
	gone := func(op Op, uri string) call { return call{op: op, uri: uri, want: errclass.Retryable, gone: true} }
	ok := errclass.Unclassified
	tests := []struct {
		name  string
		opts  Options
		calls []call
	}{
		{"no faults", Options{}, []call{put("u:a", ok), put("u:b", ok), {op: OpDelete, uri: "u:a"}}},
		{"nth call", Options{Rules: []Rule{FailNth(2, temp)}}, []call{put("u:a", ok), put("u:b", errclass.Retryable), put("u:b", ok)}},
		{"every 2nd call", Options{Rules: []Rule{FailEvery(2, perm)}}, []call{put("u:a", ok), put("u:b", errclass.Permanent), put("u:c", ok), put("u:d", errclass.Permanent)}},
		{"first 2 calls of each URI", Options{Rules: []Rule{FailFirst(2, temp)}}, []call{
			put("u:a", errclass.Retryable), put("u:b", errclass.Retryable), put("u:a", errclass.Retryable), put("u:a", ok), put("u:b", errclass.Retryable), put("u:b", ok)}},
		{"matching URIs", Options{Rules: []Rule{FailURIs(func(u string) bool { return strings.HasSuffix(u, "bad") }, perm)}}, []call{
			put("u:bad", errclass.Permanent), put("u:good", ok), put("u:bad", errclass.Permanent), {op: OpDelete, uri: "u:bad", want: errclass.Permanent}}},
		{"puts only", Options{Rules: []Rule{Only(OpPut, FailEvery(1, temp))}}, []call{put("u:a", errclass.Retryable), {op: OpDelete, uri: "u:a"}}},
		{"deletes only", Options{Rules: []Rule{Only(OpDelete, FailEvery(1, temp))}}, []call{put("u:a", ok), {op: OpDelete, uri: "u:a", want: errclass.Retryable}}},
		{"first rule wins", Options{Rules: []Rule{FailNth(1, perm), FailEvery(1, temp)}}, []call{put("u:a", errclass.Permanent), put("u:a", errclass.Retryable)}},
		{"gone after 2 calls", Options{GoneAfterCalls: 2}, []call{put("u:a", ok), {op: OpDelete, uri: "u:a"}, gone(OpPut, "u:b"), gone(OpDelete, "u:b")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s := New(newFS(t), tt.opts)
			defer s.Close(ctx)
			wantWritten, wantFaults, wantGone := 0, 0, 0
			for i, c := range tt.calls {
				body := &countingReader{r: strings.NewReader("body of " + c.uri)}
				var err error
				if c.op == OpPut {
					err = s.Put(ctx, res(c.uri, "body of "+c.uri), body)
				} else {
					err = s.Delete(ctx, c.uri)
				}
				switch {
				case c.want == ok && err != nil:
					t.Fatalf("call %d (%s %s): %v", i+1, c.op, c.uri, err)
				case c.want != ok && errclass.Of(err) != c.want:
					t.Fatalf("call %d (%s %s): error %v of class %v, want %v", i+1, c.op, c.uri, err, errclass.Of(err), c.want)
				case c.gone != errors.Is(err, ErrGone):
					t.Fatalf("call %d (%s %s): error %v, gone %v", i+1, c.op, c.uri, err, c.gone)
				case c.gone && !errors.Is(err, syscall.ECONNREFUSED):
					t.Fatalf("call %d: a gone sink's error %v is no refused connection", i+1, err)
				}
				switch {
				case c.gone:
					wantGone++
					if body.n != 0 {
						t.Errorf("call %d: a gone sink read %d bytes of the body", i+1, body.n)
					}
				case c.want != ok:
					wantFaults++
					if c.op == OpPut && body.n != len("body of "+c.uri) {
						t.Errorf("call %d: a faulted put read %d bytes of the body, want all", i+1, body.n)
					}
				case c.op == OpPut:
					wantWritten++
				}
			}
			st := s.Stats()
			if st.Written != wantWritten || st.Faults != wantFaults || st.GoneFailures != wantGone || st.Puts+st.Deletes != len(tt.calls) {
				t.Errorf("stats %+v; want %d written, %d faults, %d gone, %d calls", st, wantWritten, wantFaults, wantGone, len(tt.calls))
			}
		})
	}
}

func TestGoneAfterAndReappear(t *testing.T) {
	ctx := t.Context()
	s := New(newFS(t), Options{GoneAfter: 50 * time.Millisecond})
	if err := s.Put(ctx, res("u:a", "a"), strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if err := s.Put(ctx, res("u:b", "b"), strings.NewReader("b")); !errors.Is(err, ErrGone) || !s.Gone() {
		t.Fatalf("put after GoneAfter: %v", err)
	}
	s.Reappear()
	if err := s.Put(ctx, res("u:b", "b"), strings.NewReader("b")); err != nil {
		t.Fatalf("put after Reappear: %v", err)
	}
	s.Disappear()
	if err := s.Delete(ctx, "u:b"); !errors.Is(err, ErrGone) {
		t.Fatalf("delete after Disappear: %v", err)
	}
	// The Inventory is never faulted.
	rc, err := s.Get(ctx, "u:b")
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if s.Calls(OpPut, "u:b") != 2 || s.Calls(OpDelete, "u:b") != 1 {
		t.Errorf("calls of u:b: %d puts, %d deletes", s.Calls(OpPut, "u:b"), s.Calls(OpDelete, "u:b"))
	}
}

// TestLatencyAndInFlight: the latency delays each call, a ctx that ends
// during it fails the call (retryable), and MaxInFlight sees concurrent
// calls.
func TestLatencyAndInFlight(t *testing.T) {
	ctx := t.Context()
	s := New(newFS(t), Options{Latency: 30 * time.Millisecond, Concurrency: 2})
	if s.Concurrency() != 2 {
		t.Fatalf("Concurrency %d", s.Concurrency())
	}
	if New(newFS(t), Options{}).Concurrency() != 3 {
		t.Fatal("the wrapped sink's Concurrency is not reported")
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, u := range []string{"u:a", "u:b", "u:c"} {
		wg.Go(func() {
			if err := s.Put(ctx, res(u, u), strings.NewReader(u)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("three puts with 30 ms latency took %v", d)
	}
	if st := s.Stats(); st.MaxInFlight < 2 || st.MaxInFlight > 3 {
		t.Errorf("MaxInFlight %d, want 2 or 3 (three concurrent calls, each 30 ms)", st.MaxInFlight)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	if err := s.Put(cctx, res("u:d", "d"), strings.NewReader("d")); !errclass.IsRetryable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put whose ctx ends during the latency: %v", err)
	}
}
