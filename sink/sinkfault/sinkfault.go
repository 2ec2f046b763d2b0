// Package sinkfault wraps a sink.Sink with faults, for tests of what the
// pipeline does when a sink misbehaves: errors on chosen calls (retryable or
// permanent, as errclass classifies them, or any other error), a latency on
// every call, and a "gone" mode in which every call fails at once as if the
// sink's server had gone away (connection refused, retryable) — from a
// chosen call or moment on, or on demand.
//
// A Rule decides the fault of each Put and Delete from the call's number
// and URI. A faulted Put reads its body to the end first, like an upload
// the server refuses once it has it all, so the caller's verifying reader
// sees the whole body; a call to a gone sink reads nothing. Calls that pass
// go to the wrapped sink. The wrapper counts calls, faults and the most
// calls in flight at once (to check that a caller honours Concurrency).
package sinkfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

// ErrGone is wrapped by the error of every call to a sink that is gone
// (see Options.GoneAfterCalls, Options.GoneAfter and Sink.Disappear).
var ErrGone = errors.New("sinkfault: the sink's server went away")

// Op is the kind of a call.
type Op string

// The calls a Rule sees.
const (
	OpPut    Op = "put"
	OpDelete Op = "delete"
)

// Call describes one Put or Delete, as a Rule and Options.Before see it.
type Call struct {
	Op  Op
	URI string
	// N is the call's number (from 1) among every Put and Delete of the
	// sink; NURI its number among the calls of the same Op on URI.
	N, NURI int
}

// Rule decides the fault of a call: a non-nil error fails the call with
// it. Rules must be safe for concurrent use.
type Rule func(c Call) error

// Options configure the faults of a Sink. The zero value adds none.
type Options struct {
	// Rules are asked in order; the first non-nil error fails the call.
	Rules []Rule
	// Latency delays every Put and Delete before it runs (a ctx that ends
	// meanwhile fails the call, retryable).
	Latency time.Duration
	// GoneAfterCalls, when positive, makes the sink go away once that many
	// Put and Delete calls have started: every later call fails with
	// ErrGone.
	GoneAfterCalls int
	// GoneAfter, when positive, makes the sink go away that long after its
	// first Put or Delete started.
	GoneAfter time.Duration
	// Concurrency is what Concurrency reports (sink.Limiter); 0 reports the
	// wrapped sink's, when it is a Limiter.
	Concurrency int
	// Before, when set, is called at the start of every Put and Delete,
	// before any fault is decided (to stop a real server at a chosen call,
	// say). It must be safe for concurrent use.
	Before func(c Call)
}

// Stats are a Sink's counters.
type Stats struct {
	// Puts and Deletes count the calls made; Written and Deleted those the
	// wrapped sink carried out without error.
	Puts, Deletes, Written, Deleted int
	// Faults counts the calls a Rule failed; GoneFailures those failed
	// because the sink was gone.
	Faults, GoneFailures int
	// MaxInFlight is the most Put and Delete calls that were in progress
	// at once.
	MaxInFlight int
}

// Sink is a sink.Sink with faults. It also implements sink.Limiter and
// sink.Inventory (whose calls go to the wrapped sink, without faults; they
// fail when it has no Inventory). Its methods are safe for concurrent use.
type Sink struct {
	inner sink.Sink
	opts  Options

	calls    atomic.Int64
	inFlight atomic.Int64
	gone     atomic.Bool
	disarmed atomic.Bool // Reappear turned the automatic triggers off

	mu     sync.Mutex
	first  time.Time // of the first call
	perURI map[Op]map[string]int
	stats  Stats
}

// New wraps inner with the faults of opts.
func New(inner sink.Sink, opts Options) *Sink {
	return &Sink{inner: inner, opts: opts, perURI: map[Op]map[string]int{OpPut: {}, OpDelete: {}}}
}

// Put fails as the faults say, or puts through the wrapped sink.
func (s *Sink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if r == nil {
		return errclass.Permanentf("sinkfault: put: nil resource")
	}
	done, byRule, err := s.enter(ctx, OpPut, r.URI)
	defer done()
	if err != nil {
		if byRule {
			// The upload went through; the server refused it at the end.
			if _, rerr := io.Copy(io.Discard, body); rerr != nil {
				return fmt.Errorf("sinkfault: put %s: reading body: %w", r.URI, rerr)
			}
		}
		return err
	}
	if err := s.inner.Put(ctx, r, body); err != nil {
		return err
	}
	s.count(func(st *Stats) { st.Written++ })
	return nil
}

// Delete fails as the faults say, or deletes through the wrapped sink.
func (s *Sink) Delete(ctx context.Context, uri string) error {
	done, _, err := s.enter(ctx, OpDelete, uri)
	defer done()
	if err != nil {
		return err
	}
	if err := s.inner.Delete(ctx, uri); err != nil {
		return err
	}
	s.count(func(st *Stats) { st.Deleted++ })
	return nil
}

