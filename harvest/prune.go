package harvest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/state"
)

// DefaultKeepLog is how much of the harvest log a registry keeps unless
// told otherwise: a year.
const DefaultKeepLog = "365d"

// ParseKeepLog reads how much of the harvest log to keep: an age in days,
// weeks or years ("90d", "12w", "1y") or as a Go duration ("720h"), a
// number of runs per site ("100"), or "all".
func ParseKeepLog(s string) (state.LogKeep, error) {
	s = strings.TrimSpace(s)
	if s == "all" {
		return state.LogKeep{}, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			return state.LogKeep{}, fmt.Errorf("keep-runs %q: at least 1 run a site (or all)", s)
		}
		return state.LogKeep{PerSite: n}, nil
	}
	day := 24 * time.Hour
	var (
		d   time.Duration
		err error
	)
	if n, unit := strings.TrimRight(s, "dwy"), strings.TrimLeft(s, "0123456789"); n != "" && len(unit) == 1 && n+unit == s {
		k, kerr := strconv.Atoi(n)
		if kerr != nil || k > 100*365 {
			return state.LogKeep{}, fmt.Errorf("keep-runs %q: too long", s)
		}
		d = time.Duration(k) * map[string]time.Duration{"d": day, "w": 7 * day, "y": 365 * day}[unit]
	} else if d, err = time.ParseDuration(s); err != nil {
		return state.LogKeep{}, fmt.Errorf("keep-runs %q: an age (90d, 12w, 1y, 720h), a number of runs a site, or all", s)
	}
	if d <= 0 {
		return state.LogKeep{}, fmt.Errorf("keep-runs %q: an age longer than nothing", s)
	}
	return state.LogKeep{Age: d}, nil
}

// PruneLog thins the harvest log to h.KeepLog (state.Store.PruneLog), at
// most once a day whoever harvests the registry — the daemon, or run from
// cron — claimed as the day's composite report is; it records what went
// in the log. A registry that keeps everything is not touched.
func (h *Harvester) PruneLog(ctx context.Context, now time.Time) error {
	if h.KeepLog.IsZero() || h.DryRun {
		return nil
	}
	key := "prune-log:" + now.UTC().Format("2006-01-02")
	claimed, err := h.Store.ClaimReport(ctx, key)
	if err != nil || !claimed {
		return err
	}
	p, err := h.Store.PruneLog(ctx, h.KeepLog, now, 0)
	if err != nil {
		if rerr := h.Store.ReleaseReport(context.WithoutCancel(ctx), key); rerr != nil {
			h.log().Warn("the day's pruning of the harvest log could not be released; it is tried again tomorrow", "error", rerr)
		}
		return fmt.Errorf("pruning the harvest log: %w", err)
	}
	if err := h.Store.ReportSent(context.WithoutCancel(ctx), key); err != nil {
		return err
	}
	if p == (state.Pruned{}) {
		return nil
	}
	msg := fmt.Sprintf("%d run(s) thinned to their one-line record (%d failure(s) removed), %d log line(s) removed", p.Runs, p.Failures, p.Events)
	h.log().Info("harvest log pruned", "runs", p.Runs, "failures", p.Failures, "lines", p.Events)
	return h.Store.AddEvent(context.WithoutCancel(ctx), state.Event{Operation: harvestlog.Pruned, Message: msg})
}
