package cli

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/bench/harness"
)

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
			// A source gen wrote is served where it was generated for: its
			// URIs are there.
			base, err := bench.BaseOf(dir)
			if err != nil {
				return usageError{err}
			}
			if base != "" {
				u, _ := url.Parse(base)
				switch {
				case !c.Flags().Changed("listen") && !c.Flags().Changed("addr"):
					addr = u.Host
				case addr != u.Host:
					return usagef("%s was generated for %s: serve it at %s (the default), or generate it again with --base", dir, base, u.Host)
				}
				so.BaseURL = base
			}
			srv, err := bench.Serve(ctx, dir, addr, so)
			if err != nil {
				return usageError{err}
			}
			served := cmp.Or(base, srv.URL)
			defer srv.Close()
			if publish >= 0 {
				srv.Handler.Publish(publish) // before anyone knows the URL
			}
			if inj != nil {
				defer func() { fmt.Fprintf(a.stdout, "faults injected: %v\n", inj.Stats()) }()
			}
			if _, err := os.Stat(filepath.Join(dir, "harvestlist.xml")); err == nil {
				fmt.Fprintf(a.stdout, "serving %s at %s\nharvest list: %sharvestlist.xml (--protocol harvest-list)\n", dir, served, served)
			} else {
				fmt.Fprintf(a.stdout, "serving %s at %s\nsource description: %s.well-known/resourcesync\n", dir, served, srv.URL)
			}
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
	c.Flags().StringVar(&addr, "listen", "127.0.0.1:0", "address to listen on (loopback; default: where gen generated the source for, else a free port)")
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "the former name of --listen")
	_ = c.Flags().MarkDeprecated("addr", "use --listen")
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
