package harvest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// TestDailyHarvestRunningAtReport: a harvest still running when a daily
// report goes out is in the next one (reports take harvests by their end),
// once.
func TestDailyHarvestRunningAtReport(t *testing.T) {
	ctx := t.Context()
	st := hourlySite(t)
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	m := &recordMailer{}
	rs := &notify.Sender{Mail: m, Admin: "admin@aggregator.example", Store: st}
	daily := func(at time.Duration) {
		if err := harvest.Daily(ctx, st, rs, day.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
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
