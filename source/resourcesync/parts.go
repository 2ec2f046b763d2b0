package resourcesync

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/source"
)

var _ source.Parter = (*Planner)(nil)

// listSlice is how many records (and change documents) one part holds.
const listSlice = 1000

// errDivided ends a plan that met what keeps it from dividing: the walk
// stops there.
var errDivided = errors.New("divided")

// Parts divides a task (see source.Parter) as it plans it: each package
// is a part of its own (an incremental task's with its winners), and the
// records planned outside packages — a Resource List's, an incremental
// task's winning deletes and a Change List's winners — with the change
// documents read, go listSlice at a time, in the plan's order, to a
// part named after its place, how many records it holds, and its first
// and last. A task whose plan met a failure or left something out does
// not divide: run whole, it holds its checkpoints as a whole run does.
// Neither does a task that plans no package and no record.
func (d *Planner) Parts(ctx context.Context, task source.Task, held source.Holdings, add func(context.Context, string, []byte) error) ([]source.Checkpoint, error) {
	if task.Part != "" {
		return nil, errclass.Fatalf("resourcesync: part %q cannot be divided", task.Part)
	}
	var (
		one, slice  source.PlanBuffer // a package's plan; the slice of records being formed
		k, n, units int               // the slice's place, its records; the packages and records planned
		first, last string
		clean       = true
	)
	defer one.Close()
	defer slice.Close()
	flush := func(ctx context.Context) error {
		plan, err := slice.Take()
		if err != nil {
			return err
		}
		name := url.Values{"records": {strconv.Itoa(k)}, "n": {strconv.Itoa(n)}, "first": {first}, "last": {last}}.Encode()
		k, n, first, last = k+1, 0, "", ""
		return add(ctx, name, plan)
	}
	cps, err := d.Plan(ctx, task, held, func(ctx context.Context, u source.Unit) error {
		switch {
		case u.Package != nil:
			units++
			if err := one.Add(u); err != nil {
				return err
			}
			plan, err := one.Take()
			if err != nil {
				return err
			}
			return add(ctx, url.Values{"package": {u.Package.URL}}.Encode(), plan)
		case u.Record != nil:
			units++
			if n == 0 {
				first = u.Record.URI
			}
			last = u.Record.URI
			n++
			fallthrough
		case u.Document != nil:
			if err := slice.Add(u); err != nil {
				return err
			}
			if slice.Len() == listSlice {
				return flush(ctx)
			}
		case u.Failure != nil, u.Skip != nil:
			clean = false
			return errDivided
		}
		return ctx.Err()
	})
	switch {
	case !clean || errors.Is(err, errDivided):
		return nil, fmt.Errorf("resourcesync: %w: its plan met a failure", source.ErrIndivisible)
	case err != nil:
		return nil, err
	case units == 0:
		return nil, fmt.Errorf("resourcesync: %w: it plans nothing", source.ErrIndivisible)
	}
	if slice.Len() > 0 {
		if err := flush(ctx); err != nil {
			return nil, err
		}
	}
	return cps, nil
}

// planPart emits the plan of part task.Part (see Parts), as Parts made
// it: the source is not read again. A part without a plan, divided by an
// older version of this program that planned each part again, fails for
// good: its task's checkpoints are held, and the next harvest divides
// the task anew.
func (d *Planner) planPart(ctx context.Context, task source.Task, emit func(context.Context, source.Unit) error) ([]source.Checkpoint, error) {
	if task.PartPlan == nil {
		return nil, errclass.Permanentf("resourcesync: part %q has no plan (it was divided by an older version): the next harvest divides the task again", task.Part)
	}
	change := task.Mode == source.Incremental
	return nil, source.ReadPlan(ctx, task.PartPlan, func(ctx context.Context, u source.Unit) error {
		if p := u.Package; p != nil && !p.List {
			p.Index = d.index(p, change)
		}
		return emit(ctx, u)
	})
}
