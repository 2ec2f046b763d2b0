// Package daemon runs the site registry's schedule as a service:
// each due site becomes a job of River (github.com/riverqueue/river), the
// job engine, whose tables live in the state file (its SQLite driver) or,
// with Options.JobsDB, in a PostgreSQL database several daemons share,
// each registry's jobs in a schema of their own (its pgx driver). A
// periodic job looks for due sites; a harvest job per site is unique while
// it waits or runs, so a site is harvested once at a time; a harvest that
// fails temporarily is retried with River's backoff; jobs survive a
// restart; a stop cancels the running harvests, which commit what they did
// and their progress marks, and are taken up again at the next start.
//
// With the state kept in PostgreSQL, several daemons share one registry
// and its jobs (see Options.Store); a harvest whose worker died — its
// site's lease released with its session — is taken up by another daemon
// at the next tick.
package daemon

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// Store is what the daemon uses of the state: the site registry, and the
// database River keeps its jobs in when no JobsDB is given — the state
// file's (JobDB), or the PostgreSQL database the store is kept in
// (PostgresURL, "" for a file) — (state.Store implements it).
type Store interface {
	site.Store
	JobDB() (*sql.DB, error)
	PostgresURL() string
	// Lease takes a lease, as state.Store.Lease: the daemon tries a
	// running harvest's site lease to learn whether its worker is alive.
	Lease(ctx context.Context, key, command string, wait time.Duration) (*state.Lease, error)
}

var _ Store = (*state.Store)(nil)

// Options configure Run.
type Options struct {
	// Store is the state store, opened with state.OpenExclusive: a state
	// file's lock held, one daemon per file; or a store kept in
	// PostgreSQL, whose registry any number of daemons on any machines
	// share, with its jobs in JobsSchema of the same database: River's
	// leader queues the due sites, any daemon works any harvest, and the
	// site's lease (state.SiteLease, taken by the harvest) keeps a site
	// from being harvested twice at once.
	Store Store
	// JobsDB, when set, is the URL of a PostgreSQL database
	// (postgres://…, pgx's syntax; the password may come from $PGPASSWORD
	// or ~/.pgpass) where River keeps the jobs instead of the state file;
	// for a store kept in PostgreSQL, by default that database.
	// Several daemons may share the database: each registry's jobs live in
	// their own schema (JobsSchema), which a daemon holds for its life.
	JobsDB string
	// JobsSchema is the PostgreSQL schema of this registry's jobs (default
	// "rsharvest"; letters, digits and underscores), made when absent. A
	// daemon holds it with an advisory lock while it runs: a second daemon
	// on the same schema fails with ErrSchemaInUse.
	JobsSchema string
	// Harvest harvests one site now and records it in the registry
	// (state.Store.SiteHarvested). Its error is the harvest's: a
	// temporary one (errclass) makes River try again later; any other
	// ends the job (the site is due again by its schedule).
	Harvest func(ctx context.Context, s *site.Site) error
	// Daily, when set, runs once a day (the composite report to the
	// administrator).
	Daily func(ctx context.Context) error
	// SitesConcurrency is how many sites are harvested at once (default 1).
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
	// RescueAfter is how long a harvest job runs before the daemons look
	// whether its worker is alive — whether it holds the site's lease —
	// and, if not, give the job to another (default 30 s; it is also the
	// time a worker has to take the lease once its job starts).
	RescueAfter time.Duration
	// Queue, when set, is made to count the jobs once the daemon runs
	// (the status page's queue depth).
	Queue *Queue
	// Wake, when set, makes the daemon read the registry for due sites at
	// once at each receive, as every Tick (an operator's "harvest now").
	Wake <-chan struct{}
	// Unit, when set, executes one unit of a task spread over workers
	// (state.CreateTask): a part of a site's harvest that any daemon
	// sharing the registry may take. last says River will not try it
	// again after this attempt. Its error is treated as Harvest's.
	Unit func(ctx context.Context, u Unit, last bool) error
	// UnitsConcurrency is how many units this daemon executes at once
	// (default SitesConcurrency).
	UnitsConcurrency int
	// Units, when set, is made to queue units once the daemon runs with
	// its jobs shared (a store kept in PostgreSQL); otherwise it queues
	// none, and a site's harvest is not spread.
	Units *Units
}

