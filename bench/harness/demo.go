package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/runreport"
)

// DemoRun runs one harvest of the demo's source: a baseline, or an
// incremental run from the baseline's checkpoint; its report is written to
// reportFile.
type DemoRun func(ctx context.Context, incremental bool, source, reportFile string) (*runreport.Report, error)

// Demo is rsharvest demo: it generates (once) a small source in
// dir/source, serves it on loopback, and harvests it with run twice — a
// baseline of the snapshot, then, once the source publishes its change
// packages, an incremental run — saying on out what it does. It returns
// the reports of the runs made.
func Demo(ctx context.Context, dir string, resources int, out io.Writer, log *slog.Logger, run DemoRun) ([]*runreport.Report, error) {
	src := filepath.Join(dir, "source")
	opts := bench.GenOptions{Dir: src, Resources: resources, Packages: 8, Seed: 1, MeanSize: 16 << 10, IndexThreshold: 4,
		ChangePackages: 4, ChangesPerPackage: max(1, resources/10), Logger: log}
	if _, err := os.Stat(filepath.Join(src, ".well-known", "resourcesync")); err != nil {
		fmt.Fprintf(out, "generating a demo source of %d resources and %d change packages in %s …\n", resources, opts.ChangePackages, src)
		if _, err := bench.Generate(ctx, opts); err != nil {
			return nil, err
		}
	}
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	var reps []*runreport.Report
	for i, step := range []struct {
		publish     int
		incremental bool
		report, say string
	}{
		// First the snapshot, as the source stood before its changes …
		{0, false, "baseline.json", fmt.Sprintf("serving it at %s\n\n1. baseline from the Resource Dump into %s\n", srv.URL, filepath.Join(dir, "mirror"))},
		// … then the source publishes its Change Dump, and we catch up.
		{-1, true, "incremental.json", fmt.Sprintf("\n2. the source publishes %d change packages; catching up from the checkpoint\n", opts.ChangePackages)},
	} {
		srv.Handler.Publish(step.publish)
		fmt.Fprint(out, step.say)
		rep, err := run(ctx, step.incremental, srv.URL, filepath.Join(dir, step.report))
		if rep != nil {
			reps = append(reps, rep)
			fmt.Fprint(out, rep.Summary())
		}
		if err != nil {
			return reps, err
		}
		if i == 1 {
			fmt.Fprintf(out, "\nreports: %s, %s — run the demo again: nothing is rewritten.\n", filepath.Join(dir, "baseline.json"), filepath.Join(dir, step.report))
		}
	}
	return reps, nil
}
