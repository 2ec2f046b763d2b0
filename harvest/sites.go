package harvest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"gopkg.in/yaml.v3"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// Harvested is told of each registry site's harvest as it ends: the
// site, its run's report (nil when the run did not begin) and error, and
// the error of recording the harvest in the registry. It may be called
// from several goroutines at once.
type Harvested func(s *site.Site, rep *runreport.Report, err, recordErr error)

// Sites harvests the registry sites given, concurrency at a time, each on
// its own (see One): a site that fails does not stop the others. It
// returns each site's report, and whether every harvest succeeded (a site
// harvested elsewhere at the time, InUse, is skipped, not failed: its
// report is the zero report.Site).
func (h *Harvester) Sites(ctx context.Context, sites []*site.Site, concurrency int, spoolDir string, rs *notify.Sender, done Harvested) ([]notify.Harvest, bool) {
	reports := make([]notify.Harvest, len(sites))
	failed := make([]bool, len(sites))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for i, s := range sites {
		g.Go(func() error {
			r, err := h.One(gctx, s, spoolDir, rs, done, nil)
			reports[i], failed[i] = r, err != nil && !InUse(err)
			return nil
		})
	}
	_ = g.Wait() // each site's error is its own
	for _, f := range failed {
		if f {
			return reports, false
		}
	}
	return reports, true
}

// InUse reports whether err says that the lease of a harvest's site or
// source is held by another harvest (a *state.LeasedError): the harvest
// did not begin, and is not a failure of the site.
func InUse(err error) bool {
	var le *state.LeasedError
	return errors.As(err, &le)
}

// Chosen returns the registry sites named — an unknown name's error wraps
// state.ErrNoSite, a name given twice is harvested once — or, with due,
// every site due at now (and the error of those that cannot be read,
// wrapping site.ErrUnreadable: see site.Registry.Due).
func Chosen(ctx context.Context, reg site.Registry, names []string, due bool, now time.Time) ([]*site.Site, error) {
	if !due {
		var out []*site.Site
		for _, n := range names {
			s, err := reg.Site(ctx, n)
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(out, func(o *site.Site) bool { return o.Name == n }) {
				out = append(out, s)
			}
		}
		return out, nil
	}
	return reg.Due(ctx, now, time.Local)
}

// RunSites harvests sites as the run command does: the harvester's start
// (naming command and the sites) and its stop (whether every site
// succeeded, or that ctx ended it) recorded in the harvest log; the sites
// harvested concurrency at a time (Sites); the composite report of them
// sent through rs (nil: none; a failure to send it is logged). It says whether every
// harvest succeeded; its error is one recording the log's events, or
// ctx's.
func (h *Harvester) RunSites(ctx context.Context, command string, sites []*site.Site, concurrency int, spoolDir string, rs *notify.Sender, done Harvested) (bool, error) {
	if h.DryRun {
		_, ok := h.Sites(ctx, sites, concurrency, spoolDir, nil, done)
		return ok, ctx.Err()
	}
	names := make([]string, len(sites))
	for i, s := range sites {
		names[i] = s.Name
	}
	if err := h.Store.AddEvent(ctx, state.Event{Operation: harvestlog.Started, Message: fmt.Sprintf("%s: %d site(s): %s", command, len(sites), strings.Join(names, ", "))}); err != nil {
		return false, fmt.Errorf("harvest log: %w", err)
	}
	began := time.Now().UTC()
	reports, ok := h.Sites(ctx, sites, concurrency, spoolDir, rs, done)
	reports = slices.DeleteFunc(reports, func(r notify.Harvest) bool { return r.Site == "" }) // harvested elsewhere
	title := fmt.Sprintf("%s at %s", command, began.Format("2006-01-02 15:04 UTC"))
	if rs != nil {
		if err := rs.Composite(context.WithoutCancel(ctx), &notify.Composite{Key: "run:" + began.Format(time.RFC3339Nano), Title: title, Harvests: reports}); err != nil {
			h.log().Warn("the composite report could not be sent", "error", err)
		}
	}
	msg := "every site harvested succeeded"
	if !ok {
		msg = "some sites failed"
	}
	if ctx.Err() != nil {
		msg = "interrupted"
	}
	if err := h.Store.AddEvent(context.WithoutCancel(ctx), state.Event{Operation: harvestlog.Stopped, Message: msg}); err != nil {
		return ok, fmt.Errorf("harvest log: %w", err)
	}
	if ctx.Err() == nil {
		if err := h.PruneLog(ctx, time.Now()); err != nil {
			h.log().Warn("the harvest log could not be pruned; it is tried again at the next harvest", "error", err)
		}
	}
	return ok, ctx.Err()
}