// Unit is one unit of work of a task spread over workers: part Part of
// task Task, of registry site Site.
type Unit struct {
	Site string `json:"site" river:"unique"`
	Task int64  `json:"task" river:"unique"`
	Part string `json:"part" river:"unique"`
	// Slots, when not 0, is how many units of the task may run at once,
	// each at its share of the site's rate.
	Slots int `json:"slots,omitempty"`
}

func (Unit) Kind() string { return "rsharvest_unit" }

// queueUnits is the queue of units: apart from the harvests, whose jobs
// wait for their units.
const queueUnits = "units"

// Units queues the units of spread tasks as River jobs, in the
// transaction that records the task. Its zero value is ready; it queues
// nothing until Run, given it in Options, has started with shared jobs.
type Units struct {
	mu      sync.Mutex
	enqueue func(ctx context.Context, tx *sql.Tx, units []Unit) error
	requeue func(ctx context.Context, units []Unit) error
}

func (u *Units) set(enqueue func(ctx context.Context, tx *sql.Tx, units []Unit) error, requeue func(ctx context.Context, units []Unit) error) {
	u.mu.Lock()
	u.enqueue, u.requeue = enqueue, requeue
	u.mu.Unlock()
}

// Requeue inserts a job per unit whose job is no longer waiting or running
// (a unit's job is unique by its site, task and part while it is): what a
// harvest waiting for its units does for those not done.
func (u *Units) Requeue(ctx context.Context, units []Unit) error {
	u.mu.Lock()
	requeue := u.requeue
	u.mu.Unlock()
	if requeue == nil {
		return ErrNoUnits
	}
	return requeue(ctx, units)
}

// ErrNoUnits is returned by Units.Enqueue while no daemon sharing its jobs
// runs with it: a task is then not spread.
var ErrNoUnits = errors.New("no daemon sharing its jobs to queue units")

// Enqueue inserts a job per unit within tx, a transaction on the
// PostgreSQL database the daemon keeps its jobs in (the state store's:
// state.Store.CreateTask gives it), so that the units are queued if and
// only if the task is recorded.
func (u *Units) Enqueue(ctx context.Context, tx *sql.Tx, units []Unit) error {
	u.mu.Lock()
	enqueue := u.enqueue
	u.mu.Unlock()
	if enqueue == nil {
		return ErrNoUnits
	}
	return enqueue(ctx, tx, units)
}

// Ready says Enqueue queues units.
func (u *Units) Ready() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.enqueue != nil
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

// queueDaily is the queue of the daily job: apart from the schedule's, so
// that a slow report (a mail server that takes minutes to give up) holds
// up no due site.
const queueDaily = "daily"

// ErrSchemaInUse is wrapped by Run's error when another daemon holds
// Options.JobsSchema.
var ErrSchemaInUse = state.ErrSchemaInUse

// Run runs the schedule until ctx ends, then stops: running harvests
// have their contexts cancelled and end, recording what they did. It
// returns nil after a stop that ctx asked for, also one while it starts.
func Run(ctx context.Context, opts Options) (err error) {
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil // a step of the start stopped by the stop asked for
		}
	}()
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
	if opts.RescueAfter <= 0 {
		opts.RescueAfter = 30 * time.Second
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
	shared := false
	if opts.JobsDB == "" && opts.Store.PostgresURL() != "" {
		// A store kept in PostgreSQL keeps the jobs there too, shared by
		// every daemon of the registry.
		opts.JobsDB, shared = opts.Store.PostgresURL(), true
	}
	if opts.JobsDB == "" {
		db, err := opts.Store.JobDB()
		if err != nil {
			return err
		}
		defer db.Close()
		return run(ctx, opts, riversqlite.New(db), "", false, log)
	}
	schema := cmp.Or(opts.JobsSchema, "rsharvest")
	pool, err := openPostgres(ctx, opts.JobsDB, opts.SitesConcurrency)
	if err != nil {
		return err
	}
	defer pool.Close()
	release, err := state.HoldJobSchema(ctx, pool, schema, shared)
	if err != nil {
		return err
	}
	driver := riverpgxv5.New(pool)
	if shared {
		// Daemons sharing the jobs bring River's tables up to date one
		// at a time, then work side by side.
		err := migrate(ctx, driver, schema, log)
		release()
		if err != nil {
			return err
		}
		release = func() {}
	}
	defer release()
	return run(ctx, opts, driver, schema, shared, log)
}

