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

// TestSubtract: what a mark covers is cut out of the windows, in the
// repository's granularity; zero bounds are open.
func TestSubtract(t *testing.T) {
	day := 24 * time.Hour
	at := func(s string) time.Time { return ParseDatestamp(s) }
	w := func(from, until string) window { return window{at(from), at(until)} }
	tests := []struct {
		name     string
		ws, cut  []window
		want     []window
		unitSize time.Duration
	}{
		{"nothing cut", []window{w("2024-01-01", "2024-01-10")}, nil, []window{w("2024-01-01", "2024-01-10")}, day},
		{"disjoint", []window{w("2024-01-01", "2024-01-10")}, []window{w("2024-02-01", "2024-02-03")}, []window{w("2024-01-01", "2024-01-10")}, day},
		{"middle", []window{w("2024-01-01", "2024-01-10")}, []window{w("2024-01-03", "2024-01-05")}, []window{w("2024-01-01", "2024-01-02"), w("2024-01-06", "2024-01-10")}, day},
		{"all", []window{w("2024-01-03", "2024-01-05")}, []window{w("2024-01-01", "2024-01-10")}, nil, day},
		{"open window, closed cut", []window{w("", "")}, []window{w("2024-01-03", "2024-01-05")}, []window{w("", "2024-01-02"), w("2024-01-06", "")}, day},
		{"open cut below", []window{w("", "2024-01-10")}, []window{w("", "2024-01-05")}, []window{w("2024-01-06", "2024-01-10")}, day},
		{"seconds", []window{w("2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z")}, []window{w("2024-01-01T00:00:00Z", "2024-01-01T00:00:30Z")}, []window{w("2024-01-01T00:00:31Z", "2024-01-01T00:01:00Z")}, time.Second},
		{"two cuts", []window{w("2024-01-01", "2024-01-10"), w("2024-01-11", "2024-01-20")}, []window{w("2024-01-05", "2024-01-12"), w("2024-01-15", "2024-01-15")},
			[]window{w("2024-01-01", "2024-01-04"), w("2024-01-13", "2024-01-14"), w("2024-01-16", "2024-01-20")}, day},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := subtract(tt.ws, tt.cut, tt.unitSize)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if !got[i].from.Equal(tt.want[i].from) || !got[i].until.Equal(tt.want[i].until) {
					t.Errorf("window %d: got %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