// enter numbers a call, tracks it in flight until done is called, and
// decides its fault: gone, the latency's ctx, or a Rule (byRule).
func (s *Sink) enter(ctx context.Context, op Op, uri string) (done func(), byRule bool, fault error) {
	n := int(s.calls.Add(1))
	in := s.inFlight.Add(1)
	done = func() { s.inFlight.Add(-1) }
	now := time.Now()
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = now
	}
	first := s.first
	s.perURI[op][uri]++
	c := Call{Op: op, URI: uri, N: n, NURI: s.perURI[op][uri]}
	if op == OpPut {
		s.stats.Puts++
	} else {
		s.stats.Deletes++
	}
	s.stats.MaxInFlight = max(s.stats.MaxInFlight, int(in))
	s.mu.Unlock()

	if s.opts.Before != nil {
		s.opts.Before(c)
	}
	if !s.disarmed.Load() && (s.opts.GoneAfterCalls > 0 && n > s.opts.GoneAfterCalls ||
		s.opts.GoneAfter > 0 && now.Sub(first) >= s.opts.GoneAfter) {
		s.gone.Store(true)
	}
	if s.gone.Load() {
		s.count(func(st *Stats) { st.GoneFailures++ })
		return done, false, goneError(op, uri)
	}
	if s.opts.Latency > 0 {
		t := time.NewTimer(s.opts.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return done, false, errclass.Retryablef("sinkfault: %s %s: %w", op, uri, ctx.Err())
		case <-t.C:
		}
	}
	for _, rule := range s.opts.Rules {
		if err := rule(c); err != nil {
			s.count(func(st *Stats) { st.Faults++ })
			return done, true, fmt.Errorf("sinkfault: %s %s (call %d): %w", op, uri, n, err)
		}
	}
	return done, false, nil
}

// goneError is what a client gets from a server that is no longer there:
// a refused connection (to the discard port of loopback), retryable.
func goneError(op Op, uri string) error {
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	return errclass.Retryablef("sinkfault: %s %s: %w: %w", op, uri, ErrGone, refused)
}

func (s *Sink) count(f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

// Disappear makes the sink go away now: every later Put and Delete fails
// with ErrGone until Reappear.
func (s *Sink) Disappear() { s.gone.Store(true) }

// Reappear brings the sink back, and turns GoneAfterCalls and GoneAfter
// off so that it stays.
func (s *Sink) Reappear() {
	s.disarmed.Store(true)
	s.gone.Store(false)
}

// Gone reports whether the sink is gone.
func (s *Sink) Gone() bool { return s.gone.Load() }

// Stats returns a snapshot of the counters.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Calls returns how many calls of op were made for uri.
func (s *Sink) Calls(op Op, uri string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perURI[op][uri]
}

// Close closes the wrapped sink.
func (s *Sink) Close(ctx context.Context) error { return s.inner.Close(ctx) }

// Concurrency returns Options.Concurrency, or the wrapped sink's when that
// is 0 (0 when it is no sink.Limiter).
func (s *Sink) Concurrency() int {
	if s.opts.Concurrency > 0 {
		return s.opts.Concurrency
	}
	if l, ok := s.inner.(sink.Limiter); ok {
		return l.Concurrency()
	}
	return 0
}

// Get reads through the wrapped sink's Inventory, without faults.
func (s *Sink) Get(ctx context.Context, uri string) (io.ReadCloser, error) {
	inv, ok := s.inner.(sink.Inventory)
	if !ok {
		return nil, fmt.Errorf("sinkfault: %T has no Inventory", s.inner)
	}
	return inv.Get(ctx, uri)
}

// Walk walks the wrapped sink's Inventory, without faults.
func (s *Sink) Walk(ctx context.Context, fn func(uri string) error) error {
	inv, ok := s.inner.(sink.Inventory)
	if !ok {
		return fmt.Errorf("sinkfault: %T has no Inventory", s.inner)
	}
	return inv.Walk(ctx, fn)
}

// Temporary returns a retryable error with message msg, as a sink returns
// for a timeout, a reset connection or a 503.
func Temporary(msg string) error { return errclass.Retryablef("%s", msg) }

// Permanent returns a permanent error with message msg, as a sink returns
// when the server rejects this one resource (a 403 for one key, say).
func Permanent(msg string) error { return errclass.Permanentf("%s", msg) }

// FailNth fails the n-th call (counting every Put and Delete from 1) with
// err.
func FailNth(n int, err error) Rule {
	return func(c Call) error {
		if c.N == n {
			return err
		}
		return nil
	}
}

// FailEvery fails every k-th call (the k-th, 2k-th, …) with err.
func FailEvery(k int, err error) Rule {
	return func(c Call) error {
		if k > 0 && c.N%k == 0 {
			return err
		}
		return nil
	}
}

// FailFirst fails the first k calls of each URI (per Op) with err: a fault
// that retries get past.
func FailFirst(k int, err error) Rule {
	return func(c Call) error {
		if c.NURI <= k {
			return err
		}
		return nil
	}
}

// FailURIs fails every call whose URI match accepts with err.
func FailURIs(match func(uri string) bool, err error) Rule {
	return func(c Call) error {
		if match(c.URI) {
			return err
		}
		return nil
	}
}

// Only restricts rule to the calls of op.
func Only(op Op, rule Rule) Rule {
	return func(c Call) error {
		if c.Op != op {
			return nil
		}
		return rule(c)
	}
}

var (
	_ sink.Sink      = (*Sink)(nil)
	_ sink.Limiter   = (*Sink)(nil)
	_ sink.Inventory = (*Sink)(nil)
)
