// Package harvestlog is the harvest log (seed 004's HARVEST_LOG and
// HARVEST_DETAIL_LOG): the harvester's events, each run begun and ended,
// and each failure of a run, read from the state store's own runs,
// failures and events (there is no second copy), oldest first.
package harvestlog

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// Store is what the harvest log reads of the state.
type Store interface {
	// Events returns the harvester's events since since (zero: all), of
	// site only when site is not "".
	Events(ctx context.Context, since time.Time, site string) ([]state.Event, error)
	// RunsSince returns the runs begun since since (zero: all), of site
	// only when site is not "".
	RunsSince(ctx context.Context, since time.Time, site string) ([]state.Run, error)
	// Failures returns the failures recorded by run runID.
	Failures(ctx context.Context, runID int64) ([]state.Failure, error)
}

var _ Store = (*state.Store)(nil)

// Entry is one line of the harvest log.
type Entry struct {
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

// The operations of the harvest log. Started and Stopped are the
// operations of the events the harvester records (state.Event) when a
// command harvesting sites begins and ends.
const (
	Started      = "harvester started"
	Stopped      = "harvester stopped"
	HarvestBegun = "harvest begun"
	HarvestEnded = "harvest ended"
	Failed       = "failed"
	// Action is an operator's action on a site (site.Action), with who
	// asked in its message.
	Action = "action"
	// Pruned says the log was thinned to what it keeps, with how much
	// went in its message.
	Pruned = "log pruned"
	// NotBegun is a site's harvest that failed before its run began (a
	// sink that could not be opened, a secret not set), with the error in
	// its message: such a harvest has no run of its own.
	NotBegun = "harvest not begun"
)

// Read reads the harvest log of st since since (zero: all), of site only
// when site is not "" (its harvests, failures and actions: not the
// harvester's starts and stops), oldest first.
func Read(ctx context.Context, st Store, since time.Time, site string) ([]Entry, error) {
	events, err := st.Events(ctx, since, site)
	if err != nil {
		return nil, fmt.Errorf("harvest log: %w", err)
	}
	var out []Entry
	for _, e := range events {
		out = append(out, Entry{At: e.At, Operation: e.Operation, Site: e.Site, Message: e.Message})
	}
	runs, err := st.RunsSince(ctx, since, site)
	if err != nil {
		return nil, fmt.Errorf("harvest log: %w", err)
	}
	for _, r := range runs {
		// A run recorded before sources lost their passwords shows none.
		r.Source = state.SourceKey(r.Source)
		out = append(out, Entry{At: r.Started, Operation: HarvestBegun, Site: r.Site, RunID: r.ID, Mode: r.Mode, Source: r.Source})
		fails, err := st.Failures(ctx, r.ID)
		if err != nil {
			return nil, fmt.Errorf("harvest log: %w", err)
		}
		for _, f := range fails {
			temporary := !f.Permanent
			out = append(out, Entry{At: f.At, Operation: Failed, Site: r.Site, RunID: r.ID, URI: f.URI, Stage: f.Stage, Error: f.Error, Temporary: &temporary})
		}
		if r.Status == state.StatusRunning {
			continue
		}
		end := Entry{At: r.Finished, Operation: HarvestEnded, Site: r.Site, RunID: r.ID, Mode: r.Mode, Source: r.Source, Status: r.Status}
		if rep, ok := runreport.Read(r.Report); ok {
			c := rep.Resources
			end.Counts = map[string]int64{"written": c.Written, "deleted": c.Deleted, "unchanged": c.Unchanged, "failed": c.Failed, "skipped": c.Skipped}
			end.Error = rep.Error
		}
		out = append(out, end)
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return cmp.Compare(a.At.UnixNano(), b.At.UnixNano()) })
	return out, nil
}

// WriteText writes entries as aligned text, one line each: time (UTC),
// site ("-" for none), operation, and the entry's Detail, its control
// characters escaped (runreport.Printable: a name a source gave cannot
// forge a line).
func WriteText(w io.Writer, entries []Entry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range entries {
		site := e.Site
		if site == "" {
			site = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), site, e.Operation, runreport.Printable(e.Detail()))
	}
	return tw.Flush()
}

// Detail is the rest of an entry's line of text: what was harvested, how
// it ended, what failed, or the event's message.
func (e Entry) Detail() string {
	var b strings.Builder
	if e.RunID > 0 {
		fmt.Fprintf(&b, "run %d: ", e.RunID)
	}
	switch e.Operation {
	case HarvestBegun:
		fmt.Fprintf(&b, "%s of %s", e.Mode, e.Source)
	case HarvestEnded:
		b.WriteString(e.Status)
		if e.Counts != nil {
			fmt.Fprintf(&b, ": %d written, %d deleted, %d unchanged, %d failed, %d skipped",
				e.Counts["written"], e.Counts["deleted"], e.Counts["unchanged"], e.Counts["failed"], e.Counts["skipped"])
		}
		if e.Error != "" {
			fmt.Fprintf(&b, " (%s)", e.Error)
		}
	case Failed:
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