// run runs River on driver, its tables in schema ("" for SQLite's, which
// has none), until ctx ends. shared says other daemons work the same jobs.
func run[TTx any](ctx context.Context, opts Options, driver riverdriver.Driver[TTx], schema string, shared bool, log *slog.Logger) error {
	if !shared {
		// This daemon alone works the jobs: it brings River's tables up
		// to date (daemons sharing them did, one at a time, in Run).
		if err := migrate(ctx, driver, schema, log); err != nil {
			return err
		}
	}
	d := &daemon[TTx]{opts: opts, log: log, driver: driver, schema: schema, shared: shared}
	rescue := func(ctx context.Context) error { return d.rescue(ctx, true) }
	if shared {
		rescue = d.rescueTurn // the others may be rescuing at this moment
	}
	if err := rescue(ctx); err != nil {
		return err
	}
	// This daemon is a worker alive as long as it holds its lease.
	worker, err := opts.Store.Lease(ctx, state.WorkerLease(), "rsharvest daemon", 0)
	if err != nil {
		return err
	}
	defer worker.Release()
	if opts.Queue != nil {
		opts.Queue.set(func(ctx context.Context) (map[string]int, error) {
			n, err := driver.GetExecutor().JobCountByAllStates(ctx, &riverdriver.JobCountByAllStatesParams{Schema: schema})
			out := make(map[string]int, len(n))
			for st, c := range n {
				out[string(st)] = c
			}
			return out, err
		})
		defer opts.Queue.set(nil)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(d.harvest))
	river.AddWorker(workers, river.WorkFunc(d.schedule))
	river.AddWorker(workers, river.WorkFunc(d.unit))
	var ins *river.Client[*sql.Tx]
	if shared && opts.Units != nil {
		// Units are queued in the state's own transactions (database/sql
		// on the same database): an insert-only client of River's
		// database/sql driver.
		if ins, err = river.NewClient(riverdatabasesql.New(nil), &river.Config{Schema: schema, MaxAttempts: opts.MaxAttempts, Logger: riverLog(log)}); err != nil {
			return errclass.Fatalf("daemon: %w", err)
		}
	}
	periodic := []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(opts.Tick),
		func() (river.JobArgs, *river.InsertOpts) { return scheduleArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})}
	if opts.Daily != nil {
		river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, _ *river.Job[dailyArgs]) error { return opts.Daily(ctx) }))
		// At start too: River's schedule lives in the process, so a
		// daemon restarted within a day would otherwise never send one
		// (a day's report is claimed once, by its date).
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(24*time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return dailyArgs{}, &river.InsertOpts{Queue: queueDaily} },
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	client, err := river.NewClient(driver, &river.Config{
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: 1},
			queueDaily:         {MaxWorkers: 1},
			queueHarvest:       {MaxWorkers: opts.SitesConcurrency},
			queueUnits:         {MaxWorkers: cmp.Or(opts.UnitsConcurrency, opts.SitesConcurrency)},
		},
		Workers:      workers,
		PeriodicJobs: periodic,
		Schema:       schema,
		// A harvest runs as long as it needs; only a stop cancels it.
		JobTimeout:           -1,
		RescueStuckJobsAfter: 7 * 24 * time.Hour, // this daemon's own are rescued at start
		MaxAttempts:          opts.MaxAttempts,
		FetchPollInterval:    min(time.Second, opts.Tick),
		// A worker that ends a job takes the next at once (River waits
		// 100 ms between fetches by default: a tenth of a second per
		// unit of a spread harvest).
		FetchCooldown: min(10*time.Millisecond, opts.Tick),
		Logger:        riverLog(log),
	})
	if err != nil {
		return errclass.Fatalf("daemon: %w", err)
	}
	d.client = client
	if ins != nil {
		opts.Units.set(func(ctx context.Context, tx *sql.Tx, units []Unit) error {
			if _, err := ins.InsertManyTx(ctx, tx, unitJobs(units)); err != nil {
				return errclass.NewRetryable(fmt.Errorf("daemon: queue units: %w", err))
			}
			return nil
		}, func(ctx context.Context, units []Unit) error {
			if _, err := client.InsertMany(ctx, unitJobs(units)); err != nil {
				return errclass.NewRetryable(fmt.Errorf("daemon: queue units again: %w", err))
			}
			return nil
		})
		defer opts.Units.set(nil, nil)
	}
	// The client runs on its own context: ctx's end stops it below, with
	// the running jobs' contexts cancelled at once.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return errclass.Fatalf("daemon: start: %w", err)
	}
	// Every daemon looks for the jobs of dead workers every tick, one
	// daemon at a time: not the leader alone, in its schedule, whose own
	// death would leave them until another is elected (River's leadership
	// outlives its dead holder by up to 15 s).
	tick := time.NewTicker(opts.Tick)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			if err := d.rescueTurn(ctx); err != nil && ctx.Err() == nil {
				log.Warn("the jobs of stopped workers could not be looked for; at the next tick", "error", err)
			}
		case <-opts.Wake:
			if _, err := client.Insert(ctx, scheduleArgs{}, nil); err != nil && ctx.Err() == nil {
				log.Warn("the registry could not be read at once; it is at the next tick", "error", err)
			}
		}
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := client.StopAndCancel(stopCtx); err != nil {
		return errclass.Fatalf("daemon: stop: %w", err)
	}
	return nil
}

