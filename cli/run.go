package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// runCommand returns the "run" command: harvest the named sites of the
// registry now, or every site that is due (--due), several at once, each
// an independent task — what a crontab line calls. It takes every setting
// of how a harvest goes (config.OfRun: --bwlimit, --retries, --progress,
// --dry-run…), laid over each site's own for this run.
func (a *app) runCommand() *cobra.Command {
	var (
		f           syncFlags
		due         bool
		concurrency int
		rf          reportFlags
		keep        = newKeepLog()
	)
	c := &cobra.Command{
		Use:               "run [SITE…]",
		ValidArgsFunction: a.completeSites(&f.State),
		Short:             "Harvest the named sites of the registry now, or every site that is due (--due), several at once",
		Long: `Harvests sites of the registry (see "rsharvest sites"): the named ones now, or with --due every site
whose next harvest has come. Each site is synced as "rsharvest sync" would (a baseline the first time, then
incremental), --sites-concurrency at a time, each on its own; a site that fails does not stop the others.
Its last harvest is recorded and its next derived from its schedule. The flags of how a harvest goes
(--bwlimit, --retries, --max-delete, …) are laid over each site's own settings for this run; --dry-run
prints what each site's harvest would do and changes nothing; --progress shows the harvest of one site. While a daemon holds the state file, the
sites named are handed to it: it harvests them at once, as its status page's "harvest now" does.
Exit 0 when every site harvested succeeded, 1 otherwise, 2 for an unknown site or a refused definition.`,
		RunE: func(c *cobra.Command, args []string) error {
			if due == (len(args) > 0) {
				return usagef("run: name the sites to harvest, or give --due (not both)")
			}
			if concurrency < 1 {
				return usagef("--sites-concurrency must be at least 1")
			}
			ctx := c.Context()
			log := a.logger()
			logBuild(log)
			var st *state.Store
			var err error
			if f.dryRun {
				st, err = a.openStateToRead(ctx, f.State)
			} else {
				st, err = a.openSitesState(ctx, f.State, f.WaitLock, c.CommandPath(), log)
			}
			var locked *state.LockedError
			if errors.As(err, &locked) && !due && isDaemon(locked.Holder) {
				return a.askDaemon(ctx, f.State, locked.Holder, args)
			}
			if err != nil {
				return err
			}
			defer st.Close()
			sites, err := harvest.Chosen(ctx, site.Registry{Store: st}, args, due, time.Now())
			if errors.Is(err, site.ErrUnreadable) {
				// The others due are harvested; the run ends partial.
				fmt.Fprintln(a.stderr, "rsharvest:", err)
				defer func() { a.code = max(a.code, ExitPartial) }()
			} else if err != nil {
				return noSite(err)
			}
			if len(sites) == 0 {
				fmt.Fprintln(a.stdout, "no site is due")
				return nil
			}
			var rs *notify.Sender // a dry run sends no report
			if !f.dryRun {
				if rs, err = rf.sender(st); err != nil {
					return err
				}
			}
			h, done := a.sitesHarvester(st, c.CommandPath())
			h.KeepLog = keep.k
			h.Over = harvest.Over(f.Job, settings().Given(c.Flags().Changed))
			if h.DryRun = f.dryRun; f.dryRun {
				h.Preview = a.printPreview()
			}
			// The progress display follows one harvest: a run's counts are
			// its own (its report's), not to be shared by several sites.
			counts := &harvest.Counts{}
			shown := f.Progress
			if a.quiet || len(sites) > 1 || (f.dryRun && shown == "auto") {
				shown = "none" // a dry run's lines go to standard output
			}
			stopProgress := a.display().Start(ctx, shown, counts, log)
			if len(sites) == 1 {
				h.Counts = counts
			}
			ok, err := h.RunSites(ctx, c.CommandPath(), sites, concurrency, "", rs, done)
			stopProgress()
			if err != nil {
				return err
			}
			if !ok {
				a.code = ExitPartial
			}
			return nil
		},
	}
	f.Job = harvest.DefaultJob()
	f.processOpts = processOpts{State: defaultStateFile(), Progress: "auto"}
	fl := c.Flags()
	registerSettings(fl, settings(), config.AsFlag|config.OfRun, &f.Job, &f.processOpts)
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what each site's harvest would fetch, write and delete, changing nothing: not the sinks, not the state, not the registry's last and next harvests")
	fl.BoolVar(&due, "due", false, "harvest every site whose next harvest has come")
	fl.IntVar(&concurrency, "sites-concurrency", 2, "sites harvested at once")
	fl.Var(keep, "keep-runs", keepRunsHelp)
	rf.register(c)
	return c
}

