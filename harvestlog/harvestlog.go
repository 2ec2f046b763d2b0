// Package harvestlog is the harvest log (seed 004's HARVEST_LOG and
// HARVEST_DETAIL_LOG): the harvester's events, each run begun and ended,
// and each failure of a run, read from the state store's own runs,
// failures and events (there is no second copy), oldest first.
package harvestlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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
	// EachFailure calls fn with each failure of the runs RunsSince
	// returns, in the order of their times, read as a stream.
	EachFailure(ctx context.Context, since time.Time, site string, fn func(state.Failure) error) error
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

// Log is the harvest log of a period, being read: its events and its
// runs' beginnings and ends are held (they grow with the number of
// harvests), its failures are not (a run may fail as many resources as it
// has): they are read from the state as the log is written out.
type Log struct {
	st      Store
	since   time.Time
	site    string
	entries []Entry          // all but the failures, oldest first
	sites   map[int64]string // each run's site
}

// Open reads the harvest log of st since since (zero: all), of site only
// when site is not "" (its harvests, failures and actions: not the
// harvester's starts and stops).
func Open(ctx context.Context, st Store, since time.Time, site string) (*Log, error) {
	events, err := st.Events(ctx, since, site)
	if err != nil {
		return nil, fmt.Errorf("harvest log: %w", err)
	}
	l := &Log{st: st, since: since, site: site, sites: map[int64]string{}}
	for _, e := range events {
		l.entries = append(l.entries, Entry{At: e.At, Operation: e.Operation, Site: e.Site, Message: e.Message})
	}
	runs, err := st.RunsSince(ctx, since, site)
	if err != nil {
		return nil, fmt.Errorf("harvest log: %w", err)
	}
	for _, r := range runs {
		l.sites[r.ID] = r.Site
		// A run recorded before sources lost their passwords shows none.
		r.Source = state.SourceKey(r.Source)
		l.entries = append(l.entries, Entry{At: r.Started, Operation: HarvestBegun, Site: r.Site, RunID: r.ID, Mode: r.Mode, Source: r.Source})
		if r.Status == state.StatusRunning {
			continue
		}
		end := Entry{At: r.Finished, Operation: HarvestEnded, Site: r.Site, RunID: r.ID, Mode: r.Mode, Source: r.Source, Status: r.Status}
		if rep, ok := runreport.Read(r.Report); ok {
			c := rep.Resources
			end.Counts = map[string]int64{"written": c.Written, "deleted": c.Deleted, "unchanged": c.Unchanged, "failed": c.Failed, "skipped": c.Skipped}
			end.Error = rep.Error
		}
		l.entries = append(l.entries, end)
	}
	slices.SortStableFunc(l.entries, func(a, b Entry) int { return a.At.Compare(b.At) })
	return l, nil
}

// Each calls fn with each entry of the log, oldest first: a run's
// failures after its beginning and before its end. An error of fn stops
// it and is returned as it is.
func (l *Log) Each(ctx context.Context, fn func(Entry) error) error {
	i := 0
	err := l.st.EachFailure(ctx, l.since, l.site, func(f state.Failure) error {
		site, ok := l.sites[f.RunID]
		if !ok {
			return nil // a run begun since the log was opened: not in it
		}
		temporary := !f.Permanent
		e := Entry{At: f.At, Operation: Failed, Site: site, RunID: f.RunID, URI: f.URI, Stage: f.Stage, Error: f.Error, Temporary: &temporary}
		for ; i < len(l.entries) && before(l.entries[i], e); i++ {
			if err := fn(l.entries[i]); err != nil {
				return err
			}
		}
		return fn(e)
	})
	if err != nil {
		return err
	}
	for ; i < len(l.entries); i++ {
		if err := fn(l.entries[i]); err != nil {
			return err
		}
	}
	return nil
}

// before says whether entry a, not a failure, comes before failure f: at
// an earlier time, or at the same time unless a ends a run.
func before(a, f Entry) bool {
	if c := a.At.Compare(f.At); c != 0 {
		return c < 0
	}
	return a.Operation != HarvestEnded
}

// WriteJSON writes the log to w as a JSON array of entries, one at a
// time.
func (l *Log) WriteJSON(ctx context.Context, w io.Writer) error {
	bw := bufio.NewWriter(w)
	n := 0
	err := l.Each(ctx, func(e Entry) error {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetIndent("  ", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e); err != nil {
			return err
		}
		sep := ",\n  "
		if n == 0 {
			sep = "[\n  "
		}
		n++
		_, err := bw.WriteString(sep + strings.TrimSuffix(b.String(), "\n"))
		return err
	})
	if err != nil {
		return err
	}
	end := "\n]\n"
	if n == 0 {
		end = "[]\n"
	}
	if _, err := bw.WriteString(end); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteText writes the log to w as aligned text, one line an entry: time
// (UTC), site ("-" for none), operation, and the entry's Detail, its
// control characters escaped (runreport.Printable: a name a source gave
// cannot forge a line). The columns fit every site and operation of the
// log, so each line is written as it is read.
func (l *Log) WriteText(ctx context.Context, w io.Writer) error {
	siteW, opW := 1, 0
	for _, e := range l.entries {
		siteW = max(siteW, utf8.RuneCountInString(e.Site))
		opW = max(opW, utf8.RuneCountInString(e.Operation))
	}
	bw := bufio.NewWriter(w)
	err := l.Each(ctx, func(e Entry) error {
		site := e.Site
		if site == "" {
			site = "-"
		}
		_, err := fmt.Fprintf(bw, "%s  %s%s%s\n", e.At.UTC().Format(time.RFC3339), pad(site, siteW+2), pad(e.Operation, opW+2), runreport.Printable(e.Detail()))
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// pad is s followed by spaces up to width runes.
func pad(s string, width int) string {
	return s + strings.Repeat(" ", max(width-utf8.RuneCountInString(s), 0))
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
