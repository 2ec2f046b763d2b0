package harvest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/internal/httpserve"
	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/status"
)

// DaemonOptions configure Harvester.Daemon.
type DaemonOptions struct {
	// Schedule is how the registry's schedule runs (package daemon); its
	// Store, Harvest and Daily are the Harvester's.
	Schedule daemon.Options
	// Command names the daemon in the harvest log ("rsharvest daemon").
	Command string
	// SpoolDir is where packages are unpacked ("": the system's).
	SpoolDir string
	// Reports sends the sites' and the administrator's reports.
	Reports *notify.Sender
	// Done, when set, is told of each site's harvest as it ends.
	Done Harvested
	// Publish, when set, republishes what the state holds after each
	// harvest; its failure is logged, and the published set stays.
	Publish func(ctx context.Context) error
	// Listen, when not "", is where the status page is served (package
	// status), with the operator's and the viewer's credentials: an
	// operator's action on it (harvest now, pause, …) is done at once
	// and wakes the schedule.
	Listen           string
	Operator, Viewer status.Credentials
	// MetricsSites is the size of registry up to which /metrics gives
	// every site's own series (status.Options.MetricsSites).
	MetricsSites int
	// ActionPoll is how often the harvest log is read for operators'
	// actions (Act) — on the status page, or by another process (run SITE
	// while the daemon holds the state file) — each of which wakes the
	// schedule (0: every second).
	ActionPoll time.Duration
}

// Daemon runs the registry's schedule as a service until ctx ends (see
// package daemon): each due site harvested as One does, republished after
// when o.Publish is set, tried again later as Retry says; the composite
// report once a day; its start and stop recorded in the harvest log.
func (h *Harvester) Daemon(ctx context.Context, o DaemonOptions) error {
	d := o.Schedule
	if err := h.Store.AddEvent(ctx, state.Event{Operation: harvestlog.Started,
		Message: fmt.Sprintf("%s: every %s, %d site(s) at once", o.Command, d.Tick, d.SitesConcurrency)}); err != nil {
		return err
	}
	log := h.log()
	d.Store, d.Log = h.Store, log
	// An operator's action — on the page, or by another process — wakes
	// the daemon: a "harvest now" starts at once.
	wake := make(chan struct{}, 1)
	last, err := h.Store.LastEventID(ctx)
	if err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { h.watchActions(watchCtx, last, cmp.Or(o.ActionPoll, time.Second), wake) })
	defer func() {
		stopWatch()
		watching.Wait()
	}()
	if d.Queue == nil {
		d.Queue = &daemon.Queue{}
	}
	d.Wake = wake
	if o.Listen != "" {
		page := status.Options{Store: h.Store, Act: h.Act, Queue: d.Queue, Operator: o.Operator, Viewer: o.Viewer, MetricsSites: o.MetricsSites}
		if !page.HasAuth() {
			log.Warn("only /healthz is served: set RSHARVEST_STATUS_TOKEN, or RSHARVEST_STATUS_USER and RSHARVEST_STATUS_PASSWORD, for the status page and /metrics")
		}
		stop, addr, err := status.Serve(ctx, o.Listen, page)
		switch {
		case errors.As(err, new(*httpserve.ListenError)):
			return &InvalidError{fmt.Errorf("--listen %w", err)}
		case err != nil:
			return err
		}
		defer stop()
		log.Info("status page", "url", "http://"+addr+"/")
	}
	// The units of the sites that ask to be spread (Job.Spread), queued
	// once the daemon runs with its jobs shared.
	spread := *h
	if d.Units == nil {
		d.Units = &daemon.Units{}
	}
	spread.Units = d.Units
	d.Unit = spread.Unit // republished when the site's harvest ends, not per unit
	publish := func(ctx context.Context) {
		if o.Publish != nil && ctx.Err() == nil {
			if perr := o.Publish(ctx); perr != nil {
				log.Error("publish after the harvest failed; the published set is unchanged", "error", perr)
			}
		}
	}
	d.Harvest = func(ctx context.Context, s *site.Site) error {
		// Published under the site's lease: a daemon looking for dead
		// workers finds the job's worker alive until it ends.
		r, err := spread.One(ctx, s, o.SpoolDir, o.Reports, o.Done, publish)
		return Retry(r.Status, err)
	}
	d.Daily = func(ctx context.Context) error { return h.daily(ctx, o.Reports, time.Now()) }
	runErr := daemon.Run(ctx, d)
	msg := "stopped"
	if runErr != nil {
		msg = runErr.Error()
	}
	if err := h.Store.AddEvent(context.WithoutCancel(ctx), state.Event{Operation: harvestlog.Stopped, Message: msg}); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// watchActions reads the harvest log every poll, from after event last,
// for operators' actions (Act), and wakes the daemon (a send on wake) for
// each new one, until ctx ends. A failed read is logged and tried again.
func (h *Harvester) watchActions(ctx context.Context, last int64, poll time.Duration, wake chan<- struct{}) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		id, err := h.Store.EventAfter(ctx, last, harvestlog.Action)
		switch {
		case err != nil && ctx.Err() == nil:
			h.log().Warn("reading the harvest log for operators' actions", "error", err)
		case id > last:
			last = id
			select {
			case wake <- struct{}{}:
			default: // a wake is pending already
			}
		}
	}
}

// daily is the daemon's daily job, at its start and then every 24 hours:
// the daily report, then the day's thinning of the harvest log (see
// PruneLog), in that order, so that the report is made of whole runs.
func (h *Harvester) daily(ctx context.Context, rs *notify.Sender, now time.Time) error {
	err := Daily(ctx, h.Store, rs, now)
	if perr := h.PruneLog(ctx, now); perr != nil {
		h.log().Warn("the harvest log could not be pruned; it is tried again tomorrow", "error", perr)
	}
	return err
}