// keepRunsHelp is the help of --keep-runs, a flag of the commands that
// harvest registry sites.
const keepRunsHelp = "how much of the harvest log to keep: an age (90d, 12w, 1y), a number of runs a site (100), or all; once a day, the older runs lose their reports and failures (each keeps its one-line record) and the older log lines go"

// keepLog is the value of --keep-runs (harvest.ParseKeepLog).
type keepLog struct {
	s string
	k state.LogKeep
}

func newKeepLog() *keepLog {
	k, _ := harvest.ParseKeepLog(harvest.DefaultKeepLog)
	return &keepLog{s: harvest.DefaultKeepLog, k: k}
}

func (v *keepLog) String() string { return v.s }
func (v *keepLog) Type() string   { return "age|runs" }

func (v *keepLog) Set(s string) error {
	k, err := harvest.ParseKeepLog(s)
	if err != nil {
		return err
	}
	v.s, v.k = s, k
	return nil
}

// isDaemon reports whether the holder of a state file is a daemon.
func isDaemon(h state.Holder) bool { return strings.HasSuffix(h.Command, " daemon") }

// askDaemon hands the sites named to the daemon that holds the state file
// at file (holder): each is made due now in the registry, as the status
// page's "harvest now" does (harvest.Harvester.Act, in the harvest log),
// which the daemon reads within a second and harvests.
func (a *app) askDaemon(ctx context.Context, file string, holder state.Holder, names []string) error {
	st, err := a.openStateToRead(ctx, file)
	if err != nil {
		return err
	}
	defer st.Close()
	sites, err := harvest.Chosen(ctx, site.Registry{Store: st}, names, false, time.Now())
	if err != nil {
		return noSite(err)
	}
	h := &harvest.Harvester{Store: st, Log: a.logger()}
	for _, s := range sites {
		if err := h.Act(ctx, site.Action{Verb: site.ActHarvest, Site: s.Name, Who: fmt.Sprintf("rsharvest run (pid %d)", os.Getpid())}); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "site %s: handed to the daemon that holds the state file (%s), which harvests it now; follow it with: rsharvest log --site %s\n", s.Name, holder, s.Name)
	}
	return nil
}

// openSitesState opens the state store for harvesting sites, several at
// once, holding its lock. Runs still recorded as running in a state file
// are then those of dead processes: they are marked interrupted here, once
// (the site runs share the store, see pipeline.Options.StoreShared). A
// store kept in PostgreSQL is shared with other machines, whose runs may be
// alive: each run marks those of its own source, under its lease.
func (a *app) openSitesState(ctx context.Context, file string, waitLock time.Duration, command string, log *slog.Logger) (*state.Store, error) {
	st, err := a.openState(ctx, syncFlags{processOpts: processOpts{State: file, WaitLock: waitLock}, command: command}, log)
	if err != nil || st.PostgresURL() != "" {
		return st, err
	}
	if n, err := st.MarkInterrupted(ctx, time.Now().UTC(), "", nil); err != nil {
		st.Close()
		return nil, err
	} else if n > 0 {
		log.Warn("earlier runs did not finish (interrupted); their sites pick up where they stopped", "runs", n)
	}
	return st, nil
}

// harvester of registry sites on the shared store st, printing each
// site's summary as its harvest ends.
func (a *app) sitesHarvester(st *state.Store, command string) (*harvest.Harvester, harvest.Harvested) {
	h := a.harvester(st, true, a.logger())
	h.Command = command
	return h, func(s *site.Site, rep *runreport.Report, err, rerr error) {
		var b strings.Builder
		fmt.Fprintf(&b, "site %s: ", s.Name)
		if harvest.InUse(err) {
			fmt.Fprintf(&b, "skipped: %v\n", err)
		} else if rep != nil {
			b.WriteString(summary(rep, err))
			if err != nil && !errors.Is(err, context.Canceled) { // an interruption is said once, by Main
				fmt.Fprintf(&b, "  error: %v\n", err)
			}
		} else {
			fmt.Fprintf(&b, "failed: %v\n", err)
		}
		if rerr != nil {
			fmt.Fprintf(&b, "  recording the harvest in the registry: %v\n", rerr)
		}
		a.outMu.Lock()
		fmt.Fprint(a.stdout, b.String())
		a.outMu.Unlock()
	}
}
