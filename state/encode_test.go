package state

import (
	"testing"
	"time"
)

// TestTimeTexts checks that the cache of encoded times gives what
// encodeTime gives, for times repeated, times a nanosecond apart, one
// instant in two zones, more distinct times than it keeps, the zero time
// and a year the columns cannot hold.
func TestTimeTexts(t *testing.T) {
	base := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name  string
		times []time.Time
	}{
		{"repeated", []time.Time{base, base, base, base}},
		{"a nanosecond apart", []time.Time{base, base.Add(time.Nanosecond), base, base.Add(time.Nanosecond)}},
		{"one instant, two zones", []time.Time{base.In(paris), base, base.In(paris)}},
		{"more than it keeps", []time.Time{base, base.Add(1), base.Add(2), base.Add(3), base.Add(4), base.Add(5), base, base.Add(5), base.Add(1)}},
		{"zero", []time.Time{{}, base, {}, base}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tt timeTexts
			for i, tm := range tc.times {
				got, err := tt.encode(tm)
				if err != nil {
					t.Fatalf("time %d: %v", i, err)
				}
				want, _ := encodeTime(tm)
				if got != want {
					t.Errorf("time %d (%v): %v, want %v", i, tm, got, want)
				}
			}
		})
	}
	var none *timeTexts // keeps nothing: encodeTime itself
	got, err := none.encode(base)
	if want, _ := encodeTime(base); got != want || err != nil {
		t.Errorf("nil: %v, %v; want %v", got, err, want)
	}
	var tt timeTexts
	if _, err := tt.encode(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("the year 10000 was encoded")
	}
}
