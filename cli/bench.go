package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/bench"
)

func (a *app) genCommand() *cobra.Command {
	var o bench.GenOptions
	c := &cobra.Command{
		Use:   "gen",
		Short: "Write a deterministic synthetic ResourceSync source (Resource Dump and ZIP packages) to a directory",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
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
	fl.IntVar(&o.Packages, "packages", 0, "number of ZIP packages (default: one per 5,000 resources)")
	fl.Int64Var(&o.Seed, "seed", 1, "seed of the pseudo-random content")
	fl.IntVar(&o.MeanSize, "size", 50<<10, "mean resource size in bytes")
	fl.StringVar(&o.SizeDist, "size-dist", "lognormal", "size distribution: lognormal, fixed, uniform")
	fl.Float64Var(&o.CompressibleShare, "compressible", 0.5, "share of compressible (text) bodies, 0..1")
	fl.Float64Var(&o.StoredShare, "stored", -1, "share of stored (not deflated) entries, 0..1 (-1: incompressible ones stored)")
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
	return c
}

func (a *app) serveCommand() *cobra.Command {
	var dir, addr string
	var publish int
	var every, latency time.Duration
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve a directory written by gen (or any static ResourceSync source) on loopback, with Range and ETag support",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if dir == "" {
				return usagef("--dir is required")
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt)
			defer stop()
			so := bench.ServeOptions{Logger: a.logger(), Publish: publish}
			if latency > 0 {
				so.Wrap = delayed(latency)
			}
			srv, err := bench.Serve(ctx, dir, addr, so)
			if err != nil {
				return usageError{err}
			}
			defer srv.Close()
			fmt.Fprintf(a.stdout, "serving %s at %s\nsource description: %s.well-known/resourcesync\n", dir, srv.URL, srv.URL)
			if every <= 0 {
				<-ctx.Done()
				return nil
			}
			// Publish one more change package every interval.
			tick := time.NewTicker(every)
			defer tick.Stop()
			for step := publish; ; {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
					step++
					srv.Handler.Publish(step)
					fmt.Fprintf(a.stdout, "published change package %d\n", step)
				}
			}
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "directory to serve")
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "address to listen on (loopback)")
	c.Flags().IntVar(&publish, "publish", 0, "publish only the first N change packages (0: all)")
	c.Flags().DurationVar(&every, "publish-every", 0, "publish the next change package every interval (with --publish)")
	c.Flags().DurationVar(&latency, "latency", 0, "wait this long before answering each request (a distant server)")
	return c
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
	src := filepath.Join(demoDir, "source")
	opts := bench.GenOptions{Dir: src, Resources: resources, Packages: 8, Seed: 1, MeanSize: 16 << 10, IndexThreshold: 4,
		ChangePackages: 4, ChangesPerPackage: max(1, resources/10), Logger: a.logger()}
	if !fileExists(filepath.Join(src, ".well-known", "resourcesync")) {
		fmt.Fprintf(a.stdout, "generating a demo source of %d resources and %d change packages in %s …\n", resources, opts.ChangePackages, src)
		if _, err := bench.Generate(ctx, opts); err != nil {
			return err
		}
	}
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Logger: a.logger()})
	if err != nil {
		return err
	}
	defer srv.Close()
	f := syncFlags{
		source:       srv.URL,
		sinks:        []string{"fs:" + filepath.Join(demoDir, "mirror")},
		state:        filepath.Join(demoDir, "rsharvest.db"),
		report:       filepath.Join(demoDir, "baseline.json"),
		concurrency:  4,
		workers:      2,
		retries:      3,
		stallTimeout: 30 * time.Second,
		progress:     "auto",
		prefer:       "dump",
	}
	// First the snapshot, as the source stood before its changes …
	srv.Handler.Publish(0)
	fmt.Fprintf(a.stdout, "serving it at %s\n\n1. baseline from the Resource Dump into %s (state %s)\n", srv.URL, f.sinks[0], f.state)
	rep, err := a.runSync(ctx, modeBaseline, f)
	if rep != nil {
		fmt.Fprint(a.stdout, rep.Summary())
	}
	if err != nil {
		return err
	}
	// … then the source publishes its Change Dump, and we catch up.
	srv.Handler.Publish(-1)
	f.report = filepath.Join(demoDir, "incremental.json")
	fmt.Fprintf(a.stdout, "\n2. the source publishes %d change packages; catching up from the checkpoint\n", opts.ChangePackages)
	rep2, err := a.runSync(ctx, modeIncremental, f)
	if rep2 != nil {
		fmt.Fprint(a.stdout, rep2.Summary())
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nreports: %s, %s — run the demo again: nothing is rewritten.\n", filepath.Join(demoDir, "baseline.json"), f.report)
	a.code = max(codeOf(rep), codeOf(rep2))
	return nil
}

// delayed wraps a handler so that every response starts after d, as from a
// server far away.
func delayed(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
			}
			next.ServeHTTP(w, r)
		})
	}
}