// Queue counts the jobs of a running daemon by their state (available,
// running, retryable, scheduled, completed, …). Its zero value is ready;
// it counts nothing until Run, given it in Options, has started.
type Queue struct {
	mu    sync.Mutex
	count func(ctx context.Context) (map[string]int, error)
}

func (q *Queue) set(count func(ctx context.Context) (map[string]int, error)) {
	q.mu.Lock()
	q.count = count
	q.mu.Unlock()
}

// Counts returns the jobs by state, or nil while no daemon runs with q.
func (q *Queue) Counts(ctx context.Context) (map[string]int, error) {
	q.mu.Lock()
	count := q.count
	q.mu.Unlock()
	if count == nil {
		return nil, nil
	}
	return count(ctx)
}

// daemon is what the workers share.
type daemon[TTx any] struct {
	opts   Options
	log    *slog.Logger
	client *river.Client[TTx]
	driver riverdriver.Driver[TTx]
	schema string
	shared bool // other daemons work the same jobs
}

// schedule inserts a harvest job for every due site; a site whose harvest
// already waits or runs is left alone (the job is unique). River runs it
// on the leader of the daemons sharing the jobs. (Every daemon takes up
// the jobs of dead workers on its own tick: see rescueTurn.)
func (d *daemon[TTx]) schedule(ctx context.Context, _ *river.Job[scheduleArgs]) error {
	sites, err := site.Registry{Store: d.opts.Store}.Due(ctx, d.opts.Now(), d.opts.Loc)
	if errors.Is(err, site.ErrUnreadable) {
		// The others are harvested; these are looked at again each tick.
		d.log.Warn("sites not harvested: their definitions cannot be read here", "error", err)
	} else if err != nil {
		return err
	}
	for _, s := range sites {
		res, err := d.client.Insert(ctx, harvestArgs{Site: s.Name}, &river.InsertOpts{Queue: queueHarvest, UniqueOpts: whileQueued()})
		if err != nil {
			return fmt.Errorf("daemon: queue site %s: %w", s.Name, err)
		}
		switch job := res.Job; {
		case !res.UniqueSkippedAsDuplicate:
			d.log.Info("site due: harvest queued", "site", s.Name)
		case job != nil && (job.State == rivertype.JobStateRetryable || job.State == rivertype.JobStateScheduled) && job.ScheduledAt.After(time.Now()):
			// Its job waits for River's backoff after a temporary
			// failure, and the site is due now (an operator asked for
			// it, or its registry's retry came first): at once.
			if _, err := d.client.JobRetry(ctx, job.ID); err != nil {
				return fmt.Errorf("daemon: queue site %s: %w", s.Name, err)
			}
			d.log.Info("site due: its waiting harvest brought forward", "site", s.Name)
		}
	}
	return nil
}

