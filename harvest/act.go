package harvest

import (
	"context"
	"fmt"
	"time"

	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// Act does a on the registry and writes it, with who asked, to the
// harvest log. An unknown site's error wraps state.ErrNoSite; an unknown
// verb or a schedule that does not parse is an *InvalidError wrapping
// site.ErrBadAction.
func (h *Harvester) Act(ctx context.Context, a site.Action) error {
	reg := site.Registry{Store: h.Store}
	s, err := reg.Site(ctx, a.Site)
	if err != nil {
		return err
	}
	what := a.Verb
	switch a.Verb {
	case site.ActHarvest:
		if s.Paused {
			// A paused site is never due: the request would do nothing.
			return &InvalidError{fmt.Errorf("site %s: %w: it is paused: resume it first", s.Name, site.ErrBadAction)}
		}
		what = "harvest now"
		err = h.Store.SetSiteNext(ctx, s.Name, time.Now().UTC())
	case site.ActPause:
		err = reg.Pause(ctx, s.Name)
	case site.ActResume:
		err = reg.Resume(ctx, s.Name)
	case site.ActSchedule:
		when, perr := site.ParseSchedule(a.Schedule)
		if perr != nil {
			return &InvalidError{fmt.Errorf("site %s: %w: schedule: %w", s.Name, site.ErrBadAction, perr)}
		}
		what = fmt.Sprintf("schedule %s (was %s)", when, s.When)
		old := s.When
		s.Schedule, s.When = when.String(), when
		s.Next = time.Now().UTC()
		if !s.Last.IsZero() {
			s.Next = when.Next(s.Last, time.Local)
		}
		if err = reg.Put(ctx, s); err == nil && old.String() == when.String() {
			what = fmt.Sprintf("schedule %s (unchanged)", when)
		}
	default:
		return invalidf("site %s: %w: no action %q (harvest, pause, resume, schedule)", s.Name, site.ErrBadAction, a.Verb)
	}
	if err != nil {
		return err
	}
	return h.Store.AddEvent(ctx, state.Event{Operation: harvestlog.Action, Site: s.Name, Message: what + ", asked by " + a.Who})
}
