package harvest

import (
	"context"
	"fmt"
	"time"

	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// The verbs of an Action.
const (
	// ActHarvest makes the site due now: the daemon harvests it at once
	// when woken (daemon.Options.Wake), or the next "run --due" does.
	ActHarvest = "harvest"
	// ActPause and ActResume pause and resume the site (site.Registry.Pause).
	ActPause  = "pause"
	ActResume = "resume"
	// ActSchedule gives the site Action.Schedule as its schedule; its next
	// harvest is then the new schedule's after its last (now when it was
	// never harvested).
	ActSchedule = "schedule"
)

// An Action is what an operator asks of a registry site through a user
// interface (the status page): a verb (ActHarvest, ActPause, ActResume,
// ActSchedule), and who asked, for the harvest log.
type Action struct {
	Site string
	Verb string
	// Schedule is ActSchedule's new schedule ("every 1d", a cron expression).
	Schedule string
	// Who asked: a user name, or which credential.
	Who string
}

// Act does a on the registry and writes it, with who asked, to the
// harvest log. An unknown site's error wraps state.ErrNoSite; an unknown
// verb or a schedule that does not parse is an *InvalidError.
func (h *Harvester) Act(ctx context.Context, a Action) error {
	reg := site.Registry{Store: h.Store}
	s, err := reg.Site(ctx, a.Site)
	if err != nil {
		return err
	}
	what := a.Verb
	switch a.Verb {
	case ActHarvest:
		what = "harvest now"
		err = h.Store.SetSiteNext(ctx, s.Name, time.Now().UTC())
	case ActPause:
		err = reg.Pause(ctx, s.Name)
	case ActResume:
		err = reg.Resume(ctx, s.Name)
	case ActSchedule:
		when, perr := site.ParseSchedule(a.Schedule)
		if perr != nil {
			return &InvalidError{fmt.Errorf("site %s: schedule: %w", s.Name, perr)}
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
		return invalidf("site %s: no action %q (harvest, pause, resume, schedule)", s.Name, a.Verb)
	}
	if err != nil {
		return err
	}
	return h.Store.AddEvent(ctx, state.Event{Operation: harvestlog.Action, Site: s.Name, Message: what + ", asked by " + a.Who})
}
