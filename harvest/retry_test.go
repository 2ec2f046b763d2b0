package harvest_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/site"
)

// TestHarvestNowDuringFailingHarvest: an operator's "harvest now" (or an
// edit, which sets the next harvest to now) while a harvest of the site
// runs is kept when that harvest fails: the fixed source is tried without
// waiting for the backoff of a failed harvest.
func TestHarvestNowDuringFailingHarvest(t *testing.T) {
	h, reg, done, release := heldHarvest(t, http.NotFoundHandler(), "/src/") // the source fails
	ctx := context.Background()
	asked := time.Now().UTC()
	if err := h.Act(ctx, site.Action{Site: "demo", Verb: site.ActHarvest, Who: "operator"}); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; err == nil {
		t.Fatal("the harvest of a source answering 404 succeeded")
	}
	after, err := reg.Site(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if after.LastStatus != runreport.StatusFailed {
		t.Fatalf("status %s, want failed", after.LastStatus)
	}
	if next := after.NextHarvest(time.Local); next.After(asked.Add(time.Minute)) {
		t.Errorf("harvest now asked at %v while a failing harvest ran: next harvest %v (%v later), want at once",
			asked, next, next.Sub(asked).Round(time.Second))
	}
}

// TestParkedFailingSite: a site whose last harvest failed, parked by its
// operator with an explicit next harvest far ahead ("sites edit --next
// 2300-01-01"), then run by name with a sink that cannot be opened,
// fails and returns.
func TestParkedFailingSite(t *testing.T) {
	ctx := context.Background()
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, reg := registry(t, `sites:
  - name: parked
    source: http://127.0.0.1:1/
    sinks: [fs:`+filepath.Join(blocked, "mirror")+`]
    schedule: every 1d
`)
	if err := st.SiteHarvested(ctx, "parked", time.Now().Add(-time.Hour), runreport.StatusFailed, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSiteNext(ctx, "parked", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	s, err := reg.Site(ctx, "parked")
	if err != nil {
		t.Fatal(err)
	}
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	runCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := h.One(runCtx, s, "", nil, nil, nil); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a harvest into a sink that cannot be opened succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the harvest of site parked (its sink cannot be opened) has not returned")
	}
}
