package cli

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
)

func (a *app) genCommand() *cobra.Command {
	var (
		o  bench.GenOptions
		hl bench.HarvestListOptions
		// harvestList: write a harvest list site instead (seed 004).
		harvestList bool
	)
	c := &cobra.Command{
		Use:   "gen",
		Short: "Write a deterministic synthetic ResourceSync source (Resource Dump and ZIP packages), or with --harvest-list a site's harvest list and its EML documents, to a directory",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if harvestList {
				if o.Dir == "" {
					return usagef("--out is required")
				}
				hl.Dir, hl.Base, hl.Seed, hl.Odd = o.Dir, o.Base, uint64(o.Seed), true
				if err := bench.GenerateHarvestList(c.Context(), hl); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "wrote a harvest list of %d documents (round %d) to %s: serve it and harvest %sharvestlist.xml with --protocol harvest-list\n",
					cmp.Or(hl.Documents, 20), hl.Round, o.Dir, bench.Placeholder)
				return nil
			}
			if o.Dir == "" || o.Resources < 1 {
				return usagef("--out and --resources (≥ 1) are required")
			}
			o.Logger = a.logger()
			res, err := bench.Generate(c.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %d resources (%d bytes) in %d packages (%d bytes) to %s\n",
				res.Resources, res.PayloadBytes, res.Packages, res.PackageBytes, o.Dir)
			if res.ChangePackages > 0 {
				fmt.Fprintf(a.stdout, "and %d changes in %d change packages (%d bytes)\n", res.Changes, res.ChangePackages, res.ChangeBytes)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.Dir, "out", "", "directory to write the source to")
	fl.IntVar(&o.Resources, "resources", 0, "number of resources")
	o.Seed, o.MeanSize, o.SizeDist, o.Producer, o.CompressibleShare, o.StoredShare = 1, 50<<10, bench.LogNormal, bench.ProducerRsharvest, 0.5, -1
	o.RegisterContent(fl)
	fl.IntVar(&o.IndexThreshold, "index-threshold", 100, "packages per Resource Dump before a Resource Dump Index is written")
	fl.BoolVar(&o.NoOddNames, "no-odd-names", false, "leave out the awkward URIs (query strings, non-ASCII, prefix directories, long names)")
	fl.BoolVar(&o.WriteResources, "write-resources", false, "also write a Resource List and the resources as plain files")
	fl.StringVar(&o.Base, "base", "", "URL prefix of every document, package and resource (default: a placeholder that serve rewrites)")
	fl.IntVar(&o.ChangePackages, "change-packages", 0, "number of Change Dump packages (0: no Change Dump)")
	fl.IntVar(&o.ChangesPerPackage, "changes-per-package", 0, "changes per Change Dump package (default: resources/20)")
	fl.Float64Var(&o.CreateShare, "create-share", 0, "share of changes that create a resource (default 0.1)")
	fl.Float64Var(&o.DeleteShare, "delete-share", 0, "share of changes that delete a resource (default 0.05)")
	fl.DurationVar(&o.ChangeInterval, "change-interval", 0, "time each Change Dump package covers (default 1h)")
	fl.BoolVar(&o.ClosedLast, "closed", false, "close the last Change Dump package (default: the change dump stays open)")
	fl.BoolVar(&harvestList, "harvest-list", false, "write a site's harvest list (seed 004) and its EML documents instead: several revisions, a docid listed twice, one document not well-formed, one in another namespace, one unreachable, an element without a revision, and from --round 1 one listed at a lower revision")
	fl.IntVar(&hl.Documents, "documents", 20, "with --harvest-list: documents listed")
	fl.IntVar(&hl.Round, "round", 0, "with --harvest-list: how far the site has moved on (each round raises every third document's revision)")
	return c
}