// One harvests registry site s (Site), records the harvest in the
// registry (even when interrupted: the next harvest resumes from its
// marks), tells done (when not nil), sends the site's report through rs
// (nil: none), and calls after (when not nil: a republication), all under
// the site's lease: until One returns, no other process takes the site
// for free. Its error is nil only when the harvest succeeded (status ok):
// the run's error, else one saying the status.
func (h *Harvester) One(ctx context.Context, s *site.Site, spoolDir string, rs *notify.Sender, done Harvested, after func(context.Context)) (notify.Harvest, error) {
	started := time.Now().UTC()
	var rep *runreport.Report
	_, release, err := h.lease(ctx, 0, state.SiteLease(s.Name))
	if err == nil {
		defer release()
		rep, err = h.site(ctx, s, spoolDir)
	}
	if InUse(err) {
		// Harvested elsewhere now (another machine's daemon, a run from
		// cron): that harvest records it and reports.
		h.log().Info("site skipped: harvested elsewhere", "site", s.Name, "why", err)
		if done != nil {
			done(s, nil, err, nil)
		}
		return notify.Harvest{}, err
	}
	if h.DryRun {
		if done != nil {
			done(s, rep, err, nil)
		}
		return notify.Harvest{}, err
	}
	status, runID := Status(ctx, rep, err), int64(0)
	if rep != nil {
		runID = rep.RunID
	}
	rerr := h.Store.SiteHarvested(context.WithoutCancel(ctx), s.Name, started, status, runID)
	if rerr == nil && runID == 0 && err != nil && status == runreport.StatusFailed {
		// No run records this harvest: the log and the daily report
		// read it from this event.
		rerr = h.Store.AddEvent(context.WithoutCancel(ctx), state.Event{At: started, Operation: harvestlog.NotBegun, Site: s.Name, Message: err.Error()})
	}
	if rerr == nil && (status == runreport.StatusFailed || status == state.StatusInterrupted) {
		rerr = h.retrySoon(context.WithoutCancel(ctx), s, started, runID != 0)
	}
	if rerr == nil {
		rerr = site.Registry{Store: h.Store}.Refresh(context.WithoutCancel(ctx), s.Name, time.Local)
	}
	if done != nil {
		done(s, rep, err, rerr)
	}
	r, serr := SiteReport(context.WithoutCancel(ctx), h.Store, s, started, status, rep, err)
	if serr != nil {
		h.log().Warn("the site's report could not be made", "site", s.Name, "error", serr)
	} else {
		h.send(ctx, rs, &r)
	}
	if after != nil {
		after(ctx)
	}
	switch {
	case err != nil:
		return r, err
	case rerr != nil:
		return r, rerr
	case status != runreport.StatusOK:
		return r, fmt.Errorf("site %s: harvest %s", s.Name, status)
	}
	return r, nil
}

// retrySoon makes site s (as read before its harvest), whose harvest
// begun at started failed or was interrupted, due again after a backoff
// that grows with the failed or interrupted harvests in a row
// (site.Site.RetryAfter), rather than at its next period. They are counted
// from the harvest log, and from s's own backoff when the harvest failed
// before its run began (ran false): it has no run. A next harvest set
// while it ran (an edit, or a harvest asked for) stands.
func (h *Harvester) retrySoon(ctx context.Context, s *site.Site, started time.Time, ran bool) error {
	runs, err := h.Store.RunsSince(ctx, time.Time{}, s.Name)
	if err != nil {
		return err
	}
	failures := 0
	for i := len(runs) - 1; i >= 0; i-- {
		if st := runs[i].Status; st != runreport.StatusFailed && st != state.StatusInterrupted {
			break
		}
		failures++
	}
	if !ran {
		failures = max(failures, s.RetriesBefore()) + 1
	}
	return h.Store.RetrySite(ctx, s.Name, s.RetryAfter(started, max(failures, 1), time.Local), s.Next)
}

