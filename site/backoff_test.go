package site

import (
	"testing"
	"time"
)

// TestRetriesBeforeFarAhead: a failing site parked with an explicit next
// harvest more than a Duration's reach ahead (sites edit --next
// 2300-01-01) has its earlier failures counted, in a bounded loop.
func TestRetriesBeforeFarAhead(t *testing.T) {
	when, err := ParseSchedule("every 1d")
	if err != nil {
		t.Fatal(err)
	}
	last := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s := &Site{When: when, Last: last, LastStatus: statusFailed, Next: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}
	got := make(chan int, 1)
	go func() { got <- s.RetriesBefore() }()
	select {
	case n := <-got:
		if n < 25 {
			t.Errorf("RetriesBefore = %d: the next harvest is more than 2^25 first retries ahead", n)
		}
	case <-time.After(time.Minute):
		t.Fatal("RetriesBefore of a failed site whose next harvest is set to 2300 has not returned")
	}
}

// TestRetryAfterLongPeriods: for a period past a Duration's reach
// ("every 9999w", "every 9999mo": a site meant to be harvested by hand),
// any number of failures in a row makes the site due again after the
// harvest that failed, never before (due at every tick).
func TestRetryAfterLongPeriods(t *testing.T) {
	for _, sched := range []string{"every 9999w", "every 9999mo"} {
		when, err := ParseSchedule(sched)
		if err != nil {
			t.Fatal(err)
		}
		s := &Site{When: when}
		last := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		for failures := 1; failures <= 40; failures++ {
			if got := s.RetryAfter(last, failures, time.UTC); !got.After(last) {
				t.Errorf("%s, after %d failures in a row: due again at %v, not after the failed harvest began (%v)", sched, failures, got, last)
				break
			}
		}
	}
}
