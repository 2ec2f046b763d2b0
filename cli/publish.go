package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/internal/httpserve"
	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/publish/publisher"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// publishFlags are the settings of a publication, shared by "publish",
// "publish serve" and the daemon (there with the prefix "publish-").
type publishFlags struct {
	prefix                          string
	stateFile, out, baseURL, period string
	copies, dumps                   bool
	listen, copiesFrom, dumpSize    string
	fromES                          string
}

func (f *publishFlags) register(c *cobra.Command, withState bool) {
	fl := c.Flags()
	p := f.prefix
	if withState {
		registerState(fl, &f.stateFile)
		fl.StringVar(&f.fromES, "from-es", "", "publish instead from the resource and change documents an es sink wrote: http://HOST:PORT[/es]/INDEX[?changes=INDEX&resource_set=NAME]")
	}
	fl.StringVar(&f.out, p+"out", "", "output directory: generations of documents, the published one linked as DIR/current")
	fl.StringVar(&f.baseURL, p+"base-url", "", "absolute http(s) URL at which DIR/current is served")
	fl.StringVar(&f.period, p+"change-period", "1d", "span of one Change List: 1d, 1w, 12h, …")
	fl.BoolVar(&f.copies, p+"copies", false, `republish as an aggregator: each entry's loc is rsharvest's copy under BASE-URL/sets/SET/files/ (served by publish serve), and its rs:ln rel="via" the original`)
	fl.StringVar(&f.copiesFrom, p+"copies-from", "", "the sink holding the bodies (fs:DIR or s3://…): what --"+p+"dumps packs, and, for serving, the one sink all copies are read from (default: each copy from the sinks of the registry site that harvests its set)")
	fl.BoolVar(&f.dumps, p+"dumps", false, "also write a Resource Dump of each set: ZIP packages of the bodies in --"+p+"copies-from, manifest.xml first")
	fl.StringVar(&f.dumpSize, p+"dump-size", "1GiB", "most body bytes in one dump package (e.g. 500MB, 1GiB)")
}

func (f *publishFlags) registerServe(c *cobra.Command) {
	c.Flags().StringVar(&f.listen, f.prefix+"listen", "", "serve the published documents (and copies) here, e.g. 127.0.0.1:8480")
}

// bodies opens --copies-from's sink, if given, as an Inventory.
func (f *publishFlags) bodies(ctx context.Context) (sink.Inventory, func(context.Context) error, error) {
	inv, closeBodies, err := publisher.OpenBodies(ctx, harvest.SinkKinds(), f.copiesFrom)
	if errors.Is(err, publisher.ErrNoInventory) {
		return nil, nil, usagef("--%scopies-from %v", f.prefix, err)
	}
	return inv, closeBodies, err
}

// options checks the flags and gives the publication's options.
func (f *publishFlags) options(log *slog.Logger) (publish.Options, error) {
	p := "--" + f.prefix
	if f.out == "" {
		return publish.Options{}, usagef("%sout is required", p)
	}
	if f.baseURL == "" {
		return publish.Options{}, usagef("%sbase-url is required", p)
	}
	base, err := publish.CheckBaseURL(f.baseURL)
	if err != nil {
		return publish.Options{}, usagef("%sbase-url: %v", p, err)
	}
	period, err := publish.ParsePeriod(f.period)
	if err != nil {
		return publish.Options{}, usagef("%schange-period: %v", p, err)
	}
	if f.dumps && f.copiesFrom == "" {
		return publish.Options{}, usagef("%sdumps needs %scopies-from: the sink holding the bodies", p, p)
	}
	var size int64
	if f.dumps {
		n, err := parseBytes(f.dumpSize)
		if err != nil || n < 1 {
			return publish.Options{}, usagef("%sdump-size %q: want a size such as 500MB or 1GiB", p, f.dumpSize)
		}
		size = n
	}
	return publish.Options{Out: f.out, BaseURL: base, ChangePeriod: period, Copies: f.copies, DumpSize: size, Log: log}, nil
}

