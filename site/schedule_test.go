package site

import (
	"strings"
	"testing"
	"time"
)

// TestSchedule: every unit, cron expressions and descriptors, in a zone
// with daylight saving time; bad schedules refused.
func TestSchedule(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		schedule, last, want string
	}{
		{"every 1d", "2026-03-10 03:00", "2026-03-11 03:00"},
		{"every 1d", "2026-03-28 03:00", "2026-03-29 03:00"},  // 23 hours: the clocks go forward
		{"every 1d", "2026-10-24 03:00", "2026-10-25 03:00"},  // 25 hours: back
		{"every 12h", "2026-03-28 20:00", "2026-03-29 09:00"}, // 12 hours of real time
		{"every 2w", "2026-03-01 03:00", "2026-03-15 03:00"},
		{"every 1mo", "2026-01-31 03:00", "2026-03-03 03:00"}, // time.AddDate's normalisation
		{"every  3 mo", "2026-01-15 03:00", "2026-04-15 03:00"},
		{"0 3 * * *", "2026-03-28 03:00", "2026-03-29 03:00"},
		{"30 2 * * *", "2026-03-28 03:00", "2026-03-30 02:30"}, // 02:30 does not exist on the 29th
		{"@daily", "2026-03-10 15:00", "2026-03-11 00:00"},
		{"0 6 * * 1-5", "2026-03-13 07:00", "2026-03-16 06:00"}, // Friday → Monday
		{"CRON_TZ=UTC 0 3 * * *", "2026-03-10 05:00", "2026-03-11 04:00"},
	}
	for _, tt := range tests {
		s, err := ParseSchedule(tt.schedule)
		if err != nil {
			t.Errorf("%q: %v", tt.schedule, err)
			continue
		}
		if got := s.Next(at(tt.last), berlin); !got.Equal(at(tt.want)) {
			t.Errorf("%q after %s: %s, want %s", tt.schedule, tt.last, got.In(berlin).Format("2006-01-02 15:04 MST"), tt.want)
		}
	}
	for _, bad := range []string{"", "every", "every 0d", "every 1y", "every -1d", "every 1 days", "61 * * * *", "* * *", "daily"} {
		if _, err := ParseSchedule(bad); err == nil || !strings.Contains(err.Error(), "schedule") {
			t.Errorf("%q: %v, want an error", bad, err)
		}
	}
}
