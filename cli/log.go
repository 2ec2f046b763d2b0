package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/state"
)

// logEntry is one line of the harvest log (seed 004's HARVEST_LOG and
// HARVEST_DETAIL_LOG), read from the state: the harvester's events, each
// run begun and ended, and each failure of a run.
type logEntry struct {
	At        time.Time `json:"at"`
	Operation string    `json:"operation"`
	Site      string    `json:"site,omitempty"`
	RunID     int64     `json:"run_id,omitempty"`
	Mode      string    `json:"mode,omitempty"`
	Source    string    `json:"source,omitempty"`
	Status    string    `json:"status,omitempty"`
	// Counts are an ended run's resources: written, deleted, unchanged,
	// failed, skipped.
	Counts map[string]int64 `json:"counts,omitempty"`
	// URI, Stage, Error and Temporary are a failure's.
	URI       string `json:"uri,omitempty"`
	Stage     string `json:"stage,omitempty"`
	Error     string `json:"error,omitempty"`
	Temporary *bool  `json:"temporary,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Harvest log operations.
const (
	opStarted      = "harvester started"
	opStopped      = "harvester stopped"
	opHarvestBegun = "harvest begun"
	opHarvestEnded = "harvest ended"
	opFailed       = "failed"
)

// harvestLog reads the harvest log since since (zero: all), of site only
// when site is not "", oldest first.
func harvestLog(ctx context.Context, st *state.Store, since time.Time, site string) ([]logEntry, error) {
	events, err := st.Events(ctx, since, site)
	if err != nil {
		return nil, err
	}
	var out []logEntry
	for _, e := range events {
		out = append(out, logEntry{At: e.At, Operation: e.Operation, Site: e.Site, Message: e.Message})
	}
	runs, err := st.RunsSince(ctx, since, site)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		out = append(out, logEntry{At: r.Started, Operation: opHarvestBegun, Site: r.Site, RunID: r.ID, Mode: r.Mode, Source: r.Source})
		fails, err := st.Failures(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		for _, f := range fails {
			temporary := !f.Permanent
			out = append(out, logEntry{At: f.At, Operation: opFailed, Site: r.Site, RunID: r.ID, URI: f.URI, Stage: f.Stage, Error: f.Error, Temporary: &temporary})
		}
		if r.Status == state.StatusRunning {
			continue
		}
		end := logEntry{At: r.Finished, Operation: opHarvestEnded, Site: r.Site, RunID: r.ID, Mode: r.Mode, Source: r.Source, Status: r.Status}
		if rep, ok := pipeline.ReadReport(r.Report); ok {
			c := rep.Resources
			end.Counts = map[string]int64{"written": c.Written, "deleted": c.Deleted, "unchanged": c.Unchanged, "failed": c.Failed, "skipped": c.Skipped}
			end.Error = rep.Error
		}
		out = append(out, end)
	}
	slices.SortStableFunc(out, func(a, b logEntry) int { return cmp.Compare(a.At.UnixNano(), b.At.UnixNano()) })
	return out, nil
}

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
				if d, err := time.ParseDuration(since); err == nil {
					from = time.Now().Add(-d)
				} else if t, err := manifest.ParseDatetime(since); err == nil {
					from = t
				} else {
					return usagef("--since %q: want a W3C datetime or a duration (24h)", since)
				}
			}
			st, err := state.Open(c.Context(), stateFile)
			if err != nil {
				return err
			}
			defer st.Close()
			entries, err := harvestLog(c.Context(), st, from, siteName)
			if err != nil {
				return err
			}
			if asJSON {
				if entries == nil {
					entries = []logEntry{}
				}
				return writeJSON(a.stdout, entries)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), orDash(e.Site), e.Operation, e.detail())
			}
			return tw.Flush()
		},
	}
	fl := c.Flags()
	fl.StringVar(&stateFile, "state", "rsharvest.db", "state store file (SQLite)")
	fl.StringVar(&siteName, "site", "", "only this site's harvests")
	fl.StringVar(&since, "since", "", "only from this time on: a W3C datetime, or a duration back from now (24h)")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// detail is the rest of an entry's line.
func (e logEntry) detail() string {
	var b strings.Builder
	if e.RunID > 0 {
		fmt.Fprintf(&b, "run %d: ", e.RunID)
	}
	switch e.Operation {
	case opHarvestBegun:
		fmt.Fprintf(&b, "%s of %s", e.Mode, e.Source)
	case opHarvestEnded:
		b.WriteString(e.Status)
		if e.Counts != nil {
			fmt.Fprintf(&b, ": %d written, %d deleted, %d unchanged, %d failed, %d skipped",
				e.Counts["written"], e.Counts["deleted"], e.Counts["unchanged"], e.Counts["failed"], e.Counts["skipped"])
		}
		if e.Error != "" {
			fmt.Fprintf(&b, " (%s)", e.Error)
		}
	case opFailed:
		kind := "permanent"
		if e.Temporary != nil && *e.Temporary {
			kind = "temporary"
		}
		fmt.Fprintf(&b, "%s, %s: %s: %s", kind, e.Stage, e.URI, e.Error)
	default:
		b.WriteString(e.Message)
	}
	return b.String()
}