// harvest harvests the job's site. A temporary failure is returned for
// River to retry with backoff; a stop's cancellation too (the job is
// rescued at the next start); any other failure ends the job.
func (d *daemon[TTx]) harvest(ctx context.Context, job *river.Job[harvestArgs]) error {
	s, err := site.Registry{Store: d.opts.Store}.Site(ctx, job.Args.Site)
	if errors.Is(err, state.ErrNoSite) {
		return river.JobCancel(err) // removed from the registry meanwhile
	}
	if err != nil {
		return err
	}
	if s.Paused {
		// Paused since the job was queued, or between its retries.
		d.log.Info("site paused: not harvested", "site", s.Name)
		return nil
	}
	if s.Last.After(job.CreatedAt) && !s.LastFailed() && !s.Due(d.opts.Now(), d.opts.Loc) {
		// Harvested since the job was queued, and not due again: a job
		// given out again after its harvest ended (rescued from a
		// worker that was only finishing it).
		d.log.Info("site harvested since the job was queued, and not due: not harvested again", "site", s.Name)
		return nil
	}
	err = d.opts.Harvest(ctx, s)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, state.ErrLocked):
		d.log.Info("site harvested elsewhere meanwhile", "site", s.Name, "why", err)
		return nil // that harvest records it; due again by its schedule
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

// unitJobs are the jobs of units: each unique by its site, task and part
// while it waits or runs.
func unitJobs(units []Unit) []river.InsertManyParams {
	params := make([]river.InsertManyParams, len(units))
	for i, u := range units {
		params[i] = river.InsertManyParams{Args: u, InsertOpts: &river.InsertOpts{Queue: queueUnits, UniqueOpts: whileQueued()}}
	}
	return params
}

// whileQueued makes a job unique by its arguments while it waits or runs:
// a site's harvest, a unit, is queued once at a time.
func whileQueued() river.UniqueOpts {
	return river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
		rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}}
}

// unit executes one unit of a spread task, as harvest does a site.
func (d *daemon[TTx]) unit(ctx context.Context, job *river.Job[Unit]) error {
	if d.opts.Unit == nil {
		return river.JobCancel(errors.New("this daemon executes no units"))
	}
	u := job.Args
	err := d.opts.Unit(ctx, u, job.Attempt >= job.MaxAttempts)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, state.ErrNoSite):
		return river.JobCancel(err)
	case ctx.Err() != nil:
		return ctx.Err()
	case errclass.IsRetryable(err) || errors.Is(err, state.ErrLocked):
		// Held: a worker cut off may still be at it; tried again later,
		// by when it is done or its lease free.
		d.log.Warn("unit failed, to be tried again", "site", u.Site, "task", u.Task, "part", u.Part, "attempt", job.Attempt, "error", err)
		return err
	default:
		d.log.Warn("unit failed", "site", u.Site, "task", u.Task, "part", u.Part, "error", err)
		return nil // recorded by Unit: the part holds its task's checkpoints
	}
}

// migrate brings River's tables up to date.
func migrate[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], schema string, log *slog.Logger) error {
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: riverLog(log), Schema: schema})
	if err != nil {
		return errclass.Fatalf("daemon: job tables: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return errclass.Fatalf("daemon: job tables: %w", err)
	}
	return nil
}

// staleOther is how long any other job (the schedule, the daily report)
// may run before rescue takes it for a dead worker's: none takes that long.
const staleOther = time.Hour

