package cli

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/publish/publisher"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/status"
)

// daemonCommand returns the "daemon" command: the registry's schedule run
// as a service (package daemon, on River).
func (a *app) daemonCommand() *cobra.Command {
	var (
		stateFile    string
		concurrency  int
		units        int
		tick         time.Duration
		waitLock     time.Duration
		spoolDir     string
		listen       string
		jobsDB       string
		jobsSchema   string
		rescueAfter  time.Duration
		metricsSites int
		rf           reportFlags
		pf           = publishFlags{prefix: "publish-"}
		keep         = newKeepLog()
	)
	c := &cobra.Command{
		Use:   "daemon",
		Short: "Run the registry's schedule as a service: each due site harvested as a job, retried when it fails temporarily, resumed after a restart",
		Long: `Runs the schedule of the site registry (see "rsharvest sites") until SIGTERM or SIGINT: every --tick the
registry is read, and each due site becomes a harvest job (River's, kept in the state file), at most one
per site at a time, --sites-concurrency at once. A harvest that fails temporarily (the source unreachable)
is tried again with backoff; one that ends partial or fails for good waits for its next scheduled harvest.
On SIGTERM the running harvests stop, commit what they did with their progress marks, and are taken up
again when the daemon starts next. One daemon per state file: a second one waits (--wait-lock) or refuses.

The jobs live in the state file, or with --jobs-db in a PostgreSQL database that several daemons may share:
each registry's jobs in a schema of its own (--jobs-schema), which one daemon holds at a time.

With --state postgres://… the registry, the harvest log and the jobs (--jobs-schema) are in PostgreSQL,
and any number of daemons, on any machines, run the same registry: one of them (River's leader) queues the
due sites, any of them harvests any site, and a site is never harvested twice at once (its lease, which
"run" takes too). A harvest whose daemon died is taken up by another --rescue-after its start.
A site with spread: true (sites add --spread) is harvested as units: its harvest is divided (OAI-PMH: its
date windows and sets; a ResourceSync baseline: its packages and slices of its lists) into River jobs that any daemon executes, --units at a time; the checkpoint advances
when the last unit has committed; a unit whose daemon died is done again by another.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if concurrency < 1 || tick <= 0 || units < 0 {
				return usagef("--sites-concurrency must be at least 1, --units not negative and --tick positive")
			}
			ctx := c.Context()
			log := a.logger()
			logBuild(log)
			st, err := a.openSitesState(ctx, stateFile, waitLock, c.CommandPath(), log)
			if err != nil {
				return err
			}
			defer st.Close()
			rs, err := rf.sender(st)
			if err != nil {
				return err
			}
			h, done := a.sitesHarvester(st, c.CommandPath())
			h.KeepLog = keep.k
			// Republishing: after each harvest, and once now.
			var pub *publisher.Publisher
			if pf.out != "" {
				opts, err := pf.options(log)
				if err != nil {
					return err
				}
				var closePub func()
				if pub, closePub, err = pf.publisher(ctx, a, publish.FromState(st), opts); err != nil {
					return err
				}
				defer closePub()
				if _, err := pub.Run(ctx); err != nil {
					return err
				}
				stopPub, err := pf.serve(ctx, a, log, st)
				if err != nil {
					return err
				}
				defer stopPub(context.WithoutCancel(ctx))
			}
			log.Info("daemon started", "state", state.Redacted(stateFile), "tick", tick, "sites-concurrency", concurrency)
			o := harvest.DaemonOptions{Command: c.CommandPath(), SpoolDir: spoolDir, Reports: rs, Done: done, Listen: listen, MetricsSites: metricsSites,
				Operator: status.Credentials{Token: os.Getenv("RSHARVEST_STATUS_TOKEN"), User: os.Getenv("RSHARVEST_STATUS_USER"), Password: os.Getenv("RSHARVEST_STATUS_PASSWORD")},
				Viewer:   status.Credentials{Token: os.Getenv("RSHARVEST_STATUS_VIEWER_TOKEN"), User: os.Getenv("RSHARVEST_STATUS_VIEWER_USER"), Password: os.Getenv("RSHARVEST_STATUS_VIEWER_PASSWORD")},
				Schedule: daemon.Options{JobsDB: jobsDB, JobsSchema: jobsSchema, SitesConcurrency: concurrency, UnitsConcurrency: units, Tick: tick, RescueAfter: rescueAfter}}
			if pub != nil {
				o.Publish = func(ctx context.Context) error { _, err := pub.Run(ctx); return err }
			}
			runErr := h.Daemon(ctx, o)
			if errors.Is(runErr, daemon.ErrSchemaInUse) {
				runErr = usageError{runErr}
			}
			log.Info("daemon stopped")
			return runErr
		},
	}
	fl := c.Flags()
	registerState(fl, &stateFile)
	fl.IntVar(&concurrency, "sites-concurrency", 2, "sites harvested at once")
	fl.IntVar(&units, "units", 0, "with --state postgres://…: units of spread harvests (sites with spread: true) this daemon executes at once (default: --sites-concurrency)")
	fl.DurationVar(&tick, "tick", time.Minute, "how often the registry is read for due sites")
	fl.IntVar(&metricsSites, "metrics-sites", status.DefaultMetricsSites, "a registry of at most this many sites gives every site's own series in /metrics; a larger one, those of the sites marked metrics: true alone (sites add --metrics)")
	fl.DurationVar(&waitLock, "wait-lock", 0, "wait this long for another daemon or run to release the state file (0: refuse at once)")
	fl.Var(keep, "keep-runs", keepRunsHelp)
	fl.StringVar(&spoolDir, "spool-dir", "", "directory for packages being unpacked (default: the system's temporary directory)")
	fl.StringVar(&listen, "listen", "127.0.0.1:8474", `serve the status page, /metrics and /healthz here ("": not at all); an operator, who may also act (harvest now, pause, resume, change a schedule), is $RSHARVEST_STATUS_TOKEN (a bearer token) or $RSHARVEST_STATUS_USER and $RSHARVEST_STATUS_PASSWORD; a viewer, who only sees, $RSHARVEST_STATUS_VIEWER_TOKEN or $RSHARVEST_STATUS_VIEWER_USER and $RSHARVEST_STATUS_VIEWER_PASSWORD; without any, only /healthz answers`)
	fl.StringVar(&jobsDB, "jobs-db", "", `keep the jobs in this PostgreSQL database (postgres://user@host:port/db; the password from $PGPASSWORD or ~/.pgpass) instead of the state file`)
	fl.StringVar(&jobsSchema, "jobs-schema", "rsharvest", "with --jobs-db or --state postgres://…: the schema of this registry's jobs (made when absent)")
	fl.DurationVar(&rescueAfter, "rescue-after", 30*time.Second, "a harvest running this long whose daemon is gone (its site's lease free) is given to another daemon")
	rf.register(c)
	pf.register(c, false)
	pf.registerServe(c)
	return c
}
