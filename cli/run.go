package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// runCommand returns the "run" command: harvest the named sites of the
// registry now, or every site that is due (--due), several at once, each
// an independent task — what a crontab line calls.
func (a *app) runCommand() *cobra.Command {
	var (
		stateFile   string
		due         bool
		concurrency int
		waitLock    time.Duration
		spoolDir    string
		rf          reportFlags
	)
	c := &cobra.Command{
		Use:               "run [SITE…]",
		ValidArgsFunction: a.completeSites(&stateFile),
		Short:             "Harvest the named sites of the registry now, or every site that is due (--due), several at once",
		Long: `Harvests sites of the registry (see "rsharvest sites"): the named ones now, or with --due every site
whose next harvest has come. Each site is synced as "rsharvest sync" would (a baseline the first time, then
incremental), --sites-concurrency at a time, each on its own; a site that fails does not stop the others.
Its last harvest is recorded and its next derived from its schedule. Exit 0 when every site harvested
succeeded, 1 otherwise, 2 for an unknown site or a refused definition.`,
		RunE: func(c *cobra.Command, args []string) error {
			if due == (len(args) > 0) {
				return usagef("run: name the sites to harvest, or give --due (not both)")
			}
			if concurrency < 1 {
				return usagef("--sites-concurrency must be at least 1")
			}
			ctx := c.Context()
			log := a.logger()
			st, err := a.openSitesState(ctx, stateFile, waitLock, c.CommandPath(), log)
			if err != nil {
				return err
			}
			defer st.Close()
			sites, err := harvest.Chosen(ctx, site.Registry{Store: st}, args, due, time.Now())
			if err != nil {
				return noSite(err)
			}
			if len(sites) == 0 {
				fmt.Fprintln(a.stdout, "no site is due")
				return nil
			}
			rs, err := rf.sender(st)
			if err != nil {
				return err
			}
			h, done := a.sitesHarvester(st, c.CommandPath())
			ok, err := h.RunSites(ctx, c.CommandPath(), sites, concurrency, spoolDir, rs, done)
			if err != nil {
				return err
			}
			if !ok {
				a.code = ExitPartial
			}
			return nil
		},
	}
	fl := c.Flags()
	registerState(fl, &stateFile)
	fl.BoolVar(&due, "due", false, "harvest every site whose next harvest has come")
	fl.IntVar(&concurrency, "sites-concurrency", 2, "sites harvested at once")
	fl.DurationVar(&waitLock, "wait-lock", 0, "wait this long for another run to release the state file (0: fail at once)")
	fl.StringVar(&spoolDir, "spool-dir", "", "directory for packages being unpacked (default: the system's temporary directory)")
	rf.register(c)
	return c
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
	if n, err := st.MarkInterrupted(ctx, time.Now().UTC(), ""); err != nil {
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
			if err != nil {
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
