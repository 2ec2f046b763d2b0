// Package retry is rsharvest's one way of repeating an operation that
// failed temporarily: exponential backoff from cenkalti/backoff/v4, bounded
// by a count of retries, cut short by the context, with an optional floor
// on each wait (a server's Retry-After) and a notification before each
// wait. fetch retries requests with it and every sink its own calls; no
// other code loops over attempts.
package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rsharvest/rsharvest/errclass"
)

// Policy describes how an operation is retried. The zero value retries
// nothing.
type Policy struct {
	// Retries is how many times a failed attempt is repeated (0: never).
	Retries int
	// Initial is the first wait (default 100 ms); Max the longest backoff
	// wait (default 30 s). Waits grow by half each time, jittered.
	Initial, Max time.Duration
	// Retryable reports whether an attempt that failed with err may be
	// repeated; nil means errclass.IsRetryable.
	Retryable func(err error) bool
	// Floor, when set, is the least wait after err (a server's
	// Retry-After, already capped by the caller).
	Floor func(err error) time.Duration
	// Notify, when set, is told of each retry before its wait.
	Notify func(Retry)
	// GiveUp, when set, builds the error returned when the retries are
	// used up, from the number of attempts made and the last error;
	// otherwise the last error is returned as it is.
	GiveUp func(attempts int, err error) error
	// Sleep, when set, replaces the wait (tests record waits with it); it
	// must return ctx.Err() when ctx ends first.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Retry describes an attempt about to be repeated.
type Retry struct {
	// Attempt is the number of the attempt about to be made, counting the
	// first: 2 for the first retry.
	Attempt int
	// Attempts is the most attempts made before giving up (Retries + 1).
	Attempts int
	// Wait is how long is waited before it.
	Wait time.Duration
	// Err is why the last attempt failed.
	Err error
	// Progressed says the failed attempt made progress (Budget.Progress was
	// called during it): the count of retries started again and this retry
	// spent none.
	Progressed bool
}

// Do calls op until it returns nil or an error that is not retryable, the
// retries are used up (then the last error, or Policy.GiveUp's), or ctx
// ends (then op's error when op saw it end, or ctx.Err() when a wait was
// cut short).
func Do(ctx context.Context, p Policy, op func() error) error {
	return p.Start().Do(ctx, op)
}

// Stop makes op's error end Do at once, whatever its class: Do returns err.
func Stop(err error) error { return backoff.Permanent(err) }

// Budget is a Policy's running state, shared by the calls of Do that make
// up one transfer (a download that reconnects spends one budget). It is not
// safe for concurrent use.
type Budget struct {
	p          Policy
	exp        *backoff.ExponentialBackOff
	fails      int   // retries spent since the last Progress
	last       error // the error of the last failed attempt
	gaveUp     bool  // the last Do ended because the retries were used up
	progressed bool  // Progress was called since the last notification
}

// Start returns a fresh budget of p.
func (p Policy) Start() *Budget {
	if p.Initial <= 0 {
		p.Initial = 100 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	p.Max = max(p.Max, p.Initial)
	if p.Retryable == nil {
		p.Retryable = errclass.IsRetryable
	}
	return &Budget{p: p, exp: backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.Initial),
		backoff.WithMaxInterval(p.Max),
		backoff.WithMaxElapsedTime(0), // attempts are counted, not timed
	)}
}

// Do is the package's Do on this budget: retries spent by earlier calls
// stay spent until Progress.
func (b *Budget) Do(ctx context.Context, op func() error) error {
	b.gaveUp = false
	err := backoff.RetryNotifyWithTimer(func() error {
		err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !b.p.Retryable(err) {
			return backoff.Permanent(err)
		}
		b.last = err
		return err
	}, backoff.WithContext(stepper{b}, ctx), func(err error, d time.Duration) {
		r := Retry{Attempt: b.fails + 1, Attempts: b.p.Retries + 1, Wait: d, Err: err, Progressed: b.progressed}
		b.progressed = false
		if b.p.Notify != nil {
			b.p.Notify(r)
		}
	}, b.timer(ctx))
	if b.gaveUp && b.p.GiveUp != nil {
		return b.p.GiveUp(b.fails+1, err)
	}
	return err
}

// Reset restarts the count of retries and the backoff.
func (b *Budget) Reset() {
	b.fails = 0
	b.exp.Reset()
}

// Progress is called by an operation during Do when it got further than
// before (a transfer received bytes) before it failed: the count of
// retries starts again, the failure spends none, and its notification says
// Progressed.
func (b *Budget) Progress() {
	b.Reset()
	b.progressed = true
}

// Spend counts a failed attempt made outside Do (a transfer cut off
// without progress). It reports false, spending nothing, when the retries
// are used up.
func (b *Budget) Spend() bool {
	if b.fails >= b.p.Retries {
		return false
	}
	b.fails++
	return true
}

// Attempts is the number of attempts made since the last Progress: the
// retries spent and the first.
func (b *Budget) Attempts() int { return b.fails + 1 }

// Backoff returns the next backoff wait (with Floor applied to err when
// err is not nil) without spending a retry.
func (b *Budget) Backoff(err error) time.Duration {
	d := b.exp.NextBackOff()
	if d == backoff.Stop {
		d = b.p.Max
	}
	if err != nil && b.p.Floor != nil {
		d = max(d, b.p.Floor(err))
	}
	return d
}

// Wait waits d (through Policy.Sleep when set), or until ctx ends.
func (b *Budget) Wait(ctx context.Context, d time.Duration) error {
	if b.p.Sleep != nil {
		return b.p.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

// Sleep waits d, or until ctx ends (then it returns ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// stepper is the budget seen as a backoff.BackOff: each step spends a
// retry. Its Reset does nothing, so retries spent by an earlier Do stay
// spent; Budget.Progress resets.
type stepper struct{ b *Budget }

var _ backoff.BackOff = stepper{}

func (s stepper) Reset() {}

func (s stepper) NextBackOff() time.Duration {
	if s.b.progressed {
		return s.b.Backoff(s.b.last)
	}
	if !s.b.Spend() {
		s.b.gaveUp = true
		return backoff.Stop
	}
	return s.b.Backoff(s.b.last)
}

// timer returns nil (backoff's own timer) or a timer that waits through
// Policy.Sleep.
func (b *Budget) timer(ctx context.Context) backoff.Timer {
	if b.p.Sleep == nil {
		return nil
	}
	return &sleepTimer{ctx: ctx, sleep: b.p.Sleep, c: make(chan time.Time, 1)}
}

// sleepTimer is a backoff.Timer that fires when Policy.Sleep returns.
type sleepTimer struct {
	ctx   context.Context
	sleep func(context.Context, time.Duration) error
	c     chan time.Time
}

var _ backoff.Timer = (*sleepTimer)(nil)

func (t *sleepTimer) Start(d time.Duration) {
	go func() {
		if t.sleep(t.ctx, d) == nil {
			select {
			case t.c <- time.Now():
			default:
			}
		}
	}()
}

func (t *sleepTimer) Stop()               {}
func (t *sleepTimer) C() <-chan time.Time { return t.c }
