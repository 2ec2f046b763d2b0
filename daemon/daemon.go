// Package daemon runs the site registry's schedule as a service (issue 14):
// each due site becomes a job of River (github.com/riverqueue/river), the
// job engine, whose tables live in the state file (its SQLite driver). A
// periodic job looks for due sites; a harvest job per site is unique while
// it waits or runs, so a site is harvested once at a time; a harvest that
// fails temporarily is retried with River's backoff; jobs survive a
// restart; a stop cancels the running harvests, which commit what they did
// and their progress marks, and are taken up again at the next start.
package daemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// Options configure Run.
type Options struct {
	// Store is the state store, opened with its lock held
	// (state.OpenExclusive): one daemon per state file.
	Store *state.Store
	// Harvest harvests one site now and records it in the registry
	// (state.Store.SiteHarvested). Its error is the harvest's: a
	// temporary one (errclass) makes River try again later; any other
	// ends the job (the site is due again by its schedule).
	Harvest func(ctx context.Context, s *site.Site) error
	// Daily, when set, runs once a day (the composite report to the
	// administrator).
	Daily func(ctx context.Context) error
	// SitesConcurrency is how many sites are harvested at once (default 2).
	SitesConcurrency int
	// Tick is how often the registry is read for due sites (default 1m).
	Tick time.Duration
	// MaxAttempts bounds a harvest's tries (default 5).
	MaxAttempts int
	// Now is the clock that decides what is due (default time.Now).
	Now func() time.Time
	// Loc is the zone schedules are read in (default time.Local).
	Loc *time.Location
	// Log takes the daemon's log (nil: discarded).
	Log *slog.Logger
}

// harvestArgs is a site's harvest job.
type harvestArgs struct {
	Site string `json:"site" river:"unique"`
}

func (harvestArgs) Kind() string { return "rsharvest_harvest" }

// dailyArgs is the periodic job that runs Options.Daily.
type dailyArgs struct{}

func (dailyArgs) Kind() string { return "rsharvest_daily" }

// scheduleArgs is the periodic job that looks for due sites.
type scheduleArgs struct{}

func (scheduleArgs) Kind() string { return "rsharvest_schedule" }

// queueHarvest is the queue of harvest jobs.
const queueHarvest = "harvest"

// Run runs the schedule until ctx ends, then stops: running harvests
// have their contexts cancelled and end, recording what they did. It
// returns nil after a stop that ctx asked for.
func Run(ctx context.Context, opts Options) error {
	if opts.Store == nil || opts.Harvest == nil {
		return errclass.Fatalf("daemon: a store and a harvest function are required")
	}
	opts.SitesConcurrency = max(opts.SitesConcurrency, 1)
	if opts.Tick <= 0 {
		opts.Tick = time.Minute
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Loc == nil {
		opts.Loc = time.Local
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := opts.Store.JobDB()
	if err != nil {
		return err
	}
	defer db.Close()
	driver := riversqlite.New(db)
	if err := migrate(ctx, driver, log); err != nil {
		return err
	}
	if err := rescue(ctx, driver, opts.Now(), log); err != nil {
		return err
	}
	workers := river.NewWorkers()
	d := &daemon{opts: opts, log: log}
	river.AddWorker(workers, river.WorkFunc(d.harvest))
	river.AddWorker(workers, river.WorkFunc(d.schedule))
	periodic := []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(opts.Tick),
		func() (river.JobArgs, *river.InsertOpts) { return scheduleArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})}
	if opts.Daily != nil {
		river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, _ *river.Job[dailyArgs]) error { return opts.Daily(ctx) }))
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(24*time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return dailyArgs{}, nil }, nil))
	}
	client, err := river.NewClient(driver, &river.Config{
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: 1},
			queueHarvest:       {MaxWorkers: opts.SitesConcurrency},
		},
		Workers:      workers,
		PeriodicJobs: periodic,
		// A harvest runs as long as it needs; only a stop cancels it.
		JobTimeout:           -1,
		RescueStuckJobsAfter: 7 * 24 * time.Hour, // this daemon's own are rescued at start
		MaxAttempts:          opts.MaxAttempts,
		FetchPollInterval:    min(time.Second, opts.Tick),
		Logger:               log.With("component", "river"),
	})
	if err != nil {
		return errclass.Fatalf("daemon: %w", err)
	}
	d.client = client
	// The client runs on its own context: ctx's end stops it below, with
	// the running jobs' contexts cancelled at once.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return errclass.Fatalf("daemon: start: %w", err)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := client.StopAndCancel(stopCtx); err != nil {
		return errclass.Fatalf("daemon: stop: %w", err)
	}
	return nil
}

