package harvest_test

import (
	"context"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/site"
)

// TestHarvestNowOfAPausedSite: "harvest now" (the status page's button,
// and what "rsharvest run SITE" hands to a running daemon) either
// harvests a paused site or is refused saying why: a paused site is never
// due (state.DueSites; the daemon's job skips it too), so accepting it
// would harvest nothing, and say nothing.
func TestHarvestNowOfAPausedSite(t *testing.T) {
	ctx := context.Background()
	st, reg := registry(t, `sites:
  - name: p
    source: http://127.0.0.1:1/p
    sinks: [fs:/tmp/review-p]
    schedule: every 1d
`)
	if err := st.SiteHarvested(ctx, "p", time.Now().Add(-time.Hour), "ok", 0); err != nil {
		t.Fatal(err)
	}
	if err := reg.Pause(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	h := &harvest.Harvester{Store: st}
	err := h.Act(ctx, site.Action{Site: "p", Verb: site.ActHarvest, Who: "admin (operator)"})
	if err != nil {
		return // refused, saying why: fine
	}
	due, err := reg.Due(ctx, time.Now().Add(time.Second), time.Local)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range due {
		if s.Name == "p" {
			return
		}
	}
	t.Errorf("harvest now of paused site p was accepted (logged as done), but p is not due: the daemon never harvests it")
}
