package cli

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/report"
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
		Use:   "run [SITE…]",
		Short: "Harvest the named sites of the registry now, or every site that is due (--due), several at once",
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
			st, err := openSitesState(ctx, stateFile, waitLock, c.CommandPath(), log)
			if err != nil {
				return err
			}
			defer st.Close()
			reg := site.Registry{Store: st}
			sites, err := a.chosenSites(ctx, reg, args, due)
			if err != nil {
				return err
			}
			if len(sites) == 0 {
				fmt.Fprintln(a.stdout, "no site is due")
				return nil
			}
			names := make([]string, len(sites))
			for i, s := range sites {
				names[i] = s.Name
			}
			if err := st.AddEvent(ctx, state.Event{Operation: harvestlog.Started, Message: fmt.Sprintf("%s: %d site(s): %s", c.CommandPath(), len(sites), strings.Join(names, ", "))}); err != nil {
				return err
			}
			rs, err := rf.sender(st)
			if err != nil {
				return err
			}
			began := time.Now().UTC()
			h, done := a.sitesHarvester(st)
			reports, ok := h.Sites(ctx, sites, concurrency, spoolDir, rs, done)
			title := fmt.Sprintf("%s at %s", c.CommandPath(), began.Format("2006-01-02 15:04 UTC"))
			if err := rs.Composite(context.WithoutCancel(ctx), &report.Admin{Key: "run:" + began.Format(time.RFC3339Nano), Title: title, Sites: reports}); err != nil {
				log.Warn("the composite report could not be sent", "error", err)
			}
			msg := "every site harvested succeeded"
			if !ok {
				msg = "some sites failed"
			}
			if ctx.Err() != nil {
				msg = "interrupted"
			}
			if err := st.AddEvent(context.WithoutCancel(ctx), state.Event{Operation: harvestlog.Stopped, Message: msg}); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !ok {
				a.code = ExitPartial
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&stateFile, "state", "rsharvest.db", "state store file (SQLite): the registry and what the harvests hold")
	fl.BoolVar(&due, "due", false, "harvest every site whose next harvest has come")
	fl.IntVar(&concurrency, "sites-concurrency", 2, "sites harvested at once")
	fl.DurationVar(&waitLock, "wait-lock", 0, "wait this long for another run to release the state file (0: fail at once)")
	fl.StringVar(&spoolDir, "spool-dir", "", "directory for packages being unpacked (default: the system's temporary directory)")
	rf.register(c)
	return c
}

// openSitesState opens the state store for harvesting sites, several at
// once, holding its lock. Runs still recorded as running are then those of
// dead processes: they are marked interrupted here, once (the site runs
// share the store, see pipeline.Options.StoreShared).
func openSitesState(ctx context.Context, file string, waitLock time.Duration, command string, log *slog.Logger) (*state.Store, error) {
	st, err := openState(ctx, syncFlags{state: file, waitLock: waitLock, command: command}, log)
	if err != nil {
		return nil, err
	}
	if n, err := st.MarkInterrupted(ctx, time.Now().UTC()); err != nil {
		st.Close()
		return nil, err
	} else if n > 0 {
		log.Warn("earlier runs did not finish (interrupted); their sites pick up where they stopped", "runs", n)
	}
	return st, nil
}

// chosenSites returns the sites named (an unknown one is a usage error),
// or those due now.
func (a *app) chosenSites(ctx context.Context, reg site.Registry, names []string, due bool) ([]*site.Site, error) {
	if !due {
		var out []*site.Site
		for _, n := range names {
			s, err := reg.Site(ctx, n)
			if err != nil {
				return nil, noSite(err)
			}
			if !slices.ContainsFunc(out, func(o *site.Site) bool { return o.Name == n }) {
				out = append(out, s)
			}
		}
		return out, nil
	}
	all, err := reg.Sites(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return slices.DeleteFunc(all, func(s *site.Site) bool { return !s.Due(now, time.Local) }), nil
}

// harvester of registry sites on the shared store st, printing each
// site's summary as its harvest ends.
func (a *app) sitesHarvester(st *state.Store) (*harvest.Harvester, harvest.Harvested) {
	h := a.harvester(st, true, a.logger())
	return h, func(s *site.Site, rep *pipeline.Report, err, rerr error) {
		var b strings.Builder
		fmt.Fprintf(&b, "site %s: ", s.Name)
		if rep != nil {
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