// daemon is what the workers share.
type daemon struct {
	opts   Options
	log    *slog.Logger
	client *river.Client[*sql.Tx]
}

// schedule inserts a harvest job for every due site; a site whose
// harvest already waits or runs is left alone (the job is unique).
func (d *daemon) schedule(ctx context.Context, _ *river.Job[scheduleArgs]) error {
	sites, err := site.Registry{Store: d.opts.Store}.Sites(ctx)
	if err != nil {
		return err
	}
	now := d.opts.Now()
	for _, s := range sites {
		if !s.Due(now, d.opts.Loc) {
			continue
		}
		res, err := d.client.Insert(ctx, harvestArgs{Site: s.Name}, &river.InsertOpts{Queue: queueHarvest,
			UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
				rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}}})
		if err != nil {
			return fmt.Errorf("daemon: queue site %s: %w", s.Name, err)
		}
		if !res.UniqueSkippedAsDuplicate {
			d.log.Info("site due: harvest queued", "site", s.Name)
		}
	}
	return nil
}

// harvest harvests the job's site. A temporary failure is returned for
// River to retry with backoff; a stop's cancellation too (the job is
// rescued at the next start); any other failure ends the job.
func (d *daemon) harvest(ctx context.Context, job *river.Job[harvestArgs]) error {
	s, err := site.Registry{Store: d.opts.Store}.Site(ctx, job.Args.Site)
	if errors.Is(err, state.ErrNoSite) {
		return river.JobCancel(err) // removed from the registry meanwhile
	}
	if err != nil {
		return err
	}
	err = d.opts.Harvest(ctx, s)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errclass.IsRetryable(err):
		d.log.Warn("harvest failed, to be tried again", "site", s.Name, "attempt", job.Attempt, "error", err)
		return err
	default:
		d.log.Warn("harvest failed", "site", s.Name, "error", err)
		return nil // recorded in the registry; due again by its schedule
	}
}

// migrate brings River's tables in the state file up to date.
func migrate(ctx context.Context, driver *riversqlite.Driver, log *slog.Logger) error {
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: log.With("component", "river")})
	if err != nil {
		return errclass.Fatalf("daemon: job tables: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return errclass.Fatalf("daemon: job tables: %w", err)
	}
	return nil
}

// rescue makes the jobs a dead daemon left running available again: this
// daemon holds the state file's lock, so none of them runs. (River's own
// rescuer waits RescueStuckJobsAfter, meant for jobs whose worker may
// still be alive.)
func rescue(ctx context.Context, driver *riversqlite.Driver, now time.Time, log *slog.Logger) error {
	exec := driver.GetExecutor()
	stuck, err := exec.JobGetStuck(ctx, &riverdriver.JobGetStuckParams{Max: 10000, StuckHorizon: now.Add(time.Second)})
	if err != nil {
		return errclass.Fatalf("daemon: jobs left running: %w", err)
	}
	if len(stuck) == 0 {
		return nil
	}
	p := &riverdriver.JobRescueManyParams{StuckHorizon: now.Add(time.Second)}
	for _, j := range stuck {
		e, err := json.Marshal(rivertype.AttemptError{At: now.UTC(), Attempt: j.Attempt, Error: "the daemon running it stopped"})
		if err != nil {
			return errclass.Fatalf("daemon: %w", err)
		}
		p.ID = append(p.ID, j.ID)
		p.Error = append(p.Error, e)
		p.FinalizedAt = append(p.FinalizedAt, nil)
		p.ScheduledAt = append(p.ScheduledAt, now)
		p.State = append(p.State, string(rivertype.JobStateAvailable))
	}
	if _, err := exec.JobRescueMany(ctx, p); err != nil {
		return errclass.Fatalf("daemon: jobs left running: %w", err)
	}
	log.Warn("jobs a stopped daemon left running are taken up again", "jobs", len(stuck))
	return nil
}
