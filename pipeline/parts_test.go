package pipeline

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// TestCloseTask: a spread task's checkpoints are set when every part is
// done, as one run of the whole task would set them: held at the earliest
// temporary failure any part met — a baseline's set not advanced, an
// incremental one at that failure (never before where the task began) —
// and the others advanced; a part not done sets nothing.
func TestCloseTask(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC) }
	const src = "http://src.example/"
	tests := []struct {
		name  string
		mode  source.Mode
		holds []map[string]time.Time // by part
		want  map[string]time.Time   // set → Next (zero: no checkpoint)
	}{
		{"baseline, nothing held", source.Baseline, []map[string]time.Time{nil, nil}, map[string]time.Time{"a": at(10), "b": at(10)}},
		{"baseline, one part held set a", source.Baseline, []map[string]time.Time{nil, {"a": at(3)}}, map[string]time.Time{"b": at(10)}},
		{"baseline, a part held every set", source.Baseline, []map[string]time.Time{{anySet: time.Unix(0, 0).UTC()}, nil}, map[string]time.Time{}},
		{"incremental, held at the earliest", source.Incremental, []map[string]time.Time{{"a": at(5)}, {"a": at(4)}}, map[string]time.Time{"a": at(4), "b": at(10)}},
		{"incremental, held before the range", source.Incremental, []map[string]time.Time{{"a": at(0)}, nil}, map[string]time.Time{"a": at(2), "b": at(10)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st, run := taskStore(t, tc.mode, src)
			var cps []source.Checkpoint
			for _, set := range []string{"a", "b"} {
				cp := source.Checkpoint{ResourceSet: set, Next: at(10)}
				if tc.mode == source.Incremental {
					cp.From, cp.Until = at(2), at(10)
				} else {
					cp.Baseline = at(10)
				}
				cps = append(cps, cp)
			}
			js, _ := json.Marshal(cps)
			var names []string
			for i := range tc.holds {
				names = append(names, string(rune('p'+i)))
			}
			task := state.Task{Source: src, Mode: string(tc.mode), RunID: run, Checkpoints: js}
			var err error
			if task.ID, err = st.CreateTask(ctx, task, names, nil, nil); err != nil {
				t.Fatal(err)
			}
			opts := Options{Store: st, Source: src}
			for i, h := range tc.holds {
				if i == len(tc.holds)-1 {
					// One part left: nothing is set.
					if _, err := CloseTask(ctx, opts, task); !errors.Is(err, ErrPartsLeft) {
						t.Fatalf("CloseTask with a part left: %v, want ErrPartsLeft", err)
					}
					if ok, _ := st.HasCheckpoint(ctx, src); ok {
						t.Fatal("a checkpoint set before every part was done")
					}
				}
				pr, err := st.BeginRun(ctx, state.Run{Mode: string(tc.mode), Source: src})
				if err != nil {
					t.Fatal(err)
				}
				if err := st.FinishRun(ctx, pr, time.Now(), "ok", []byte(`{"resources":{"written":3}}`)); err != nil {
					t.Fatal(err)
				}
				hj, _ := json.Marshal(h)
				if err := st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: task.ID, Name: names[i], RunID: pr, Holds: hj}}); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := CloseTask(ctx, opts, task)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Resources.Written != int64(3*len(tc.holds)) || rep.Status != "ok" {
				t.Errorf("the task's report: %d written, status %s; want the sum of its parts'", rep.Resources.Written, rep.Status)
			}
			for _, set := range []string{"a", "b"} {
				cp, ok, err := st.Checkpoint(ctx, src, set)
				if err != nil {
					t.Fatal(err)
				}
				want, held := tc.want[set]
				if ok != held || (ok && !cp.Next.Equal(want)) {
					t.Errorf("set %s: checkpoint %v (%v), want %v (%v)", set, cp.Next, ok, want, held)
				}
			}
			if _, open, _ := st.OpenTask(ctx, src); open {
				t.Error("the task is still open")
			}
			if r, err := st.Run(ctx, run); err != nil || r.Status != "ok" {
				t.Errorf("the task's run: %+v, %v", r, err)
			}
		})
	}
}

// taskStore opens a state store of the test's own, with the run of site
// "s" of src in mode that a spread task begins with.
func taskStore(t *testing.T, mode source.Mode, src string) (*state.Store, int64) {
	t.Helper()
	st, err := state.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	run, err := st.BeginRun(t.Context(), state.Run{Mode: string(mode), Source: src, Site: "s"})
	if err != nil {
		t.Fatal(err)
	}
	return st, run
}