// rescueTurn runs rescue while holding the rescue lease
// (state.RescueLease), and does nothing when another daemon holds it: two
// daemons rescuing at once could give a job a worker had just taken to
// another (the part's or site's lease would keep the second from doing
// it, but not from trying).
func (d *daemon[TTx]) rescueTurn(ctx context.Context) error {
	l, err := d.opts.Store.Lease(ctx, state.RescueLease(), "rsharvest daemon (looking for dead workers)", 0)
	if errors.Is(err, state.ErrLocked) {
		return nil
	}
	if err != nil {
		return err
	}
	defer l.Release()
	return d.rescue(ctx, false)
}

// rescue makes available again the jobs dead workers left running. A
// harvest job is its worker's as long as the worker holds the site's lease
// (state.SiteLease), a unit's as long as it holds the part's
// (state.PartLease), which its process's death — kill -9 included, or its
// connection cut — releases: a running harvest whose lease is free is
// rescued, so that another worker redoes it, and the lease keeps a live
// worker's alone. With alone — a start with the jobs to itself (not
// shared) — every job left running is a dead daemon's. (River's own rescuer waits
// RescueStuckJobsAfter, meant for jobs whose worker may still be alive.)
func (d *daemon[TTx]) rescue(ctx context.Context, alone bool) error {
	now := d.opts.Now()
	harvests, others := now.Add(-d.opts.RescueAfter), now.Add(-staleOther)
	if alone { // a start with the jobs to itself: every job left running is a dead daemon's
		harvests, others = now.Add(time.Second), now.Add(time.Second)
	}
	exec := d.driver.GetExecutor()
	stuck, err := exec.JobGetStuck(ctx, &riverdriver.JobGetStuckParams{Max: 10000, StuckHorizon: harvests, Schema: d.schema})
	if err != nil {
		return errclass.Fatalf("daemon: jobs left running: %w", err)
	}
	p := &riverdriver.JobRescueManyParams{StuckHorizon: harvests, Schema: d.schema}
	for _, j := range stuck {
		lease := ""
		switch j.Kind {
		case (harvestArgs{}).Kind():
			var a harvestArgs
			if json.Unmarshal(j.EncodedArgs, &a) != nil {
				continue
			}
			lease = state.SiteLease(a.Site)
		case (Unit{}).Kind():
			var u Unit
			if json.Unmarshal(j.EncodedArgs, &u) != nil {
				continue
			}
			lease = state.PartLease(u.Task, u.Part)
		}
		if lease != "" {
			l, err := d.opts.Store.Lease(ctx, lease, "rsharvest daemon (looking for dead workers)", 0)
			if errors.Is(err, state.ErrLocked) {
				continue // its worker is alive
			}
			if err != nil {
				return err
			}
			_ = l.Release()
		} else if j.AttemptedAt == nil || !j.AttemptedAt.Before(others) {
			continue
		}
		e, err := json.Marshal(rivertype.AttemptError{At: now.UTC(), Attempt: j.Attempt, Error: "the worker running it stopped"})
		if err != nil {
			return errclass.Fatalf("daemon: %w", err)
		}
		p.ID = append(p.ID, j.ID)
		p.Error = append(p.Error, e)
		p.FinalizedAt = append(p.FinalizedAt, nil)
		p.ScheduledAt = append(p.ScheduledAt, now)
		p.State = append(p.State, string(rivertype.JobStateAvailable))
	}
	if len(p.ID) == 0 {
		return nil
	}
	if _, err := exec.JobRescueMany(ctx, p); err != nil {
		return errclass.Fatalf("daemon: jobs left running: %w", err)
	}
	d.log.Warn("jobs a stopped worker left running are taken up again", "jobs", len(p.ID))
	return nil
}

// openPostgres opens a pool on the database at url, large enough for River
// (its listener, producers and completer) beside concurrency harvests,
// unless url sets pool_max_conns.
func openPostgres(ctx context.Context, url string, concurrency int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errclass.Fatalf("daemon: --jobs-db: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, int32(concurrency)+6)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errclass.Fatalf("daemon: --jobs-db: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, errclass.NewRetryable(fmt.Errorf("daemon: --jobs-db %s: %w", cfg.ConnConfig.Host, err))
	}
	return pool, nil
}
