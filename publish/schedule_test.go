package publish

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// every is a schedule of a fixed step.
type every time.Duration

func (e every) Next(t time.Time, _ *time.Location) time.Time { return t.Add(time.Duration(e)) }

// TestEvery: runs come on the schedule, a failed run does not stop the
// next, and the loop ends with its context. No time is asserted: the test
// waits for runs to happen.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var runs atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, every(time.Millisecond), func(context.Context) error {
			if runs.Add(1) >= 3 {
				cancel()
			}
			return errors.New("failing on purpose")
		}, nil)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Every did not end with its context")
	}
	if n := runs.Load(); n < 3 {
		t.Errorf("%d runs, want 3 (a failed run must not stop the next)", n)
	}
}
