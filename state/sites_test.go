package state

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSites: the registry keeps each site's definition and where its
// harvests stand; a new definition keeps them; a harvest clears an
// explicit next harvest.
func TestSites(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	next := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	last := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
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
