package cli

import (
	"context"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
)

// demoDir is where the demo puts everything it makes.
const demoDir = "rsharvest-demo"

func (a *app) demoCommand() *cobra.Command {
	var resources int
	c := &cobra.Command{
		Use:   "demo",
		Short: "Generate a small source, serve it on loopback, and baseline it into ./" + demoDir,
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.demo(c.Context(), resources)
		},
	}
	c.Flags().IntVar(&resources, "resources", 2000, "number of resources in the demo source")
	return c
}

func (a *app) demo(ctx context.Context, resources int) error {
	f := syncFlags{Job: harvest.DefaultJob(), processOpts: processOpts{State: filepath.Join(demoDir, "rsharvest.db"), Progress: "auto"}, command: "rsharvest demo"}
	f.SourceKey, f.Sinks = "rsharvest-demo", []string{"fs:" + filepath.Join(demoDir, "mirror")}
	f.Workers, f.Retries = 2, 3
	reps, err := harness.Demo(ctx, demoDir, resources, a.stdout, a.logger(), func(ctx context.Context, incremental bool, source, reportFile string) (*runreport.Report, error) {
		f.Source, f.Report = source, reportFile
		mode := modeBaseline
		if incremental {
			mode = modeIncremental
		}
		return a.runSync(ctx, mode, f)
	})
	for _, rep := range reps {
		a.code = max(a.code, codeOf(rep))
	}
	return err
}
