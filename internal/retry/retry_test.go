package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// sleeps records the waits of a policy without waiting.
type sleeps []time.Duration

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	*s = append(*s, d)
	return ctx.Err()
}

func TestDo(t *testing.T) {
	temp := errclass.Retryablef("temporary")
	perm := errclass.Permanentf("permanent")
	tests := []struct {
		name      string
		retries   int
		results   []error // op's result per attempt; past the end: nil
		floor     time.Duration
		giveUp    bool
		wantCalls int
		wantErr   error  // errors.Is
		wantMsg   string // exact message, when set
		wantWaits int
	}{
		{name: "success at once", retries: 3, wantCalls: 1},
		{name: "success after two retries", retries: 3, results: []error{temp, temp}, wantCalls: 3, wantWaits: 2},
		{name: "permanent not retried", retries: 3, results: []error{perm}, wantCalls: 1, wantErr: perm},
		{name: "retries used up", retries: 2, results: []error{temp, temp, temp, temp}, wantCalls: 3, wantErr: temp, wantWaits: 2},
		{name: "give up message", retries: 1, results: []error{temp, temp}, giveUp: true, wantCalls: 2, wantErr: temp,
			wantMsg: "giving up after 2 attempts: temporary", wantWaits: 1},
		{name: "no retries", retries: 0, results: []error{temp}, wantCalls: 1, wantErr: temp},
		{name: "negative retries", retries: -1, results: []error{temp}, wantCalls: 1, wantErr: temp},
		{name: "stopped", retries: 3, results: []error{Stop(temp)}, wantCalls: 1, wantErr: temp},
		{name: "floor", retries: 3, results: []error{temp}, floor: time.Hour, wantCalls: 2, wantWaits: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var waits sleeps
			var notified []Retry
			p := Policy{
				Retries: tc.retries, Initial: time.Millisecond, Max: 4 * time.Millisecond,
				Sleep:  waits.sleep,
				Notify: func(r Retry) { notified = append(notified, r) },
			}
			if tc.floor > 0 {
				p.Floor = func(error) time.Duration { return tc.floor }
			}
			if tc.giveUp {
				p.GiveUp = func(n int, err error) error { return fmt.Errorf("giving up after %d attempts: %w", n, err) }
			}
			calls := 0
			err := Do(context.Background(), p, func() error {
				calls++
				if calls <= len(tc.results) {
					return tc.results[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantMsg != "" && (err == nil || err.Error() != tc.wantMsg) {
				t.Errorf("err = %v, want %q", err, tc.wantMsg)
			}
			if len(waits) != tc.wantWaits || len(notified) != tc.wantWaits {
				t.Fatalf("waits %v, notifications %d, want %d", waits, len(notified), tc.wantWaits)
			}
			for i, r := range notified {
				if r.Attempt != i+2 || r.Attempts != tc.retries+1 || r.Wait != waits[i] || r.Err == nil {
					t.Errorf("notification %d = %+v, want attempt %d of %d waiting %v", i, r, i+2, tc.retries+1, waits[i])
				}
				if r.Wait > p.Max && r.Wait != tc.floor {
					t.Errorf("wait %v above the maximum %v", r.Wait, p.Max)
				}
			}
			if tc.floor > 0 && waits[0] != tc.floor {
				t.Errorf("wait %v, want the floor %v", waits[0], tc.floor)
			}
		})
	}
}

// TestContext: an ended context ends the waits and the attempts.
func TestContext(t *testing.T) {
	temp := errclass.Retryablef("temporary")
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Do(ctx, Policy{Retries: 10, Initial: time.Hour}, func() error {
		calls++
		cancel()
		return temp
	})
	if calls != 1 || !errors.Is(err, temp) {
		t.Errorf("op saw the context end: calls %d, err %v; want 1, the op's error", calls, err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	err = Do(ctx, Policy{Retries: 10, Initial: time.Hour}, func() error { return temp })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a wait cut short: err %v, want context.Canceled", err)
	}
}

// TestBudget: a budget's retries stay spent across calls of Do until Reset
// or Progress, and a failure that made progress spends none.
func TestBudget(t *testing.T) {
	temp := errclass.Retryablef("temporary")
	var waits sleeps
	var notified []Retry
	b := Policy{Retries: 2, Initial: time.Millisecond, Sleep: waits.sleep,
		Notify: func(r Retry) { notified = append(notified, r) }}.Start()
	calls := 0
	if err := b.Do(context.Background(), func() error {
		if calls++; calls == 1 {
			return temp
		}
		return nil
	}); err != nil || b.Attempts() != 2 {
		t.Fatalf("first Do: %v, attempts %d; want nil, 2", err, b.Attempts())
	}
	if !b.Spend() || b.Spend() {
		t.Fatal("Spend: want one retry left, then none")
	}
	b.Reset()
	if b.Attempts() != 1 {
		t.Fatalf("after Reset: attempts %d, want 1", b.Attempts())
	}
	// Progress: three failures that each made progress spend nothing.
	calls, notified = 0, nil
	err := b.Do(context.Background(), func() error {
		if calls++; calls <= 3 {
			b.Progress()
			return temp
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("Do with progress: %v after %d calls; want nil after 4", err, calls)
	}
	for _, r := range notified {
		if !r.Progressed {
			t.Errorf("notification %+v: want Progressed", r)
		}
	}
}