// serve serves the publication on f.listen until ctx ends; stop ends it
// sooner. Without --listen it serves nothing.
func (f *publishFlags) serve(ctx context.Context, a *app, log *slog.Logger, st *state.Store) (stop func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if f.listen == "" {
		return none, nil
	}
	srv := &publish.Server{Out: f.out, BaseURL: f.baseURL, Log: log}
	inv, closeCopies, err := f.bodies(ctx)
	if err != nil {
		return nil, err
	}
	if inv != nil {
		srv.Copies = inv
	} else if st != nil {
		// No one sink named: each copy from the sinks of the site
		// that harvests its source.
		sc := &publisher.SiteCopies{Store: st, Sinks: harvest.SinkKinds()}
		srv.Copies, closeCopies = sc, sc.Close
	}
	stopHTTP, addr, err := publisher.Serve(ctx, srv, f.listen)
	if err != nil {
		closeCopies(ctx)
		if errors.As(err, new(*httpserve.ListenError)) {
			return nil, usagef("--%slisten %v", f.prefix, err)
		}
		return nil, usagef("--%sbase-url: %v", f.prefix, err)
	}
	a.outMu.Lock()
	fmt.Fprintf(a.stdout, "serving the published source at http://%s/ (%s)\n", addr, f.baseURL)
	a.outMu.Unlock()
	log.Info("publish serve", "listen", addr, "base-url", f.baseURL)
	return func(ctx context.Context) error {
		stopHTTP()
		return closeCopies(ctx)
	}, nil
}

// publisher returns the publisher of h with opts, with the sink of the
// bodies open when dumps are asked for; close closes that sink.
func (f *publishFlags) publisher(ctx context.Context, a *app, h publish.Holdings, opts publish.Options) (p *publisher.Publisher, close func(), err error) {
	close = func() {}
	if f.dumps {
		inv, closeBodies, err := f.bodies(ctx)
		if err != nil {
			return nil, nil, err
		}
		opts.Bodies = inv
		close = func() { _ = closeBodies(context.WithoutCancel(ctx)) }
	}
	return &publisher.Publisher{Holdings: h, Options: opts, Published: func(res publish.Result) {
		a.outMu.Lock()
		defer a.outMu.Unlock()
		fmt.Fprintf(a.stdout, "published %s: %d resource sets, %d resources, %d changes, current to %s; %d documents written, %d unchanged\n",
			res.Generation, res.Sets, res.Resources, res.Changes, res.At.Format("2006-01-02T15:04:05.999999999Z07:00"), res.Written, res.Kept)
	}}, close, nil
}

// holdings opens what to publish: the es sink's index (--from-es), or the
// state store. close releases it.
func (f *publishFlags) holdings(ctx context.Context, opts []state.Option) (h publish.Holdings, close func() error, err error) {
	if f.fromES == "" && !stateExists(f.stateFile) {
		_, err := os.Stat(f.stateFile)
		return nil, nil, usagef("--state: %v", err)
	}
	return publisher.OpenHoldings(ctx, f.stateFile, f.fromES, opts...)
}

