package harvest_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/state"
)

// TestDailyReportBeforeThinning: the daemon's daily job makes the day's
// report before it thins the harvest log: with --keep-runs 1 (a number of
// runs a site), the day's earlier harvests of a site are still reported
// whole, the failed one with its error, the one that wrote 40 resources
// with its count.
func TestDailyReportBeforeThinning(t *testing.T) {
	ctx := t.Context()
	st := hourlySite(t)
	now := time.Now().UTC()
	for i, r := range []runreport.Report{
		{Mode: "incremental", Status: "failed", Error: "sink fs:/srv/a: no space left on device"},
		{Mode: "incremental", Status: "ok", Resources: runreport.Resources{Written: 40}},
		{Mode: "incremental", Status: "ok"},
	} {
		started := now.Add(time.Duration(i-3) * time.Hour)
		id, err := st.BeginRun(ctx, state.Run{Mode: r.Mode, Source: "http://127.0.0.1:1/rs/", Site: "a", Started: started})
		if err != nil {
			t.Fatal(err)
		}
		r.RunID, r.Started, r.Finished = id, started, started.Add(time.Minute)
		b, _ := json.Marshal(&r)
		if err := st.FinishRun(ctx, id, r.Finished, r.Status, b); err != nil {
			t.Fatal(err)
		}
	}
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler), KeepLog: state.LogKeep{PerSite: 1}}
	dir := t.TempDir()
	if err := h.DailyJob(ctx, &notify.Sender{Dir: dir, Store: st}, now); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "admin-day*.txt"))
	if len(files) != 1 {
		t.Fatalf("daily reports: %v", files)
	}
	text, _ := os.ReadFile(files[0])
	if !strings.Contains(string(text), "no space left on device") {
		t.Errorf("the day's failed harvest is reported without its error:\n%s", text)
	}
	if !strings.Contains(string(text), "In all: 40 written") {
		t.Errorf("the day's composite no longer counts what the day's harvests wrote:\n%s", text)
	}
}

// TestDailyRestartSameDate: a daemon started at 01:00 (its date's report
// sent) and restarted at 10:00 sends no second report that date, and its
// next report covers from the first one's end: a harvest that failed at
// 05:00 is told, once.
func TestDailyRestartSameDate(t *testing.T) {
	ctx := t.Context()
	st := hourlySite(t)
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	addRun := func(at time.Duration, status string) {
		started := day.Add(at)
		rep := runreport.Report{Mode: "incremental", Status: status, Started: started, Finished: started.Add(time.Minute), Error: map[string]string{"failed": "harvest at five: refused"}[status]}
		id, err := st.BeginRun(ctx, state.Run{Mode: rep.Mode, Source: "http://127.0.0.1:1/rs/", Site: "a", Started: started})
		if err != nil {
			t.Fatal(err)
		}
		rep.RunID = id
		b, _ := json.Marshal(&rep)
		if err := st.FinishRun(ctx, id, rep.Finished, rep.Status, b); err != nil {
			t.Fatal(err)
		}
	}
	m, daily := mailedDaily(t, st, day)
	addRun(30*time.Minute, "ok")
	daily(time.Hour) // the daemon starts at 01:00
	addRun(5*time.Hour, "failed")
	daily(10 * time.Hour) // restarted at 10:00 (an upgrade)
	daily(34 * time.Hour) // 24 hours later
	if n := strings.Count(strings.Join(m.texts, "\n"), "harvest at five"); n != 1 || len(m.texts) != 2 {
		t.Errorf("%d daily reports mailed, %d telling of the harvest that failed at 05:00; want 2 and 1:\n%s", len(m.texts), n, strings.Join(m.texts, "\n----\n"))
	}
}

// hourlySite is a registry of one site, a, harvested every hour.
func hourlySite(t *testing.T) *state.Store {
	t.Helper()
	st, _ := registry(t, `sites:
  - name: a
    source: http://127.0.0.1:1/rs/
    sinks: [fs:`+filepath.Join(t.TempDir(), "mirror")+`]
    schedule: every 1h
`)
	return st
}

// mailedDaily is the daily report of st mailed to a recordMailer, made
// at a time from day.
func mailedDaily(t *testing.T, st *state.Store, day time.Time) (*recordMailer, func(at time.Duration)) {
	t.Helper()
	m := &recordMailer{}
	rs := &notify.Sender{Mail: m, Admin: "admin@aggregator.example", Store: st}
	return m, func(at time.Duration) {
		if err := harvest.Daily(t.Context(), st, rs, day.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
}

type recordMailer struct{ texts []string }

func (m *recordMailer) Send(_ context.Context, _ []string, _, text, _ string) error {
	m.texts = append(m.texts, text)
	return nil
}

// TestDailyHarvestRunningAtReport: a harvest still running when a daily
// report goes out is in the next one (reports take harvests by their end),
// once.
func TestDailyHarvestRunningAtReport(t *testing.T) {
	ctx := t.Context()
	st := hourlySite(t)
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	m, daily := mailedDaily(t, st, day)
	started := day.Add(50 * time.Minute)
	id, err := st.BeginRun(ctx, state.Run{Mode: "incremental", Source: "http://127.0.0.1:1/rs/", Site: "a", Started: started})
	if err != nil {
		t.Fatal(err)
	}
	daily(time.Hour) // 01:00: the harvest begun at 00:50 is still running
	rep := runreport.Report{RunID: id, Mode: "incremental", Status: "failed", Started: started, Finished: day.Add(2 * time.Hour), Error: "harvest at ten to one: refused"}
	b, _ := json.Marshal(&rep)
	if err := st.FinishRun(ctx, id, rep.Finished, rep.Status, b); err != nil {
		t.Fatal(err)
	}
	daily(25 * time.Hour) // the next day
	if n := strings.Count(strings.Join(m.texts, "\n"), "ten to one"); n != 1 {
		t.Errorf("the harvest running at the first report is told by %d daily reports, want 1:\n%s", n, strings.Join(m.texts, "\n----\n"))
	}
}
