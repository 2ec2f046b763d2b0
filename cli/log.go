package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/harvestlog"
)

// logCommand returns the "log" command: the harvest log.
func (a *app) logCommand() *cobra.Command {
	var (
		stateFile, siteName, since string
		asJSON                     bool
	)
	c := &cobra.Command{
		Use:   "log",
		Short: "Show the harvest log: the harvester started and stopped, each harvest begun and ended with its counts and status, each failure with its error",
		Long: `Shows the harvest log kept in the state store: when the harvester (run, daemon) started and stopped,
each harvest begun and ended with its counts and status, and each document or resource that failed, with
its error and whether the failure is temporary (held for the next harvest) or permanent. It reads the
state's runs and failures themselves: there is no second copy.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var from time.Time
			if since != "" {
				var err error
				if from, err = harvest.ParseWhen(since, time.Now()); err != nil {
					return usagef("--since %v", err)
				}
			}
			st, err := a.openStateToRead(c.Context(), stateFile)
			if err != nil {
				return err
			}
			defer st.Close()
			l, err := harvestlog.Open(c.Context(), st, from, siteName)
			if err != nil {
				return err
			}
			if asJSON {
				return l.WriteJSON(c.Context(), a.stdout)
			}
			return l.WriteText(c.Context(), a.stdout)
		},
	}
	fl := c.Flags()
	registerState(fl, &stateFile)
	fl.StringVar(&siteName, "site", "", "only this site's harvests")
	fl.StringVar(&since, "since", "", "only from this time on: a W3C datetime, or a duration back from now (24h)")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