// Status is a site harvest's status: its run's (failed when the run did
// not begin), interrupted when ctx ended it, and never ok beside an error.
func Status(ctx context.Context, rep *runreport.Report, err error) string {
	switch {
	case err != nil && ctx.Err() != nil:
		return state.StatusInterrupted
	case rep == nil, err != nil && rep.Status == runreport.StatusOK:
		return runreport.StatusFailed
	}
	return rep.Status
}

// Retry is the daemon's policy for a site harvest that ended with status
// (see Status) and err: a source that could not be read for a temporary
// reason, or whose host could not be reached (fetch.ErrUnreachable: one
// run fails at once, but the host may come back), is retried (a retryable
// error: River's backoff); a harvest that ended partial is recorded and
// waits for its next time (nil); any other error stands.
func Retry(status string, err error) error {
	var se *pipeline.SourceError
	if errors.As(err, &se) && (!errclass.IsPermanent(se.Err) || errors.Is(se.Err, fetch.ErrUnreachable)) {
		return errclass.NewRetryable(err) // the source may come back
	}
	if err != nil && status == runreport.StatusPartial {
		return nil // recorded; its temporary failures wait for the next harvest
	}
	return err
}

// SiteReport is the report of site s's harvest: its status (see Status),
// its run's report (nil when it failed before it began) and error, its
// failures as the state keeps them (the first notify.MaxListed), and its
// next harvest.
func SiteReport(ctx context.Context, st *state.Store, s *site.Site, started time.Time, status string, rep *runreport.Report, runErr error) (notify.Harvest, error) {
	r := notify.Harvest{Site: s.Name, Source: state.SourceKey(s.Source()), Contact: s.Contact, Notify: s.Notify, Status: status,
		Next: s.When.Next(started, time.Local), Run: runreport.Report{Mode: "sync", Started: started}}
	if rep != nil {
		r.Run, r.Error = *rep, rep.Error
	}
	if runErr != nil && r.Error == "" {
		r.Error = runErr.Error()
	}
	if r.Run.RunID > 0 {
		fails, more, err := st.Failures(ctx, r.Run.RunID, notify.MaxListed)
		if err != nil {
			return r, err
		}
		for _, f := range fails {
			r.Failures = append(r.Failures, runreport.Failure{URI: f.URI, Package: f.Package, Stage: f.Stage, Error: f.Error, Permanent: f.Permanent})
		}
		r.MoreFailures = int(more)
	}
	return r, nil
}

// dailyEnd begins the key, in the reports sent, that records the end of
// the window a daily report covered (in dailyEndLayout, which sorts).
const (
	dailyEnd       = "daily-end:"
	dailyEndLayout = "2006-01-02T15:04:05.000000000Z"
	// maxDailyWindow bounds how far back a daily report reaches, after a
	// daemon stopped for days.
	maxDailyWindow = 7 * 24 * time.Hour
)

