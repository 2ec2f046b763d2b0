package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

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
	return c
}

func (a *app) serveCommand() *cobra.Command {
	var dir, addr string
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
			srv, err := bench.Serve(ctx, dir, addr, bench.ServeOptions{Logger: a.logger()})
			if err != nil {
				return usageError{err}
			}
			defer srv.Close()
			fmt.Fprintf(a.stdout, "serving %s at %s\nsource description: %s.well-known/resourcesync\n", dir, srv.URL, srv.URL)
			<-ctx.Done()
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "directory to serve")
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "address to listen on (loopback)")
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
	opts := bench.GenOptions{Dir: src, Resources: resources, Packages: 8, Seed: 1, MeanSize: 16 << 10, IndexThreshold: 4, Logger: a.logger()}
	if !fileExists(filepath.Join(src, ".well-known", "resourcesync")) {
		fmt.Fprintf(a.stdout, "generating a demo source of %d resources in %s …\n", resources, src)
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
		source:      srv.URL,
		sinks:       []string{"fs:" + filepath.Join(demoDir, "mirror")},
		state:       filepath.Join(demoDir, "rsharvest.db"),
		report:      filepath.Join(demoDir, "report.json"),
		concurrency: 4,
		workers:     2,
		retries:     3,
		progress:    "auto",
	}
	f.stallTimeout = 30e9
	fmt.Fprintf(a.stdout, "serving it at %s; baseline into %s (state %s) …\n", srv.URL, f.sinks[0], f.state)
	rep, err := a.runSync(ctx, modeBaseline, f)
	if rep != nil {
		fmt.Fprint(a.stdout, rep.Summary())
		fmt.Fprintf(a.stdout, "report: %s — run the demo again: everything is unchanged and nothing is rewritten.\n", f.report)
	}
	if err != nil {
		return err
	}
	a.code = codeOf(rep)
	return nil
}
