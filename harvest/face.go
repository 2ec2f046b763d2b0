package harvest

import (
	"context"
	"errors"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/state"
)

// What the executor reports, as the library offers it to a face (the
// command line, the daemon, a status page): a face imports harvest, not
// the executor.
type (
	// Counts are a run's counts as it goes (Harvester.Counts; a progress
	// display reads them).
	Counts = pipeline.Counts
	// Preview is what a dry run would do to one resource
	// (Harvester.Preview).
	Preview = pipeline.Preview
	// AuditReport is what an audit found (Harvester.Audit).
	AuditReport = pipeline.AuditReport
	// RunOptions are the executor's options of a job (Harvester.Options).
	RunOptions = pipeline.Options
	// SourceError is the error of a source that could not be read at all.
	SourceError = pipeline.SourceError
)

// The actions of a Preview.
const (
	PreviewFetch  = pipeline.PreviewFetch
	PreviewWrite  = pipeline.PreviewWrite
	PreviewDelete = pipeline.PreviewDelete
)

// Class is how a harvest that returned an error ended, for a face to tell
// (the command line's exit codes).
type Class int

// The classes of ClassOf.
const (
	// Failed: the harvest failed (a fatal error: a sink down, the disk
	// full, a bug).
	Failed Class = iota
	// Invalid: what was asked is wrong — a setting, the state file (not
	// one, damaged, readable by others, in use), a range with no
	// checkpoint to start from.
	Invalid
	// Interrupted: the harvest was stopped (its context ended); the same
	// request again resumes it.
	Interrupted
	// Unreadable: the source could not be read at all.
	Unreadable
	// Stopped: a guard stopped it before it changed anything (--max-delete).
	Stopped
)

// ClassOf is the class of err, returned by a harvest run with ctx.
func ClassOf(ctx context.Context, err error) Class {
	var se *pipeline.SourceError
	switch {
	case ctx.Err() != nil:
		// Interrupted, whatever it stopped: opening a sink (whose error
		// reads as an invalid one) included.
		return Interrupted
	case IsInvalid(err), errors.Is(err, state.ErrNotStateFile), errors.Is(err, state.ErrReadable), errors.Is(err, state.ErrDamaged),
		errors.Is(err, state.ErrLocked), errors.Is(err, pipeline.ErrNoCheckpoint):
		return Invalid
	case errors.Is(err, context.Canceled):
		return Interrupted
	case errors.As(err, &se):
		return Unreadable
	case errors.Is(err, pipeline.ErrTooManyDeletes):
		return Stopped
	case errclass.IsFatal(err):
		return Failed
	}
	return Failed
}
