package site

import "testing"

// TestEveryDescriptorRefused: the cron library's "@every DURATION" takes
// a zero or negative period (a site harvested back to back): a schedule
// is every N{h,d,w,mo} or a cron expression, so it is refused.
func TestEveryDescriptorRefused(t *testing.T) {
	for _, s := range []string{"@every 0s", "@every -5m", "@every 1h"} {
		if w, err := ParseSchedule(s); err == nil {
			t.Errorf("schedule %q accepted (%v)", s, w)
		}
	}
}
