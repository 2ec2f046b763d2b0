package harvest_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	src "github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// TestUnit executes the units of a spread task through the library, as
// any daemon would: each part is planned alone and recorded done with its
// records; a unit done again does nothing; a unit that cannot be planned
// fails for good and is given up — its part done without records,
// holding every checkpoint — so that the task closes, and closes without
// advancing its checkpoint.
func TestUnit(t *testing.T) {
	ctx := context.Background()
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 120, PageSize: 10})
	srv := httptest.NewServer(repo)
	defer srv.Close()
	mirror := filepath.Join(t.TempDir(), "mirror")
	st, reg := registry(t, `sites:
  - name: oai
    source: `+srv.URL+`/oai
    protocol: oai-pmh
    sinks: [fs:`+mirror+`]
    schedule: every 1d
`)
	s, err := reg.Site(ctx, "oai")
	if err != nil {
		t.Fatal(err)
	}
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	j, err := harvest.SiteJob(s)
	if err != nil {
		t.Fatal(err)
	}
	opts, closeSinks, err := h.Options(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSinks(ctx)
	d, err := pipeline.Divide(ctx, opts, src.Baseline, pipeline.Range{})
	if err != nil || d == nil || len(d.Parts) < 4 {
		t.Fatalf("Divide: %+v, %v", d, err)
	}
	defer d.Close()
	parts := d.Parts
	run, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: s.Source(), Site: s.Name})
	if err != nil {
		t.Fatal(err)
	}
	all := append(parts, "not a part%zz")
	task := state.Task{Source: s.Source(), Site: s.Name, Mode: "baseline", RunID: run, Checkpoints: d.Checkpoints}
	plan := func(i int) ([]byte, error) {
		if i < len(parts) {
			return d.Plan(i)
		}
		return nil, nil
	}
	if task.ID, err = st.CreateTask(ctx, task, all, plan, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if err := h.Unit(ctx, daemon.Unit{Site: s.Name, Task: task.ID, Part: p}, false); err != nil {
			t.Fatalf("unit %s: %v", p, err)
		}
	}
	if err := h.Unit(ctx, daemon.Unit{Site: s.Name, Task: task.ID, Part: parts[0]}, false); err != nil {
		t.Errorf("a unit done again: %v", err)
	}
	if err := h.Unit(ctx, daemon.Unit{Site: s.Name, Task: task.ID, Part: all[len(all)-1]}, false); err == nil {
		t.Error("a unit that cannot be planned succeeded")
	}
	done, err := st.TaskParts(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range done {
		if !p.Done {
			t.Errorf("part %s not done", p.Name)
		}
	}
	if n := countFiles(t, mirror); n != 120 {
		t.Errorf("the mirror holds %d records, want 120", n)
	}
	rep, err := pipeline.CloseTask(ctx, opts, task)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Resources.Written != 120 || rep.Status != "partial" {
		t.Errorf("the task's report: %d written, %s; want 120 written, partial (a unit given up)", rep.Resources.Written, rep.Status)
	}
	if ok, err := st.HasCheckpoint(ctx, s.Source()); err != nil || ok {
		t.Errorf("a checkpoint was set although a unit was given up: %v, %v", ok, err)
	}
}

// countFiles counts the files under dir but the sink's own.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	inv, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close(context.Background())
	n := 0
	if err := inv.Walk(context.Background(), func(string) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
