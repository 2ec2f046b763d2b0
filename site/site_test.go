package site

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/state"
)

// TestDue: a site is due at once when never harvested, then at its
// schedule's next time after its last harvest, or at the next harvest set
// explicitly (seed 004), on a fake clock.
func TestDue(t *testing.T) {
	day := func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		name     string
		schedule string
		last     time.Time
		next     time.Time
		now      time.Time
		due      bool
	}{
		{"never harvested", "every 1d", time.Time{}, time.Time{}, day(1, 0), true},
		{"harvested an hour ago", "every 1d", day(1, 3), time.Time{}, day(1, 4), false},
		{"a day later", "every 1d", day(1, 3), time.Time{}, day(2, 3), true},
		{"two weeks, not yet", "every 2w", day(1, 3), time.Time{}, day(14, 3), false},
		{"two weeks", "every 2w", day(1, 3), time.Time{}, day(15, 3), true},
		{"a month", "every 1mo", day(1, 3), time.Time{}, time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), true},
		{"cron, before", "0 6 * * *", day(1, 7), time.Time{}, day(2, 5), false},
		{"cron, after", "0 6 * * *", day(1, 7), time.Time{}, day(2, 6), true},
		{"explicit next, earlier", "every 1mo", day(1, 3), day(3, 0), day(3, 0), true},
		{"explicit next, later", "every 1d", day(1, 3), day(10, 0), day(5, 0), false},
	}
	for _, tt := range tests {
		s, err := New(config.Site{Name: "a", Schedule: tt.schedule})
		if err != nil {
			t.Fatal(err)
		}
		s.Last, s.Next = tt.last, tt.next
		if got := s.Due(tt.now, time.UTC); got != tt.due {
			t.Errorf("%s: due %v at %v (next %v), want %v", tt.name, got, tt.now, s.NextHarvest(time.UTC), tt.due)
		}
	}
}

// TestApply: applying a registry file adds, redefines and removes sites;
// applying it again changes nothing; where harvests stand is kept; a bad
// schedule is refused, naming its line, before anything is written.
func TestApply(t *testing.T) {
	ctx := context.Background()
	st, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := Registry{Store: st}
	decode := func(text string) []config.Site {
		t.Helper()
		sites, err := config.DecodeSites(strings.NewReader(text), "sites.yaml", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sites
	}
	site := func(name, schedule string) string {
		return "  - name: " + name + "\n    source: http://" + name + ".example/\n    sinks: [fs:/m/" + name + "]\n    schedule: " + schedule + "\n"
	}
	steps := []struct {
		file string
		want Changes
	}{
		{"sites:\n" + site("a", "every 1d") + site("b", "every 2w"), Changes{Added: []string{"a", "b"}}},
		{"sites:\n" + site("a", "every 1d") + site("b", "every 2w"), Changes{Unchanged: []string{"a", "b"}}},
		{"sites:\n" + site("a", "every 3d") + site("c", `"@daily"`), Changes{Added: []string{"c"}, Changed: []string{"a"}, Removed: []string{"b"}}},
	}
	last := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	for i, s := range steps {
		got, err := reg.Apply(ctx, decode(s.file), true)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !sameChanges(got, s.want) {
			t.Errorf("step %d: %+v, want %+v", i, got, s.want)
		}
		if i == 0 {
			if err := st.SiteHarvested(ctx, "a", last, "ok", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, err := reg.Site(ctx, "a")
	if err != nil || a.When.String() != "every 3d" || !a.Last.Equal(last) || a.LastStatus != "ok" || !a.NextHarvest(time.UTC).Equal(last.AddDate(0, 0, 3)) {
		t.Errorf("site a after its redefinition: %+v, %v", a, err)
	}
	_, err = reg.Apply(ctx, decode("sites:\n"+site("a", "every 1d")+site("d", "every 1 fortnight")), true)
	if err == nil || !strings.Contains(err.Error(), `sites.yaml:9:5: site "d": schedule`) {
		t.Errorf("a bad schedule: %v", err)
	}
	if sites, _ := reg.Sites(ctx); len(sites) != 2 || sites[0].When.String() != "every 3d" {
		t.Errorf("a refused file changed the registry: %v", sites)
	}
}

func sameChanges(a, b Changes) bool {
	return slices.Equal(a.Added, b.Added) && slices.Equal(a.Changed, b.Changed) && slices.Equal(a.Removed, b.Removed) && slices.Equal(a.Unchanged, b.Unchanged)
}

// TestRetriesBefore: the failures in a row before a site's harvest, read
// from the next harvest its backoff set (FirstRetry, doubled for each
// earlier one); none when its last harvest did not fail, or its next was
// not set after it.
func TestRetriesBefore(t *testing.T) {
	last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		status string
		next   time.Duration // after last; 0: none
		want   int
	}{
		{"ok", FirstRetry, 0},
		{"failed", 0, 0},
		{"failed", FirstRetry, 1},
		{"interrupted", 2 * FirstRetry, 2},
		{"failed", 4 * FirstRetry, 3},
		{"failed", 3 * FirstRetry, 3}, // capped by the period: at least that many
	} {
		s := &Site{Last: last, LastStatus: tc.status}
		if tc.next > 0 {
			s.Next = last.Add(tc.next)
		}
		if got := s.RetriesBefore(); got != tc.want {
			t.Errorf("%s, next %v after: %d, want %d", tc.status, tc.next, got, tc.want)
		}
	}
}

// TestDueBesideAnUnreadableSite: a site whose stored definition cannot be
// read here (a schedule this machine cannot parse) keeps no other site
// from being due: Due returns the others, and an error naming it.
func TestDueBesideAnUnreadableSite(t *testing.T) {
	ctx := context.Background()
	st, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, schedule := range map[string]string{"good": "every 1d", "bad": "CRON_TZ=Nowhere/Atlantis 0 3 * * *"} {
		def := "name: " + name + "\nsource: http://127.0.0.1:1/\nsinks: [fs:/tmp/x]\nschedule: " + schedule + "\n"
		if err := st.PutSite(ctx, state.Site{Name: name, Definition: def}); err != nil {
			t.Fatal(err)
		}
	}
	due, err := Registry{Store: st}.Due(ctx, time.Now(), time.UTC)
	if len(due) != 1 || due[0].Name != "good" {
		t.Errorf("due %v, want the good site", due)
	}
	if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "bad") {
		t.Errorf("error %v, want one naming the unreadable site", err)
	}
}
