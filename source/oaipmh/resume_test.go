package oaipmh_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// TestResume: a harvest stopped partway, then planned again with the marks
// the first one left (as the executor records them: each once the units
// before it are done), harvests every record, and asks again for none of
// the pages the marks cover: it resumes at the next page, by its token,
// or after a server forgot the token, from the newest datestamp harvested
// when the pages came in datestamp order.
func TestResume(t *testing.T) {
	errStop := errors.New("stopped")
	tests := []struct {
		name        string
		o           bench.OAIOptions
		concurrency int
		incremental bool // at revision 1, whose datestamps are not in order
		stopAfter   int  // records emitted before the stop
	}{
		{"one list", bench.OAIOptions{Records: 60, PageSize: 5}, 1, false, 23},
		{"one list, tokens forgotten", bench.OAIOptions{Records: 60, PageSize: 5, OneUseTokens: true}, 1, false, 23},
		{"one list, day granularity", bench.OAIOptions{Records: 60, PageSize: 5, DayGranularity: true}, 1, false, 41},
		{"windows", bench.OAIOptions{Records: 60, PageSize: 5}, 3, false, 23},
		{"windows, tokens forgotten, out of order", bench.OAIOptions{Records: 60, PageSize: 5, ForgetTokens: true}, 3, true, 17},
		{"stopped before any mark", bench.OAIOptions{Records: 60, PageSize: 5}, 1, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRepo(t, tt.o)
			p := planner()
			p.Concurrency = tt.concurrency
			task := source.Task{Source: r.URL, Mode: source.Baseline}
			held := sourcetest.Holdings{}
			set := oaipmh.ResourceSet(oaipmh.DefaultMetadataPrefix, "")
			if tt.incremental {
				held[set] = source.Checkpoint{ResourceSet: set, Next: r.Now()}
				r.Advance()
				task.Mode = source.Incremental
			}
			want := map[string]bool{}
			for _, rec := range r.Records() {
				if !tt.incremental || !rec.Datestamp.Before(held[set].Next) {
					want[rec.Identifier] = true
				}
			}
			got := map[string]int{}
			marks := map[string]string{}
			emitted, marked := 0, 0
			_, err := p.Plan(context.Background(), task, held, func(_ context.Context, u source.Unit) error {
				switch {
				case u.Mark != nil:
					marks[u.Mark.Key] = u.Mark.Value
					marked = emitted
				case u.Record != nil:
					if emitted == tt.stopAfter {
						return errStop
					}
					emitted++
					got[u.Record.URI]++
				default:
					t.Errorf("unit %+v", u)
				}
				return nil
			})
			if !errors.Is(err, errStop) {
				t.Fatalf("first plan: %v", err)
			}
			second := 0
			resumed := sourcetest.Resumed{Holdings: held, Marks: map[string]map[string]string{set: marks}}
			if _, err := p.Plan(context.Background(), task, resumed, func(_ context.Context, u source.Unit) error {
				if u.Failure != nil {
					t.Errorf("failure: %v", u.Failure.Err)
				}
				if u.Record != nil {
					second++
					got[u.Record.URI]++
				}
				return nil
			}); err != nil {
				t.Fatalf("second plan: %v", err)
			}
			for id := range want {
				if got[id] == 0 {
					t.Errorf("%s never harvested", id)
				}
			}
			if second > len(want)-marked+tt.o.PageSize*4*tt.concurrency {
				t.Errorf("the resumed plan harvested %d records of %d, %d of which were marked done", second, len(want), marked)
			}
			if tt.concurrency == 1 && !tt.o.DayGranularity && !tt.o.OneUseTokens && second != len(want)-marked {
				t.Errorf("the resumed plan harvested %d records, want the %d of %d not marked", second, len(want)-marked, len(want))
			}
			t.Logf("first plan: %d records, %d marked; resumed: %d of %d", emitted, marked, second, len(want))
		})
	}
}

// TestForgottenTokens: a server that forgets its tokens
// (badResumptionToken) is asked for the list again; when its pages come in
// datestamp order, from the newest datestamp harvested, so that only the
// records of that datestamp are harvested twice; otherwise from the
// window's start.
func TestForgottenTokens(t *testing.T) {
	for _, incremental := range []bool{false, true} {
		r := newRepo(t, bench.OAIOptions{Records: 200, PageSize: 5, ForgetTokens: true})
		task := source.Task{Source: r.URL, Mode: source.Baseline}
		if incremental {
			task = source.Task{Source: r.URL, Mode: source.Incremental, From: r.Now()}
			r.Advance()
		}
		units := planWith(t, planner(), task)
		seen := map[string]int{}
		for _, u := range units {
			if u.Record == nil {
				t.Fatalf("unit %+v", u)
			}
			seen[u.Record.URI]++
		}
		restarts := 0
		for _, q := range r.requests[1:] {
			if q.Get("resumptionToken") == "" {
				restarts++
			}
		}
		if restarts == 0 {
			t.Fatalf("incremental %v: the server never forgot a token", incremental)
		}
		changed := 0
		for _, rec := range r.Records() {
			if !incremental || !rec.Datestamp.Before(task.From) {
				changed++
				if seen[rec.Identifier] == 0 {
					t.Errorf("incremental %v: %s never harvested", incremental, rec.Identifier)
				}
			}
		}
		if !incremental && len(units) > changed+restarts {
			t.Errorf("baseline: %d records harvested for %d after %d restarts: not restarted from the newest datestamp", len(units), changed, restarts)
		}
		t.Logf("incremental %v: %d records harvested for %d, %d restarts", incremental, len(units), changed, restarts)
	}
}
