package publish

import (
	"context"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

// Holdings is what a Source is published from: what the destination holds
// (a snapshot of resources) and how it got there (a log of changes).
type Holdings interface {
	// View calls fn with a consistent view of the holdings, valid until fn
	// returns. fn's error is returned unchanged.
	View(ctx context.Context, fn func(View) error) error
}

// View is one consistent view of Holdings. Every walk streams: nothing of
// it is held in memory by the view.
type View interface {
	// At is the time the view is current to: the newest change it holds
	// (every change recorded later is missing from it), or the zero time
	// when it knows of none.
	At(ctx context.Context) (time.Time, error)
	// Sources lists the sources held, in order. Each becomes a resource
	// set of the published Source.
	Sources(ctx context.Context) ([]string, error)
	// DescribedBy is the source's own description as the harvest
	// discovered it (its Source Description, else its Capability List),
	// or "" when none is known.
	DescribedBy(ctx context.Context, source string) (string, error)
	// SiteOf is the registry site that harvests source, or "" when none
	// is known: the name its resource set is published under.
	SiteOf(ctx context.Context, source string) (string, error)
	// CountResources counts the resources of source the destination holds
	// (no tombstones).
	CountResources(ctx context.Context, source string) (int64, error)
	// Resources calls fn for each resource of source the destination
	// holds, in the same order each time within one view (the state
	// store's: URI order).
	Resources(ctx context.Context, source string, fn func(state.Resource) error) error
	// Changes calls fn for each change of source with a recorded stamp,
	// in the order recorded, the same each time within one view; with
	// superseded, each change tells whether a later change of its
	// resource is recorded (ChangeRecord.Superseded), which may cost a
	// look-up per change.
	Changes(ctx context.Context, source string, superseded bool, fn func(state.ChangeRecord) error) error
}

// FromState returns the Holdings of a state store.
func FromState(s *state.Store) Holdings { return stateHoldings{s} }

type stateHoldings struct{ s *state.Store }

var _ Holdings = stateHoldings{}

func (h stateHoldings) View(ctx context.Context, fn func(View) error) error {
	return h.s.View(ctx, func(v *state.Snapshot) error { return fn(stateView{v}) })
}

type stateView struct{ v *state.Snapshot }

var _ View = stateView{}

func (s stateView) At(ctx context.Context) (time.Time, error) { return s.v.LastRecorded(ctx) }

func (s stateView) Sources(ctx context.Context) ([]string, error) { return s.v.Sources(ctx) }

func (s stateView) SiteOf(ctx context.Context, source string) (string, error) {
	return s.v.SiteOf(ctx, source)
}

func (s stateView) DescribedBy(ctx context.Context, source string) (string, error) {
	return s.v.DescribedBy(ctx, source)
}

func (s stateView) CountResources(ctx context.Context, source string) (int64, error) {
	return s.v.CountResources(ctx, state.ResourceQuery{Source: source, Held: true})
}

func (s stateView) Resources(ctx context.Context, source string, fn func(state.Resource) error) error {
	return s.v.WalkResources(ctx, state.ResourceQuery{Source: source, Held: true}, fn)
}

func (s stateView) Changes(ctx context.Context, source string, superseded bool, fn func(state.ChangeRecord) error) error {
	return s.v.WalkChanges(ctx, state.ChangeQuery{Source: source, Superseded: superseded}, fn)
}
