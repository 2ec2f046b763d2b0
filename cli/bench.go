package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/harvest"
)

// benchFlags are the flags of the bench command.
type benchFlags struct {
	gen         bench.GenOptions
	cache       string
	link        string
	connLink    string
	rangeParts  int
	latency     time.Duration
	concurrency []int
	work        string
	jsonFile    string
	svgFile     string
	refs        bool
	compare     []string
	resync      bool
	stages      bool
	verifyAll   bool
	sweep       []int
	rounds      int
}

// benchCommand measures the baseline pipeline against a generated dump on
// loopback, with reference points over the same packages.
func (a *app) benchCommand() *cobra.Command {
	var f benchFlags
	c := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark a baseline from a generated loopback source against the same job in Python, the naive pipeline and the necessary-work limit",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return a.bench(c.Context(), f)
		},
	}
	fl := c.Flags()
	fl.IntVar(&f.gen.Resources, "resources", 2000, "number of resources in the generated dump")
	fl.IntVar(&f.rounds, "rounds", 1, "measure every row this many times, round after round, and keep each row's median (for shared, noisy machines)")
	fl.IntSliceVar(&f.sweep, "sweep", nil, "instead, run once per dump of these numbers of resources, e.g. 10000,100000,1000000 (time against dump size)")
	// The default dump is as real producers write them: Python's
	// zipfile at zlib level 1 deflating every entry, three quarters of the
	// bodies text. The former default is --producer rsharvest --compressible 0.5.
	f.gen.Seed, f.gen.MeanSize, f.gen.SizeDist, f.gen.Producer, f.gen.CompressibleShare, f.gen.StoredShare = 1, 52000, bench.LogNormal, bench.ProducerPython1, 0.75, -1
	f.gen.RegisterContent(fl)
	fl.StringVar(&f.cache, "cache", "", "directory of cached dumps (default $RSHARVEST_CACHE or ~/.cache/rsharvest/bench)")
	fl.StringVar(&f.link, "link", "", "throttle the server's response bodies to this rate, e.g. 50MB/s (default unlimited)")
	fl.StringVar(&f.connLink, "conn-link", "", "also throttle each response body on its own to this rate, e.g. 10MB/s (default unlimited)")
	fl.IntVar(&f.rangeParts, "range-parts", 1, "download each large package as N parallel Range requests (for links where one connection is slower than the link)")
	fl.DurationVar(&f.latency, "latency", 0, "delay every response by this long")
	fl.IntSliceVar(&f.concurrency, "concurrency", []int{4}, "package concurrencies to run the pipeline at, e.g. 1,2,4")
	fl.StringVar(&f.work, "work", "", "directory for mirrors and state (default a temp dir; tmpfs such as /dev/shm recommended)")
	fl.StringVar(&f.jsonFile, "json", "", "write the results as JSON to this file")
	fl.StringVar(&f.svgFile, "svg", "", "write a chart of the results as SVG to this file")
	fl.BoolVar(&f.refs, "refs", true, "also run the reference points (download only, necessary-work limit, naive curl/unzip, the Python job)")
	fl.StringArrayVar(&f.compare, "compare", nil, "also run this other rsharvest binary's baseline against the same server (repeatable): an older build, a build without libdeflate")
	fl.BoolVar(&f.stages, "stages", true, "after the measured runs, profile one more run of the pipeline (at the last concurrency) and of the necessary-work limit, and print their CPU by stage")
	fl.BoolVar(&f.verifyAll, "verify-all", true, "also run the job with every digest an entry lists checked (--verify all) at the last concurrency, with the necessary-work limit and the Python job checking the same; the other rows check the strongest digest, as rsharvest does by default")
	fl.BoolVar(&f.resync, "resync", true, "after the last run, re-sync the unchanged dump: with package skip, by Range, and with manifest copies")
	return c
}

// bench runs the benchmark of the flags and writes its outputs.
func (a *app) bench(ctx context.Context, f benchFlags) error {
	if f.gen.Resources < 1 {
		return usagef("--resources must be at least 1")
	}
	link, err := harness.ParseRate(f.link)
	if err != nil {
		return usageError{err}
	}
	connLink, err := harness.ParseRate(f.connLink)
	if err != nil {
		return usageError{err}
	}
	if f.rangeParts < 1 {
		return usagef("--range-parts must be at least 1")
	}
	if f.latency < 0 {
		return usagef("--latency must not be negative")
	}
	if f.rounds < 1 || (f.rounds > 1 && len(f.sweep) > 0) {
		return usagef("--rounds must be at least 1, and 1 with --sweep")
	}
	for _, n := range f.sweep {
		if n < 1 {
			return usagef("--sweep sizes must be at least 1")
		}
	}
	log := a.logger()
	res, err := harness.Measure(ctx, harness.Options{
		Gen:         f.gen,
		CacheDir:    f.cache,
		WorkDir:     f.work,
		Concurrency: f.concurrency,
		Link:        link,
		ConnLink:    connLink,
		Latency:     f.latency,
		Refs:        f.refs,
		Compare:     f.compare,
		Resync:      f.resync,
		Stages:      f.stages,
		VerifyAll:   f.verifyAll,
		Pipeline:    a.benchPipeline(log, f.rangeParts),
		Logger:      log,
	}, f.rounds, f.sweep)
	if err != nil {
		return err
	}
	if err := res.WriteTable(a.stdout); err != nil {
		return err
	}
	return res.WriteFiles(f.jsonFile, f.svgFile)
}

// benchPipeline builds each run's options exactly as the baseline command
// does, from its default flags with an fs sink and rangeParts.
func (a *app) benchPipeline(log *slog.Logger, rangeParts int) harness.OptionsFunc {
	return func(ctx context.Context, p harness.RunParams) (harvest.RunOptions, func(context.Context) error, error) {
		f := syncFlags{Job: harvest.DefaultJob(), processOpts: processOpts{State: p.StatePath, Progress: "none"}, command: "rsharvest bench"}
		f.Source, f.Sinks, f.Concurrency, f.SpoolDir, f.RangeParts = p.Source, []string{"fs:" + p.SinkDir}, p.Concurrency, p.SpoolDir, rangeParts
		if p.VerifyAll {
			f.Verify = "all"
		}
		return a.pipelineOptions(ctx, f, log)
	}
}