// Daily sends, through rs, the composite report of the harvests that
// ended since the end of the last one (at most a week back; 24 hours
// before now for the first), once a date (UTC): a daemon restarted on a
// date whose report went out sends none, and the next covers from that
// report's end, so that no harvest is left out of every report (one
// running at a report is in the next), nor told twice.
func Daily(ctx context.Context, st *state.Store, rs *notify.Sender, now time.Time) error {
	since := now.Add(-24 * time.Hour)
	last, ok, err := st.LastReport(ctx, dailyEnd)
	if err != nil {
		return err
	}
	if t, err := time.Parse(dailyEndLayout, strings.TrimPrefix(last, dailyEnd)); ok && err == nil && !t.After(now) {
		if t.Format(time.DateOnly) == now.UTC().Format(time.DateOnly) {
			return nil // the date's report went out
		}
		since = t
		if w := now.Add(-maxDailyWindow); since.Before(w) {
			since = w
		}
	}
	// By their end: a harvest still running at the last report is in
	// this one.
	runs, err := st.RunsFinishedSince(ctx, since)
	if err != nil {
		return err
	}
	reg := site.Registry{Store: st}
	a := notify.Composite{Key: "day:" + now.UTC().Format(time.DateOnly),
		Title: "harvests from " + since.UTC().Format("2006-01-02 15:04") + " to " + now.UTC().Format("2006-01-02 15:04 UTC")}
	for _, run := range runs {
		if run.Site == "" || run.Status == state.StatusRunning {
			continue
		}
		s, err := reg.Site(ctx, run.Site)
		if errors.Is(err, state.ErrNoSite) {
			continue
		} else if err != nil {
			return err
		}
		r, err := SiteReport(ctx, st, s, run.Started, run.Status, RunReport(run), nil)
		if err != nil {
			return err
		}
		a.Harvests = append(a.Harvests, r)
	}
	// The harvests that failed before their run began have no run: their
	// events say them.
	events, err := st.EventsOf(ctx, since, harvestlog.NotBegun)
	if err != nil {
		return err
	}
	for _, e := range events {
		s, err := reg.Site(ctx, e.Site)
		if errors.Is(err, state.ErrNoSite) {
			continue
		} else if err != nil {
			return err
		}
		r, err := SiteReport(ctx, st, s, e.At, runreport.StatusFailed, nil, errors.New(e.Message))
		if err != nil {
			return err
		}
		a.Harvests = append(a.Harvests, r)
	}
	slices.SortStableFunc(a.Harvests, func(x, y notify.Harvest) int { return x.Run.Started.Compare(y.Run.Started) })
	if len(a.Harvests) == 0 {
		return nil
	}
	if err := rs.Composite(ctx, &a); err != nil {
		return fmt.Errorf("daily report: %w", err)
	}
	key := dailyEnd + now.UTC().Format(dailyEndLayout)
	claimed, err := st.ClaimReport(ctx, key)
	if err == nil && claimed {
		err = st.ReportSent(ctx, key)
	}
	return err
}

// RunReport is the report a run recorded, decoded; a run that recorded
// none (or one that cannot be read) gets one made of what the run row
// says.
func RunReport(run state.Run) *runreport.Report {
	if rep, ok := runreport.Read(run.Report); ok {
		return rep
	}
	return &runreport.Report{Mode: run.Mode, Source: run.Source, RunID: run.ID, Started: run.Started, Finished: run.Finished, Status: run.Status}
}

// send writes and sends a site's report; a failure to send is logged,
// not the harvest's.
func (h *Harvester) send(ctx context.Context, rs *notify.Sender, r *notify.Harvest) {
	if rs == nil {
		return
	}
	if err := rs.Harvest(context.WithoutCancel(ctx), r); err != nil {
		level := "permanent"
		if errclass.IsRetryable(err) {
			level = "temporary"
		}
		h.log().Warn("the site's report could not be sent", "site", r.Site, "failure", level, "error", err)
	}
}

// NewSite checks def as a registry file's site is checked — through its
// YAML text, decoded with the file's keys (config.DecodeSite) — and makes
// the site (site.New). what names where def comes from ("sites add"). Its
// errors are *InvalidError, without a position in a text nobody wrote.
func NewSite(def config.Site, what string) (*site.Site, error) {
	text, err := yaml.Marshal(&def)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	unplaced := func(err error) error {
		var e *config.Error
		if errors.As(err, &e) {
			err = e.Err
		}
		return &InvalidError{fmt.Errorf("%s: %w", what, err)}
	}
	checked, err := config.DecodeSite(text, what, Settings(), SiteTargets)
	if err != nil {
		return nil, unplaced(err)
	}
	s, err := site.New(*checked)
	if err != nil {
		return nil, unplaced(err)
	}
	return s, nil
}

