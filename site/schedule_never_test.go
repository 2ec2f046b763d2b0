package site

import (
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/state"
)

// TestScheduleThatNeverFires: a cron expression that names no real
// time (30 February, 31 April) either is refused, or never makes its site
// due again once harvested. robfig/cron's Next gives the zero time for
// it, which NextHarvest reads as "never harvested: due at once", so the
// site is due at every tick: harvested again and again.
func TestScheduleThatNeverFires(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, expr := range []string{"0 0 30 2 *", "0 3 31 4 *", "0 0 31 2,4,6,9,11 *"} {
		s, err := New(config.Site{Name: "a", Schedule: expr})
		if err != nil {
			continue // refused: fine
		}
		s.Last = now.Add(-time.Minute) // harvested a minute ago
		if s.Due(now, time.UTC) {
			t.Errorf("schedule %q: accepted, and its site, harvested a minute ago, is due again now (next harvest %v)", expr, s.NextHarvest(time.UTC))
		}
	}
}

// TestStoredSitesStillRead: a site stored before this version's checks —
// a cron expression that never fires, a name beginning with '.' or '-' —
// is still read from the state (and never due, for the schedule), so the
// registry keeps working.
func TestStoredSitesStillRead(t *testing.T) {
	for _, def := range []string{
		"name: a\nschedule: 0 0 30 2 *\nsource: http://s.example/\nsinks:\n  - fs:/tmp/s\n",
		"name: .hidden\nschedule: every 1d\nsource: http://s.example/\nsinks:\n  - fs:/tmp/s\n",
		"name: -x\nschedule: every 1d\nsource: http://s.example/\nsinks:\n  - fs:/tmp/s\n",
	} {
		name := strings.TrimPrefix(strings.SplitN(def, "\n", 2)[0], "name: ")
		s, err := FromRow(state.Site{Name: name, Definition: def, Last: time.Now().Add(-time.Minute)})
		if err != nil {
			t.Errorf("FromRow(%q): %v", name, err)
			continue
		}
		if s.Due(time.Now(), time.UTC) {
			t.Errorf("site %q, harvested a minute ago, is due (next %v)", name, s.NextHarvest(time.UTC))
		}
	}
}
