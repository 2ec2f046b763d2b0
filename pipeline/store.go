package pipeline

import (
	"context"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

// Store is the state as the executor reads and commits it: the part of the
// state store's contract a run uses. state.Store implements it, and
// state/statetest is the conformance suite every implementation passes.
// A run's writes of resources, changes, failures, retries and progress go
// through Commit alone, one batch at a time, from the commit stage.
type Store interface {
	// Runs.
	BeginRun(ctx context.Context, r state.Run) (int64, error)
	FinishRun(ctx context.Context, id int64, finished time.Time, status string, report []byte) error
	RunProgress(ctx context.Context, id int64, report []byte) error
	MarkInterrupted(ctx context.Context, now time.Time, source string, fence *state.Lease) (int64, error)
	FailedPackages(ctx context.Context, runID int64) (map[string]bool, bool, error)
	Run(ctx context.Context, id int64) (state.Run, error)
	// The parts of a task spread over workers (see CloseTask).
	TaskParts(ctx context.Context, id int64) ([]state.Part, error)
	CloseTask(ctx context.Context, id int64) error
	// What is held.
	Commit(ctx context.Context, b state.Batch) error
	Resource(ctx context.Context, source, uri string) (state.Resource, bool, error)
	Deliveries(ctx context.Context, source, uri string) ([]state.Delivery, error)
	CountResources(ctx context.Context, source string, includeDeleted bool) (int64, error)
	WalkResources(ctx context.Context, source string, fn func(state.Resource) error) error
	ForgetResources(ctx context.Context, source string, uris []string, fence *state.Lease) error
	// The other sources held in some of the same sinks (an audit's).
	OtherSources(ctx context.Context, source string, sinks []string) ([]string, error)
	// Where each resource set stands, for the planner (source.Holdings).
	Checkpoint(ctx context.Context, source, set string) (state.Checkpoint, bool, error)
	Progress(ctx context.Context, source, set string) (map[string]string, error)
	Retries(ctx context.Context, source, set string) ([]state.Retry, error)
	// Packages delivered in full (the package skip), and the copies of
	// documents kept for conditional requests.
	PackageDone(ctx context.Context, url, sinks string) (state.PackageRecord, bool, error)
	SetPackagesDone(ctx context.Context, ps []state.PackageRecord) error
	Document(ctx context.Context, url string) (state.Document, bool, error)
	PutDocument(ctx context.Context, d state.Document) error
}

var _ Store = (*state.Store)(nil)
