package state

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestSites: the registry keeps each site's definition and where its
// harvests stand; a new definition keeps them; a harvest clears an
// explicit next harvest it did not begin before.
func TestSites(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	next := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	last := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	steps := []struct {
		name string
		do   func() error
		want map[string]Site
	}{
		{"add", func() error { return s.PutSite(ctx, Site{Name: "a", Definition: "name: a\n"}) },
			map[string]Site{"a": {Name: "a", Definition: "name: a\n"}}},
		{"next set", func() error { return s.SetSiteNext(ctx, "a", next) },
			map[string]Site{"a": {Name: "a", Definition: "name: a\n", Next: next}}},
		{"redefined", func() error { return s.PutSite(ctx, Site{Name: "a", Definition: "name: a\nx: 1\n", Last: last}) },
			map[string]Site{"a": {Name: "a", Definition: "name: a\nx: 1\n", Next: next}}},
		{"harvested", func() error { return s.SiteHarvested(ctx, "a", last, "partial", run) },
			map[string]Site{"a": {Name: "a", Definition: "name: a\nx: 1\n", Last: last, LastStatus: "partial", LastRunID: run}}},
		{"another", func() error { return s.PutSite(ctx, Site{Name: "b", Definition: "name: b\n"}) },
			map[string]Site{"a": {Name: "a", Definition: "name: a\nx: 1\n", Last: last, LastStatus: "partial", LastRunID: run}, "b": {Name: "b", Definition: "name: b\n"}}},
		{"removed", func() error { return s.RemoveSite(ctx, "a") },
			map[string]Site{"b": {Name: "b", Definition: "name: b\n"}}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, err := s.Sites(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(st.want) {
			t.Fatalf("%s: %d sites, want %d", st.name, len(got), len(st.want))
		}
		for _, g := range got {
			w := st.want[g.Name]
			if g.Definition != w.Definition || !g.Next.Equal(w.Next) || !g.Last.Equal(w.Last) || g.LastStatus != w.LastStatus || g.LastRunID != w.LastRunID || g.Updated.IsZero() {
				t.Errorf("%s: %+v, want %+v", st.name, g, w)
			}
		}
	}
	for _, err := range []error{s.RemoveSite(ctx, "a"), s.SetSiteNext(ctx, "zz", next), func() error { _, err := s.Site(ctx, "zz"); return err }()} {
		if !errors.Is(err, ErrNoSite) {
			t.Errorf("an unknown site: %v", err)
		}
	}
	wantFatal(t, s.PutSite(ctx, Site{Name: "c"}))
}

// TestEventsAndRunsSince: the harvest log's queries — events and runs
// from a time on, of one site (events of no site always included).
func TestEventsAndRunsSince(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	t0 := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	for i, e := range []Event{{At: t0, Operation: "harvester started"}, {At: t0.Add(time.Minute), Operation: "note", Site: "a"}, {At: t0.Add(2 * time.Minute), Operation: "note", Site: "b"}} {
		if err := s.AddEvent(ctx, e); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	for i, r := range []Run{{Mode: "baseline", Source: "http://a/", Site: "a", Started: t0}, {Mode: "baseline", Source: "http://b/", Site: "b", Started: t0.Add(time.Hour)}} {
		if _, err := s.BeginRun(ctx, r); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	tests := []struct {
		since        time.Time
		site         string
		events, runs int
	}{
		{time.Time{}, "", 3, 2},
		{time.Time{}, "a", 1, 1}, // the harvester's start is no site's
		{t0.Add(30 * time.Second), "", 2, 1},
		{t0.Add(30 * time.Second), "b", 1, 1},
		{t0.Add(2 * time.Hour), "", 0, 0},
	}
	for _, tt := range tests {
		evs, err := s.Events(ctx, tt.since, tt.site)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := s.RunsSince(ctx, tt.since, tt.site)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != tt.events || len(runs) != tt.runs {
			t.Errorf("since %v, site %q: %d events, %d runs; want %d, %d", tt.since, tt.site, len(evs), len(runs), tt.events, tt.runs)
		}
		for _, r := range runs {
			if tt.site != "" && r.Site != tt.site {
				t.Errorf("site %q: run of site %q", tt.site, r.Site)
			}
		}
	}
	wantFatal(t, s.AddEvent(ctx, Event{}))
}

// TestDueTimeOfAChangedRow: an operator's change of a site (here "harvest
// now", its next set to now) stamped before the schedule reads the
// candidates, but committed after (it waited for the writer, held by a
// harvest's commit), is not overwritten by the due time the schedule
// computed from the row as it was: the site stays a candidate.
func TestDueTimeOfAChangedRow(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if err := s.PutSite(ctx, Site{Name: "a", Definition: "name: a\n"}); err != nil {
		t.Fatal(err)
	}
	last := time.Now().Add(-time.Hour)
	if err := s.SiteHarvested(ctx, "a", last, "ok", 0); err != nil { // due unknown: a candidate
		t.Fatal(err)
	}
	tx, err := s.beginWrite(ctx) // a harvest's commit holds the writer
	if err != nil {
		t.Fatal(err)
	}
	waits := s.w.Stats().WaitCount
	now := time.Now()
	acted := make(chan error, 1)
	go func() { acted <- s.SetSiteNext(ctx, "a", now) }()
	for s.w.Stats().WaitCount == waits {
		select {
		case err := <-acted:
			t.Fatalf("SetSiteNext did not wait for the writer: %v", err)
		default:
			runtime.Gosched()
		}
	}
	rows, err := s.DueSites(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !rows[0].Next.IsZero() {
		t.Fatalf("candidates %+v", rows)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-acted; err != nil {
		t.Fatal(err)
	}
	// The due time computed from the row read: a day after its last.
	if err := s.SetSitesDue(ctx, []DueTime{{Name: "a", At: last.Add(24 * time.Hour), Updated: rows[0].Updated}}); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueSites(ctx, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 {
		t.Errorf("site a, asked to be harvested now while the schedule read it, is not a candidate")
	}
}
