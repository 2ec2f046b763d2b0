package site

import "errors"

// The verbs of an Action.
const (
	// ActHarvest makes the site due now: the daemon harvests it at once
	// when woken, or the next "run --due" does.
	ActHarvest = "harvest"
	// ActPause and ActResume pause and resume the site (Registry.Pause).
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

// ErrBadAction is wrapped by the error of an action that cannot be done
// as asked: an unknown verb, a schedule that does not parse.
var ErrBadAction = errors.New("bad action")
