package site

import (
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/config"
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
