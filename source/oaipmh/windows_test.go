package oaipmh

import (
	"testing"
	"time"
)

// TestWindows: parallel windows are adjacent in the repository's
// granularity, cover the range (open below when the task is) and end at
// its until, else the server's now.
func TestWindows(t *testing.T) {
	at := func(s string) time.Time { return ParseDatestamp(s) }
	seconds := &Identify{Granularity: "YYYY-MM-DDThh:mm:ssZ", EarliestDatestamp: "2024-01-01T00:00:00Z"}
	days := &Identify{Granularity: "YYYY-MM-DD", EarliestDatestamp: "2024-01-01"}
	tests := []struct {
		name             string
		id               *Identify
		conc             int
		from, until, now time.Time
		n                int
	}{
		{"one list", seconds, 1, time.Time{}, time.Time{}, at("2024-01-01T01:00:00Z"), 1},
		{"baseline, seconds", seconds, 3, time.Time{}, time.Time{}, at("2024-01-01T00:59:59Z"), 12},
		{"incremental range, seconds", seconds, 2, at("2024-01-01T00:00:10Z"), at("2024-01-01T00:00:13Z"), at("2024-06-01T00:00:00Z"), 4},
		{"baseline, days", days, 3, time.Time{}, time.Time{}, at("2024-01-02T10:00:00Z"), 2},
		{"range shorter than the windows", seconds, 4, at("2024-01-01T00:00:10Z"), at("2024-01-01T00:00:10Z"), at("2024-06-01T00:00:00Z"), 1},
		{"no earliest datestamp", &Identify{Granularity: seconds.Granularity}, 3, time.Time{}, time.Time{}, at("2024-06-01T00:00:00Z"), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := (&Planner{Concurrency: tc.conc}).windows(tc.id, tc.from, tc.until, tc.now)
			if len(ws) != tc.n {
				t.Fatalf("%d windows, want %d: %v", len(ws), tc.n, ws)
			}
			unit := time.Second
			if !tc.id.Seconds() {
				unit = 24 * time.Hour
			}
			if !ws[0].from.Equal(tc.from) {
				t.Errorf("first window from %v, want %v", ws[0].from, tc.from)
			}
			if tc.n == 1 {
				return
			}
			end := tc.until
			if end.IsZero() {
				end = tc.now.Truncate(unit)
			}
			if !ws[len(ws)-1].until.Equal(end) {
				t.Errorf("last window until %v, want %v", ws[len(ws)-1].until, end)
			}
			for i := 1; i < len(ws); i++ {
				if !ws[i-1].until.Add(unit).Equal(ws[i].from) || ws[i].until.Before(ws[i].from) {
					t.Errorf("windows %d and %d: %v, %v", i-1, i, ws[i-1], ws[i])
				}
			}
		})
	}
}
