package harvest

import (
	"context"
	"fmt"
	"time"

	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/report"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
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
	Reports *report.Sender
	// Done, when set, is told of each site's harvest as it ends.
	Done Harvested
	// Publish, when set, republishes what the state holds after each
	// harvest; its failure is logged, and the published set stays.
	Publish func(ctx context.Context) error
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
	// The units of the sites that ask to be spread (Job.Spread), queued
	// once the daemon runs with its jobs shared.
	spread := *h
	if d.Units == nil {
		d.Units = &daemon.Units{}
	}
	spread.Units = d.Units
	h = &spread
	d.Unit = h.Unit // republished when the site's harvest ends, not per unit
	d.Harvest = func(ctx context.Context, s *site.Site) error {
		r, err := h.One(ctx, s, o.SpoolDir, o.Reports, o.Done)
		if o.Publish != nil && ctx.Err() == nil {
			if perr := o.Publish(ctx); perr != nil {
				log.Error("publish after the harvest failed; the published set is unchanged", "site", s.Name, "error", perr)
			}
		}
		return Retry(r.Status, err)
	}
	d.Daily = func(ctx context.Context) error { return Daily(ctx, h.Store, o.Reports, time.Now()) }
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
