package harvest

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// DefaultUnitPoll is how often a spread harvest looks whether its units are
// done (Harvester.UnitPoll).
const DefaultUnitPoll = 250 * time.Millisecond

// spreads says j's harvest is spread over the daemons sharing the
// registry: a registry site that asks for it (Job.Spread), harvested by a
// daemon that queues units (Harvester.Units).
func (h *Harvester) spreads(j Job) bool {
	return j.Spread && j.Site != "" && !j.DryRun && h.Units != nil && h.Units.Ready()
}

// spread harvests j in mode m as a task spread over the daemons sharing the
// registry: the planner plans it once and divides it into parts
// (pipeline.Divide), the task, each part's plan and a unit job per part
// are recorded in one transaction, and any daemon executes each unit
// from its plan (Unit); this harvest waits for them all, then sets
// the checkpoints the task reached and finishes its run with the sum of
// the units' reports (pipeline.CloseTask). A task a stopped harvest of the
// site left open is taken up rather than divided again. It returns
// handled false, and nothing done, when the task does not divide: the
// caller runs it whole. The caller holds the site's and the source's
// leases: no other harvest of the source runs meanwhile.
func (h *Harvester) spread(ctx context.Context, m Mode, j Job, opts pipeline.Options, rng pipeline.Range, log *slog.Logger) (rep *runreport.Report, handled bool, err error) {
	t, open, err := h.Store.OpenTask(ctx, j.Key())
	if err != nil {
		return nil, true, err
	}
	if open {
		log.Info("taking up the units of a harvest left unfinished", "task", t.ID)
	} else {
		var divided bool
		t, divided, err = h.divide(ctx, m, j, opts, rng, log)
		if err != nil {
			return nil, true, err
		}
		if !divided {
			return nil, false, nil
		}
	}
	if err := h.awaitUnits(ctx, t, j, open, opts.Protocol.Name, log); err != nil {
		return &runreport.Report{Mode: t.Mode, Source: j.Source, RunID: t.RunID, Started: t.Created, Status: runreport.StatusInterrupted,
			Error: "interrupted: the units go on; the next harvest of the site takes them up"}, true, err
	}
	rep, err = pipeline.CloseTask(context.WithoutCancel(ctx), opts, t)
	return rep, true, err
}

// divide divides j's harvest in mode m (pipeline.Divide) and records the
// task, each part's plan and a unit job per part in one transaction; the
// plans leave the disk once recorded. It returns false, and nothing done,
// when the task does not divide.
func (h *Harvester) divide(ctx context.Context, m Mode, j Job, opts pipeline.Options, rng pipeline.Range, log *slog.Logger) (state.Task, bool, error) {
	mode := source.Baseline
	if m == Incremental {
		mode = source.Incremental
	}
	d, err := pipeline.Divide(ctx, opts, mode, rng)
	if mode == source.Incremental && (errors.Is(err, source.ErrNotOffered) || errors.Is(err, pipeline.ErrNoCheckpoint)) {
		log.Info("syncing from the snapshot", "why", err)
		mode = source.Baseline
		d, err = pipeline.Divide(ctx, opts, mode, rng)
	}
	if err != nil || d == nil {
		return state.Task{}, false, err
	}
	defer d.Close()
	held, err := h.Store.CountResources(ctx, j.Key(), false)
	if err != nil {
		return state.Task{}, false, err
	}
	now := time.Now().UTC()
	// Fenced by the source's lease: Divide may have taken long enough for
	// another machine to take it (a connection cut meanwhile).
	if _, err := h.Store.MarkInterrupted(ctx, now, j.Source, opts.Fence); err != nil {
		return state.Task{}, false, err
	}
	runID, err := h.Store.BeginRun(ctx, state.Run{Mode: string(mode), Source: j.Source, Site: j.Site, Started: now})
	if err != nil {
		return state.Task{}, false, err
	}
	t := state.Task{Source: j.Key(), Site: j.Site, Mode: string(mode), RunID: runID, Fence: opts.Fence, Checkpoints: d.Checkpoints, Created: now, Fresh: held == 0,
		Slots: h.slots(ctx, j)} // as many units at once as workers alive, each at its share
	t.ID, err = h.Store.CreateTask(ctx, t, d.Parts, d.Plan, func(ctx context.Context, tx *sql.Tx, id int64) error {
		units := make([]daemon.Unit, len(d.Parts))
		for i, p := range d.Parts {
			units[i] = daemon.Unit{Site: j.Site, Task: id, Part: p, Slots: t.Slots}
		}
		return h.Units.Enqueue(ctx, tx, units)
	})
	if err != nil {
		_ = h.Store.FinishRun(context.WithoutCancel(ctx), runID, time.Now().UTC(), runreport.StatusFailed, nil)
		return state.Task{}, false, err
	}
	log.Info("harvest divided into units that any worker takes", "task", t.ID, "units", len(d.Parts), "mode", mode)
	return t, true, nil
}

