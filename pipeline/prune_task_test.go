package pipeline

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// TestPruneKeepsOpenTaskParts: the runs of the parts of a spread task
// still open are needed: CloseTask sums their reports into the task's and
// finds there the parts that failed. The units' runs belong to no site,
// so a harvest log kept to N runs a site (keep-runs N) would thin them
// while the task waits for its other units; it keeps them until the task
// closes.
func TestPruneKeepsOpenTaskParts(t *testing.T) {
	const src = "http://src.example/"
	tests := []struct {
		name    string
		keep    state.LogKeep
		failed  bool // the first part's unit failed for good
		written int64
		status  string
	}{
		{"keep everything", state.LogKeep{}, true, 3, "partial"},
		{"keep 1 run a site, a part failed", state.LogKeep{PerSite: 1}, true, 3, "partial"},
		{"keep 1 run a site, every part ok", state.LogKeep{PerSite: 1}, false, 6, "ok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st, run := taskStore(t, source.Baseline, src)
			js, _ := json.Marshal([]source.Checkpoint{{ResourceSet: "a", Next: time.Now().UTC(), Baseline: time.Now().UTC()}})
			names := []string{"p", "q"}
			task := state.Task{Source: src, Site: "s", Mode: string(source.Baseline), RunID: run, Checkpoints: js}
			var err error
			if task.ID, err = st.CreateTask(ctx, task, names, nil, nil); err != nil {
				t.Fatal(err)
			}
			for i, name := range names {
				pr, err := st.BeginRun(ctx, state.Run{Mode: string(source.Baseline), Source: src}) // a unit's run: no site
				if err != nil {
					t.Fatal(err)
				}
				status, report := "ok", `{"status":"ok","resources":{"written":3}}`
				if i == 0 && tc.failed {
					status, report = "failed", `{"status":"failed","error":"the source broke","resources":{"failed":1}}`
				}
				if err := st.FinishRun(ctx, pr, time.Now(), status, []byte(report)); err != nil {
					t.Fatal(err)
				}
				if i == 0 && tc.failed {
					err = GiveUpPart(ctx, st, nil, Part{Task: task.ID, Name: name}, pr)
				} else {
					err = st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: task.ID, Name: name, RunID: pr, Holds: []byte("{}")}})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			// The day's pruning, while the harvest waits for its units.
			if !tc.keep.IsZero() {
				if _, err := st.PruneLog(ctx, tc.keep, time.Now(), 0); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := CloseTask(ctx, Options{Store: st, Source: src}, task)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Resources.Written != tc.written || rep.Status != tc.status {
				t.Errorf("the task's report: %d written, status %s; want %d written, status %s (the sum of its parts')",
					rep.Resources.Written, rep.Status, tc.written, tc.status)
			}
		})
	}
}
