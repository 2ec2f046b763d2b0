package sink_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

// flaky is a sink whose first fails calls fail with err; it records the
// bodies it read and how many calls ran at once.
type flaky struct {
	fails    int
	err      error
	retrier  bool
	calls    atomic.Int32
	inFlight atomic.Int32
	most     atomic.Int32
	mu       sync.Mutex
	bodies   []string
	gate     chan struct{}
}

func (f *flaky) enter() func() {
	n := f.inFlight.Add(1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	if f.gate != nil {
		<-f.gate
	}
	return func() { f.inFlight.Add(-1) }
}

func (f *flaky) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	defer f.enter()()
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, string(b))
	f.mu.Unlock()
	if int(f.calls.Add(1)) <= f.fails {
		return f.err
	}
	return nil
}

func (f *flaky) Delete(ctx context.Context, uri string) error {
	defer f.enter()()
	if int(f.calls.Add(1)) <= f.fails {
		return f.err
	}
	return nil
}

func (f *flaky) Close(context.Context) error { return nil }

func (f *flaky) RetriesRequests() bool { return f.retrier }

// failingBody fails its read.
type failingBody struct{ err error }

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }

// TestWithRetry checks the one retry layer around sinks: what is
// retried, how often, and what is left alone.
func TestWithRetry(t *testing.T) {
	temp := errclass.Retryablef("503")
	perm := errclass.Permanentf("400")
	for _, tc := range []struct {
		name      string
		f         *flaky
		body      func() io.Reader
		retries   int
		wantCalls int32
		wantErr   error
	}{
		{"a temporary failure is retried", &flaky{fails: 2, err: temp}, seekable, 3, 3, nil},
		{"until the retries run out", &flaky{fails: 9, err: temp}, seekable, 2, 3, temp},
		{"an unclassified failure is temporary", &flaky{fails: 1, err: errors.New("reset")}, seekable, 3, 2, nil},
		{"a permanent failure is not retried", &flaky{fails: 1, err: perm}, seekable, 3, 1, perm},
		{"a body that cannot be read again is not", &flaky{fails: 1, err: temp}, oneShot, 3, 1, temp},
		{"a sink that retries itself is not retried again", &flaky{fails: 1, err: temp, retrier: true}, seekable, 3, 1, temp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sink.WithRetry(tc.f, sink.RetryPolicy{Retries: tc.retries, Backoff: 1})
			err := s.Put(context.Background(), &sink.Resource{URI: "u"}, tc.body())
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Put = %v, want %v", err, tc.wantErr)
			}
			if got := tc.f.calls.Load(); got != tc.wantCalls {
				t.Fatalf("%d calls, want %d", got, tc.wantCalls)
			}
			for i, b := range tc.f.bodies {
				if b != "body" {
					t.Fatalf("try %d read %q: the body was not read again from its start", i+1, b)
				}
			}
			tc.f.calls.Store(0)
			err = s.Delete(context.Background(), "u")
			if tc.name == "a body that cannot be read again is not" {
				return // Delete has no body: retried as the first case
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Delete = %v, want %v", err, tc.wantErr)
			}
		})
	}
	t.Run("a body's own failure is not the sink's to retry", func(t *testing.T) {
		f := &flaky{}
		bodyErr := errclass.Retryablef("connection reset by the source")
		err := sink.WithRetry(f, sink.RetryPolicy{Retries: 3, Backoff: 1}).Put(context.Background(), &sink.Resource{URI: "u"}, failingBody{bodyErr})
		if !errors.Is(err, bodyErr) || f.inFlight.Load() != 0 || f.most.Load() != 1 {
			t.Fatalf("Put = %v after %d calls, want the body's error after one", err, f.most.Load())
		}
	})
}

// TestWithLimit checks that no more calls than the limit run at once.
func TestWithLimit(t *testing.T) {
	f := &flaky{gate: make(chan struct{})}
	s := sink.WithLimit(f, 2)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			if i%2 == 0 {
				s.Put(context.Background(), &sink.Resource{URI: "u"}, strings.NewReader("body"))
			} else {
				s.Delete(context.Background(), "u")
			}
		})
	}
	for left := 6; left > 0; left-- {
		// Release one call once as many as may run are running.
		for f.inFlight.Load() < int32(min(2, left)) {
			runtime.Gosched()
		}
		f.gate <- struct{}{}
	}
	wg.Wait()
	if m := f.most.Load(); m != 2 {
		t.Fatalf("at most %d calls at once, want 2", m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f2 := &flaky{gate: make(chan struct{})}
	s2 := sink.WithLimit(f2, 1)
	go s2.Delete(context.Background(), "held") // takes the one slot
	for f2.inFlight.Load() == 0 {
		runtime.Gosched() // until the slot is taken
	}
	if err := s2.Put(ctx, &sink.Resource{URI: "u"}, strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put waiting for a slot with its context ended = %v", err)
	}
	f2.gate <- struct{}{}
}

func seekable() io.Reader { return bytes.NewReader([]byte("body")) }

func oneShot() io.Reader { return io.MultiReader(strings.NewReader("body")) }