// publishCommand returns the "publish" command and its "serve".
func (a *app) publishCommand() *cobra.Command {
	var f publishFlags
	c := &cobra.Command{
		Use:   "publish",
		Short: "Publish what the state holds as a ResourceSync Source (Source Description, Capability Lists, Resource and Change Lists)",
		Long: `Writes a complete ResourceSync Source from the state store: a Source Description
(DIR/current/.well-known/resourcesync), a Capability List per source harvested, its Resource List
(an index with pages past 50,000 entries or 50 MB a document) and its Change Lists, one per
--change-period, closed ones with until and the current one open, under a Change List Index. Each
entry's loc is the resource's own URI (an OAI-PMH identifier too), written as an RFC 3986 URI. With
--copies rsharvest republishes as the ResourceSync specification's aggregator: each entry's loc is the
copy rsharvest holds (which "publish serve" serves), with its hash, length and type, and an rs:ln
rel="via" names the original (the one it came with, when it was harvested from another aggregator):
a Destination then fetches everything from rsharvest, whatever the origin does. Each source's set is
named after the registry site that harvests it.

Each run writes a new generation and moves DIR/current to it in one rename, so a reader never sees
a half-written set; a document whose bytes did not change is kept (hard-linked), not rewritten.
Serve DIR/current at --base-url, or run "rsharvest publish serve".`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts, err := f.options(a.logger())
			if err != nil {
				return err
			}
			h, closeH, err := f.holdings(c.Context(), a.stateOptions(f.stateFile))
			if err != nil {
				return err
			}
			defer closeH()
			pub, closePub, err := f.publisher(c.Context(), a, h, opts)
			if err != nil {
				return err
			}
			defer closePub()
			_, err = pub.Run(c.Context())
			return err
		},
	}
	f.register(c, true)
	c.AddCommand(a.publishServeCommand())
	return c
}

// publishServeCommand returns "publish serve".
func (a *app) publishServeCommand() *cobra.Command {
	var (
		f     publishFlags
		every string
	)
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the published Source over HTTP (ETag, Last-Modified, conditional requests, Range), regenerating it on a schedule",
		Long: `Serves DIR/current at --base-url's path on --listen: every document with ETag and Last-Modified
(unchanged documents keep both across generations), conditional requests and Range; the Source
Description also at /.well-known/resourcesync; the held copy of each resource at BASE-URL/sets/SET/files/… (the
locs of "publish --copies"): from the sink --copies-from names, else from the sinks of the
registry site (in --state) that harvests the resource's source. With --every (a schedule: "every 1h",
"every 1d" or a cron expression) it publishes from --state at start and then on the schedule. It runs
until SIGTERM or SIGINT. Inside the daemon the same is done after each harvest (daemon --publish-out).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			log := a.logger()
			if f.listen == "" {
				return usagef("--listen is required")
			}
			opts, err := f.options(log)
			if err != nil {
				return err
			}
			var sched site.Schedule
			if every != "" {
				if sched, err = site.ParseSchedule(every); err != nil {
					return usagef("--every: %v", err)
				}
			}
			var pub *publisher.Publisher
			if !sched.IsZero() {
				h, closeH, err := f.holdings(ctx, a.stateOptions(f.stateFile))
				if err != nil {
					return err
				}
				defer closeH()
				var closePub func()
				if pub, closePub, err = f.publisher(ctx, a, h, opts); err != nil {
					return err
				}
				defer closePub()
				if _, err := pub.Run(ctx); err != nil {
					return err
				}
			}
			// Without --copies-from, the copies come from each site's own
			// sinks, which the state's registry names.
			var st *state.Store
			if f.copiesFrom == "" && f.fromES == "" {
				if stateExists(f.stateFile) {
					if st, err = state.Open(ctx, f.stateFile, a.stateOptions(f.stateFile)...); err != nil {
						return err
					}
					defer st.Close()
				}
			}
			stop, err := f.serve(ctx, a, log, st)
			if err != nil {
				return err
			}
			defer stop(context.WithoutCancel(ctx))
			if pub == nil {
				<-ctx.Done()
				return nil
			}
			publish.Every(ctx, sched, func(ctx context.Context) error {
				_, err := pub.Run(ctx)
				return err
			}, log)
			return nil
		},
	}
	f.register(c, true)
	f.registerServe(c)
	c.Flags().StringVar(&every, "every", "", `publish from --state (or --from-es) at start and on this schedule ("every 1h", "every 1d", or cron); without it, only serve`)
	return c
}

// parseBytes reads a size such as 500MB or 1GiB (the bench's rate syntax
// without "/s": KB, MB, GB powers of 1000; KiB, MiB, GiB of 1024).
func parseBytes(s string) (int64, error) {
	v, err := harness.ParseRate(s)
	return int64(v), err
}