// requeueEvery is how often a spread harvest waiting for its units queues
// again those not done whose jobs ended (a unit given to a worker that then
// lost it, a job discarded): a unit's job is unique while it waits or runs,
// so one alive is left alone.
const requeueEvery = 30 * time.Second

// awaitUnits waits until every part of task t is done, writing the sum of
// the done units' reports, and how many are done, to the task's run as
// its counts so far; it queues again the units not done at once when it
// takes up a task left open (adopted), and every requeueEvery.
func (h *Harvester) awaitUnits(ctx context.Context, t state.Task, j Job, adopted bool, protocol string, log *slog.Logger) error {
	poll := h.UnitPoll
	if poll <= 0 {
		poll = DefaultUnitPoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	live := runreport.Report{Mode: t.Mode, Source: t.Source, RunID: t.RunID, Started: t.Created, Status: state.StatusRunning, Protocol: protocol,
		Units: &runreport.Units{}}
	summed := map[string]bool{} // the parts whose reports live holds
	requeued := time.Now()
	if adopted {
		requeued = time.Time{}
	}
	for {
		parts, err := h.Store.TaskParts(ctx, t.ID)
		if err != nil {
			return err
		}
		var left []string // the parts not done
		changed := live.Units.Total != int64(len(parts))
		live.Units.Total = int64(len(parts))
		for _, p := range parts {
			if !p.Done {
				left = append(left, p.Name)
				continue
			}
			if summed[p.Name] {
				continue
			}
			summed[p.Name], changed = true, true
			live.Units.Done++
			if r, err := h.Store.Run(ctx, p.RunID); err == nil {
				if pr, ok := runreport.Read(r.Report); ok {
					pr.Failures, pr.Skips, pr.Documents = nil, nil, nil // counts only
					live.Add(pr)
				}
			}
		}
		if changed {
			if js, err := json.Marshal(live); err == nil {
				if err := h.Store.RunProgress(ctx, t.RunID, js); err != nil && ctx.Err() == nil {
					log.Debug("the units done so far could not be recorded", "error", err)
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Since(requeued) >= requeueEvery {
			requeued = time.Now()
			// The task's slots: units of one task sharing other counts
			// would together pass the site's rate. (A task divided before
			// tasks kept them has none: the workers alive now.)
			units, slots := make([]daemon.Unit, len(left)), t.Slots
			if slots == 0 {
				slots = h.slots(ctx, j)
			}
			for i, name := range left {
				units[i] = daemon.Unit{Site: j.Site, Task: t.ID, Part: name, Slots: slots}
			}
			if err := h.Units.Requeue(ctx, units); err != nil && ctx.Err() == nil {
				log.Warn("the units not done could not be queued again; at the next try", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// slots is how many units of a task of j may run at once (0: no bound): a
// site with a rate gives its task a slot per worker alive.
func (h *Harvester) slots(ctx context.Context, j Job) int {
	if j.Rate <= 0 {
		return 0
	}
	return h.workersAlive(ctx)
}

// abandonTask closes the task a spread harvest of j's source left open,
// its checkpoints not set, before the source is harvested whole: its
// units, if any are still queued, find it closed and do nothing. It then
// waits until no unit of it is under way (each part's lease free): one
// in flight stops at its next commit, refused, and none of its writes to
// the sinks may land after the whole harvest's.
func (h *Harvester) abandonTask(ctx context.Context, j Job, log *slog.Logger) error {
	t, open, err := h.Store.OpenTask(ctx, j.Key())
	if err != nil || !open {
		return err
	}
	log.Warn("a harvest spread over the workers was left unfinished; the source is harvested whole instead", "task", t.ID)
	if err := h.Store.CloseTask(ctx, t.ID); err != nil {
		return err
	}
	parts, err := h.Store.TaskParts(ctx, t.ID)
	if err != nil {
		return err
	}
	for _, p := range parts {
		l, err := h.Store.Lease(ctx, state.PartLease(t.ID, p.Name), cmp.Or(h.Command, "rsharvest"), 0)
		if errors.Is(err, state.ErrLocked) {
			log.Info("waiting for a unit of the abandoned harvest to stop", "task", t.ID, "part", p.Name)
			l, err = h.Store.Lease(ctx, state.PartLease(t.ID, p.Name), cmp.Or(h.Command, "rsharvest"), siteSourceWait)
		}
		if err != nil {
			return err
		}
		if err := l.Release(); err != nil {
			log.Warn("a lease could not be released; it ends with the connection", "error", err)
		}
	}
	return nil
}

// Unit executes unit u of a spread harvest, on whichever daemon River gave
// it to: the registry site's job, run from the part's recorded plan
// (state.Store.TaskPartPlan), through the same executor, holding the part's lease (state.PartLease), which fences
// every commit of the run — a worker whose unit was given to another
// after its connection was cut commits nothing after it — and recording
// the part done with its last batch; while the task is open (a unit of a
// task abandoned commits nothing, state.ErrTaskClosed). A unit whose task
// is closed, or whose part is done, does nothing; one held by a worker
// alive fails with an error wrapping state.ErrLocked (try again later); one
// whose lease another worker took, or whose task was closed meanwhile, is
// left to them (nil). When the site has a rate, the task has slots
// (daemon.Unit.Slots: the workers alive when it was divided): a unit waits
// for a free slot (state.SlotLease), runs at the rate divided by the
// slots, and makes its first request no sooner than its share allows
// after taking the slot, so that the units together keep to the site's
// rate across the cluster. A unit that fails for good — a permanent
// failure, or any when last says River will not try it again — is
// recorded done without its records (pipeline.GiveUpPart), holding every
// checkpoint of its task where the task began, so that the harvest waiting
// for it ends; if even that fails, the error is temporary.
func (h *Harvester) Unit(ctx context.Context, u daemon.Unit, last bool) error {
	log := h.log().With("site", u.Site, "task", u.Task, "part", u.Part)
	var lease *state.Lease
	defer func() {
		if lease == nil {
			return
		}
		if err := lease.Release(); err != nil {
			log.Warn("a lease could not be released; it ends with the connection", "error", err)
		}
	}()
	runID, err := h.unit(ctx, u, log, &lease)
	switch {
	case err == nil || ctx.Err() != nil:
		return err
	case errors.Is(err, state.ErrLeaseLost) || errors.Is(err, state.ErrTaskClosed):
		log.Info("unit given to another worker, or its task closed, meanwhile: left to them", "error", err)
		return nil
	case errors.Is(err, state.ErrLocked):
		return err
	case !last && errclass.IsRetryable(err):
		return err
	}
	log.Warn("unit failed for good: its task's checkpoints are held", "error", err)
	if gerr := pipeline.GiveUpPart(context.WithoutCancel(ctx), h.Store, lease, pipeline.Part{Task: u.Task, Name: u.Part}, runID); gerr != nil {
		return errclass.NewRetryable(errors.Join(err, gerr))
	}
	return err
}

// unit is Unit's work; it sets *held to the part's lease once taken, and
// returns the id of the run it began (0: none).
func (h *Harvester) unit(ctx context.Context, u daemon.Unit, log *slog.Logger, held **state.Lease) (int64, error) {
	s, err := site.Registry{Store: h.Store}.Site(ctx, u.Site)
	if err != nil {
		return 0, err
	}
	j, err := SiteJob(s)
	if err != nil {
		return 0, err
	}
	j.prepare()
	if j.SourceKey, _, err = StateKey(ctx, h.Store, j); err != nil {
		return 0, err
	}
	t, open, err := h.Store.OpenTask(ctx, j.Key())
	if err != nil {
		return 0, err
	}
	if !open || t.ID != u.Task {
		log.Info("unit of a task already closed: nothing to do")
		return 0, nil
	}
	if done, err := h.partDone(ctx, u); err != nil || done {
		return 0, err
	}
	lease, err := h.Store.Lease(ctx, state.PartLease(u.Task, u.Part), cmp.Or(h.Command, "rsharvest"), 0)
	if err != nil {
		return 0, err
	}
	*held = lease
	// Done by another while this one waited for its turn?
	if done, err := h.partDone(ctx, u); err != nil || done {
		return 0, err
	}
	if u.Slots > 0 && j.Rate > 0 {
		release, err := h.slot(ctx, u)
		if err != nil {
			return 0, err
		}
		defer release()
		j.Rate /= float64(u.Slots)
		// The slot's previous unit may have just asked: a full bucket
		// now would ask again at once.
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(float64(time.Second) / j.Rate)):
		}
	}
	plan, err := h.Store.TaskPartPlan(ctx, u.Task, u.Part) // (a task closed meanwhile: ErrTaskClosed)
	if err != nil {
		return 0, err
	}
	opts, closeSinks, err := h.options(ctx, j, log)
	if err != nil {
		return 0, err
	}
	opts.Fence, opts.Part, opts.Site = lease, &pipeline.Part{Task: u.Task, Name: u.Part, Plan: plan, Fresh: t.Fresh}, ""
	var rep *runreport.Report
	if t.Mode == string(source.Incremental) {
		rng, _ := j.Range()
		rep, err = pipeline.Incremental(ctx, opts, rng)
	} else {
		rep, err = pipeline.Baseline(ctx, opts)
	}
	if cerr := closeSinks(context.WithoutCancel(ctx)); cerr != nil && err == nil {
		err = fmt.Errorf("closing sinks: %w", cerr)
	}
	runID := int64(0)
	if rep != nil {
		runID = rep.RunID
	}
	if err == nil && rep != nil {
		log.Info("unit done", "status", rep.Status, "written", rep.Resources.Written, "unchanged", rep.Resources.Unchanged, "deleted", rep.Resources.Deleted)
	}
	return runID, err
}

// partDone says whether u's part is done.
func (h *Harvester) partDone(ctx context.Context, u daemon.Unit) (bool, error) {
	p, _, err := h.Store.TaskPart(ctx, u.Task, u.Part)
	return p.Done, err
}

// slot takes a free slot of u's task, waiting for one, and returns what
// releases it.
func (h *Harvester) slot(ctx context.Context, u daemon.Unit) (func(), error) {
	// Each try of a slot is a connection: tried every half second.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		for i := range u.Slots {
			l, err := h.Store.Lease(ctx, state.SlotLease(u.Task, i), cmp.Or(h.Command, "rsharvest"), 0)
			if errors.Is(err, state.ErrLocked) {
				continue
			}
			if err != nil {
				return nil, err
			}
			return func() { _ = l.Release() }, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// workersAlive counts the daemons alive (their worker leases), at least 1.
func (h *Harvester) workersAlive(ctx context.Context) int {
	n, _ := h.Store.Workers(ctx)
	return max(n, 1)
}
