package harvest_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/state"
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

	l, err := harvestlog.Open(ctx, st, time.Time{}, "nosink")
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	if err := l.Each(ctx, func(e harvestlog.Entry) error {
		if e.Operation == harvestlog.NotBegun {
			logged = append(logged, e.Detail())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
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

// TestSiteReportBoundsFailures: a site's report lists the first failures
// of its run and counts the others, without reading them all.
func TestSiteReportBoundsFailures(t *testing.T) {
	ctx := t.Context()
	st, reg := registry(t, `sites:
  - name: many
    source: http://127.0.0.1:1/
    sinks: [fs:`+filepath.Join(t.TempDir(), "mirror")+`]
    schedule: every 12h
`)
	s, err := reg.Site(ctx, "many")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, notify.MaxListed, notify.MaxListed + 37} {
		id, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "http://127.0.0.1:1/", Site: "many"})
		if err != nil {
			t.Fatal(err)
		}
		fails := make([]state.Failure, n)
		for i := range fails {
			fails[i] = state.Failure{RunID: id, URI: fmt.Sprintf("http://127.0.0.1:1/r%d", i), Stage: "download", Error: "HTTP 500"}
		}
		if n > 0 {
			if err := st.AddFailures(ctx, fails); err != nil {
				t.Fatal(err)
			}
		}
		r, err := harvest.SiteReport(ctx, st, s, time.Now(), "partial", &runreport.Report{RunID: id, Status: "partial"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		listed := min(n, notify.MaxListed)
		if len(r.Failures) != listed || r.MoreFailures != n-listed || (n > 0 && r.Failures[0].URI != fails[0].URI) {
			t.Errorf("%d failures: report lists %d and counts %d more; want %d and %d, the first first", n, len(r.Failures), r.MoreFailures, listed, n-listed)
		}
	}
}
