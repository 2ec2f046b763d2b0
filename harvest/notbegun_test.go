package harvest_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
)

// TestHarvestNotBegunIsLogged: a site's harvest that fails before its run
// begins (its sink cannot be opened) has no run, yet the harvest log of
// the site shows it with its error, and the day's composite report lists
// it beside the harvests that ran.
func TestHarvestNotBegunIsLogged(t *testing.T) {
	ctx := t.Context()
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, reg := registry(t, `sites:
  - name: nosink
    source: http://127.0.0.1:1/
    sinks: [fs:`+filepath.Join(blocked, "mirror")+`]
    schedule: every 12h
`)
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	s, err := reg.Site(ctx, "nosink")
	if err != nil {
		t.Fatal(err)
	}
	_, runErr := h.One(ctx, s, "", nil, nil, nil)
	if runErr == nil {
		t.Fatal("a harvest into a sink that cannot be opened succeeded")
	}
	if runs, err := st.RunsSince(ctx, time.Time{}, "nosink"); err != nil || len(runs) != 0 {
		t.Fatalf("runs of the site = %+v, %v; want none (the harvest failed before its run)", runs, err)
	}

	entries, err := harvestlog.Read(ctx, st, time.Time{}, "nosink")
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, e := range entries {
		if e.Operation == harvestlog.NotBegun {
			logged = append(logged, e.Detail())
		}
	}
	if len(logged) != 1 || logged[0] != runErr.Error() {
		t.Errorf("the site's log shows %q; want one %q line with the error %q", logged, harvestlog.NotBegun, runErr)
	}

	dir := t.TempDir()
	if err := harvest.Daily(ctx, st, &notify.Sender{Dir: dir, Store: st}, time.Now()); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "admin-day*.txt"))
	if err != nil || len(files) != 1 {
		t.Fatalf("daily reports written: %v, %v; want one", files, err)
	}
	text, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "nosink") || !strings.Contains(string(text), "mirror") {
		t.Errorf("the daily report does not list the harvest that failed before its run:\n%s", text)
	}
}