// CheckSinks checks the sinks of site def as its harvest would, before
// the site is written to the registry: each is opened and closed (an
// unreachable sink refuses the site), and one machine's directory is
// refused for a registry every machine harvests (kept in PostgreSQL: see
// machineLocal). Its errors are *InvalidError.
func (h *Harvester) CheckSinks(ctx context.Context, def *config.Site) error {
	sinks, closeSinks, err := OpenSinks(ctx, h.Sinks, def.Sinks())
	if err != nil {
		return &InvalidError{def.Errorf("sinks", "%v", err)}
	}
	if err := h.machineLocal(Job{Site: def.Name, Sinks: def.Sinks()}, sinks); err != nil {
		_ = closeSinks(ctx)
		return err
	}
	return closeSinks(ctx)
}

// SiteTargets are what a site's settings are decoded into, to check them:
// a job.
func SiteTargets() []any { j := DefaultJob(); return []any{&j} }

// RedactSite is def with its header values, sink credentials and source
// password hidden, to show it.
func RedactSite(def config.Site) config.Site {
	if def.Settings != nil {
		settings := *def.Settings
		settings.Content = slices.Clone(settings.Content)
		def.Settings = &settings
	}
	if h := def.Setting("headers"); h != nil {
		hidden := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		switch h.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(h.Content); i += 2 {
				hidden.Content = append(hidden.Content, h.Content[i], &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "…"})
			}
		case yaml.SequenceNode:
			for _, item := range h.Content {
				name, _, _ := strings.Cut(item.Value, ":")
				hidden.Content = append(hidden.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.TrimSpace(name)},
					&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "…"})
			}
		}
		def.Set("headers", hidden)
	}
	if sinks := def.Sinks(); len(sinks) > 0 {
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, s := range RedactSpecs(sinks) {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s})
		}
		def.Set("sinks", n)
	}
	if src := def.Source(); src != "" {
		def.Set("source", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: state.SourceKey(src)})
	}
	return def
}

// SiteView is a registry site as it is shown (sites list, sites show): its
// definition with header values and sink credentials hidden (RedactSite),
// and where its harvests stand; times in UTC to the second.
type SiteView struct {
	Name           string   `json:"name"`
	Schedule       string   `json:"schedule"`
	Source         string   `json:"source"`
	Protocol       string   `json:"protocol,omitempty"`
	MetadataPrefix string   `json:"metadata_prefix,omitempty"`
	Sets           []string `json:"sets,omitempty"`
	Sinks          []string `json:"sinks"`
	Contact        string   `json:"contact,omitempty"`
	Notify         string   `json:"notify,omitempty"`
	// LastHarvest is "" when the site was never harvested.
	LastHarvest string `json:"last_harvest,omitempty"`
	LastStatus  string `json:"last_status,omitempty"`
	LastRunID   int64  `json:"last_run_id,omitempty"`
	// NextHarvest is "now" when the site is due, "paused" while it is.
	NextHarvest string `json:"next_harvest"`
	Paused      bool   `json:"paused,omitempty"`
}

// ViewOf is s as it is shown, its schedule read in loc.
func ViewOf(s *site.Site, loc *time.Location) SiteView {
	d := RedactSite(s.Site)
	j, _ := SiteJob(s)
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	next := cmp.Or(stamp(s.NextHarvest(loc)), "now")
	if s.Paused {
		next = "paused"
	}
	protocol, prefix := "", ""
	if d.Setting("protocol") != nil {
		protocol = j.Protocol
	}
	if d.Setting("metadata_prefix") != nil {
		prefix = j.Options["metadata-prefix"]
	}
	return SiteView{Name: d.Name, Schedule: d.Schedule, Source: d.Source(), Protocol: protocol, MetadataPrefix: prefix, Sets: j.Sets,
		Sinks: d.Sinks(), Contact: d.Contact, Notify: d.Notify, LastHarvest: stamp(s.Last), LastStatus: s.LastStatus, LastRunID: s.LastRunID,
		NextHarvest: next, Paused: s.Paused}
}