func (a *app) serveCommand() *cobra.Command {
	var dir, addr string
	var publish int
	var every, latency time.Duration
	var static bool
	var ff bench.FaultFlags
	var oai bool
	var oaiOpts bench.OAIOptions
	var oaiQuirks string
	var oaiAdvance time.Duration
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve a directory written by gen (or any static ResourceSync source) on loopback, with Range and ETag support",
		Long: "Serve a directory written by gen (or any static ResourceSync source) on loopback, with Range and ETag support.\n\n" +
			"With --fault-rate above 0 the server injects faults, reproducibly for a --fault-seed: 429s with Retry-After, 5xx storms,\n" +
			"connection resets mid-body, drip-fed and stalled bodies, Range ignored, ETags changed on resume, wrong or missing\n" +
			"Content-Length, flipped bytes in packages (--faults: all, transient, or a list of " + bench.FaultKindNames() + ").\n" +
			"The faults injected, by kind, are printed when the server stops.\n\n" +
			"With --oai it serves a synthetic OAI-PMH 2.0 repository instead (base URL: the server's URL + \"oai\"), with\n" +
			"records that change once (--oai-advance-after) and real servers' habits (--oai-quirks: " + strings.Join(bench.OAIQuirks(), ", ") + ").",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if oai {
				if err := oaiOpts.SetQuirks(oaiQuirks); err != nil {
					return usagef("--oai-quirks: %v", err)
				}
			} else if dir == "" {
				return usagef("--dir is required (or --oai)")
			}
			inj, err := ff.Injector(a.logger())
			if err != nil {
				return usageError{err}
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			so := bench.ServeOptions{Logger: a.logger(), Static: static}
			if latency > 0 || inj != nil {
				so.Wrap = func(h http.Handler) http.Handler {
					if inj != nil {
						h = inj.Wrap(h)
					}
					if latency > 0 {
						h = harness.Wrap(0, latency)(h)
					}
					return h
				}
			}
			if oai {
				return a.serveOAI(ctx, oaiOpts, addr, so.Wrap, inj, oaiAdvance)
			}
			srv, err := bench.Serve(ctx, dir, addr, so)
			if err != nil {
				return usageError{err}
			}
			defer srv.Close()
			if publish >= 0 {
				srv.Handler.Publish(publish) // before anyone knows the URL
			}
			if inj != nil {
				defer func() { fmt.Fprintf(a.stdout, "faults injected: %v\n", inj.Stats()) }()
			}
			fmt.Fprintf(a.stdout, "serving %s at %s\nsource description: %s.well-known/resourcesync\n", dir, srv.URL, srv.URL)
			if inj != nil {
				fmt.Fprintln(a.stdout, ff.Summary())
			}
			if every > 0 {
				srv.Handler.PublishEvery(ctx, publish, every, func(step int) { fmt.Fprintf(a.stdout, "published change package %d\n", step) })
			}
			<-ctx.Done()
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "directory to serve")
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "address to listen on (loopback)")
	c.Flags().BoolVar(&static, "static", false, "serve like a plain static web server: Last-Modified only, no ETag and no Range")
	c.Flags().IntVar(&publish, "publish", -1, "publish only the first N change packages, 0 for none (-1: all)")
	c.Flags().DurationVar(&every, "publish-every", 0, "publish the next change package every interval (with --publish)")
	c.Flags().DurationVar(&latency, "latency", 0, "wait this long before answering each request (a distant server)")
	c.Flags().BoolVar(&oai, "oai", false, "serve a synthetic OAI-PMH repository instead of a directory")
	c.Flags().IntVar(&oaiOpts.Records, "oai-records", 1000, "records the OAI-PMH repository holds at first")
	c.Flags().IntVar(&oaiOpts.PageSize, "oai-page-size", 100, "records per OAI-PMH list response")
	c.Flags().StringVar(&oaiQuirks, "oai-quirks", "", "real servers' habits to take on, comma-separated: "+strings.Join(bench.OAIQuirks(), ", "))
	c.Flags().DurationVar(&oaiAdvance, "oai-advance-after", 0, "after this long, the repository changes once: updates, deletes, new records (0: never)")
	ff.Register(c.Flags())
	return c
}

// serveOAI serves a synthetic OAI-PMH repository until ctx ends.
func (a *app) serveOAI(ctx context.Context, o bench.OAIOptions, addr string, wrap func(http.Handler) http.Handler, inj *bench.FaultInjector, advance time.Duration) error {
	repo := bench.NewOAIRepository(o)
	srv, err := bench.ServeOAI(ctx, repo, addr, wrap)
	if err != nil {
		return usageError{err}
	}
	defer srv.Close()
	if inj != nil {
		defer func() { fmt.Fprintf(a.stdout, "faults injected: %v\n", inj.Stats()) }()
	}
	fmt.Fprintf(a.stdout, "serving an OAI-PMH repository of %d records at %s\n", o.Records, srv.BaseURL)
	if advance > 0 && repo.AdvanceAfter(ctx, advance) {
		fmt.Fprintln(a.stdout, "the repository changed")
	}
	<-ctx.Done()
	return nil
}

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
