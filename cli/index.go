package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
)

// indexCommand (re)writes a site's held resources into sinks from the
// copies its other sinks keep, with no request to the source. Exit 0 when
// every resource was written, 1 when some had no matching copy.
func (a *app) indexCommand() *cobra.Command {
	var siteName, stateFile string
	var sinks []string
	var waitLock time.Duration
	c := &cobra.Command{
		Use:   "index --site NAME [--sink SPEC]…",
		Short: "Rebuild a search index, or fill a sink added later, from the copies a site's other sinks hold: no request to the source",
		Long: `Writes every resource the state holds of a registry site's source into the sinks given with --sink
(by default the site's search sinks, es: and solr:), each read from the copy another of the site's sinks keeps
(fs, s3, or es with store_body) and verified against the length and digest the state records. Nothing is asked
of the source: a dropped index is rebuilt, a sink added to the site is filled. A resource no sink holds a
matching copy of is counted missing; the next harvest, or "audit --repair", fetches it.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if siteName == "" {
				return usagef("index: --site is required")
			}
			ctx := c.Context()
			log := a.logger()
			if err := stateHeld(stateFile); err != nil {
				return err // what index reads is held in the state: it creates none
			}
			st, err := a.openSitesState(ctx, stateFile, waitLock, c.CommandPath(), log)
			if err != nil {
				return err
			}
			defer st.Close()
			j, err := siteJob(ctx, st, siteName)
			if err != nil {
				return err
			}
			targets := sinks
			if len(targets) == 0 {
				for _, spec := range j.Sinks {
					if strings.HasPrefix(spec, "es:") || strings.HasPrefix(spec, "solr:") {
						targets = append(targets, spec)
					}
				}
			}
			if len(targets) == 0 {
				return usagef("index: site %s has no search sink (es: or solr:); name the sinks to fill with --sink", siteName)
			}
			rep, err := a.harvester(st, false, log).Index(ctx, j, targets)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "index of %s into %s: %d held, %d written, %d missing\n", siteName, strings.Join(harvest.RedactSpecs(targets), ", "), rep.Held, rep.Written, rep.Missing)
			for _, u := range rep.MissingURI {
				fmt.Fprintf(a.stdout, "  missing: %s\n", runreport.Printable(u))
			}
			if rep.Missing > 0 {
				a.code = ExitPartial
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&siteName, "site", "", "the registry site whose held resources are written")
	fl.StringArrayVar(&sinks, "sink", nil, "a sink to write to (repeatable; default: the site's es: and solr: sinks)")
	registerState(fl, &stateFile)
	_ = c.RegisterFlagCompletionFunc("site", a.completeSites(&stateFile))
	fl.DurationVar(&waitLock, "wait-lock", 0, "wait this long for another run to release the state file (0: fail at once)")
	return c
}
