// Package statetest is a conformance suite for rsharvest's state store:
// Run checks that an implementation keeps the contract of the methods of
// state.Store the rest of the program calls, as testing/fstest does for a
// file system.
//
// The suite covers every method of Store and Snapshot: round trips,
// not-found answers, rejected input (a rejected batch stores nothing);
// several goroutines and several processes committing batches that touch
// the same resources at once (no error, no lost and no torn batch); change
// stamps unique and strictly increasing in commit order, across goroutines
// and processes, and when the clock is set back; and View's snapshots
// standing still while other goroutines commit.
package statetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

// Snapshot is a consistent read-only view of a store, as *state.Snapshot:
// every call reads the same state, whatever is committed meanwhile.
type Snapshot interface {
	// LastRecorded returns the newest change stamp the view holds (zero:
	// none); every change of a later commit of the same source has a
	// later stamp (of any source, where commits take one lock: SQLite).
	LastRecorded(ctx context.Context) (time.Time, error)
	// Sources returns, sorted, the sources of the resources and changes
	// held.
	Sources(ctx context.Context) ([]string, error)
	// CountResources counts the resources q selects.
	CountResources(ctx context.Context, q state.ResourceQuery) (int64, error)
	// WalkResources calls fn for each resource q selects, in (source,
	// URI) order; fn's error stops the walk and is returned unchanged.
	WalkResources(ctx context.Context, q state.ResourceQuery, fn func(state.Resource) error) error
	// WalkChanges calls fn for each change q selects, in stamp order;
	// fn's error stops the walk and is returned unchanged.
	WalkChanges(ctx context.Context, q state.ChangeQuery, fn func(state.ChangeRecord) error) error
}

// Store is the state store as the rest of the program uses it: the
// methods of *state.Store called outside package state, each with the
// contract its doc comment in package state states. S is the
// implementation's snapshot type (*state.Snapshot for *state.Store).
type Store[S Snapshot] interface {
	// Close releases the store; no call may follow.
	Close() error

	// The harvest log.
	BeginRun(ctx context.Context, r state.Run) (int64, error)
	FinishRun(ctx context.Context, id int64, finished time.Time, status string, report []byte) error
	RunProgress(ctx context.Context, id int64, report []byte) error
	Run(ctx context.Context, id int64) (state.Run, error)
	Runs(ctx context.Context, limit int) ([]state.Run, error)
	RunsSince(ctx context.Context, since time.Time, site string) ([]state.Run, error)
	RunsFinishedSince(ctx context.Context, since time.Time) ([]state.Run, error)
	MarkInterrupted(ctx context.Context, now time.Time, source string, fence *state.Lease) (int64, error)
	AddEvent(ctx context.Context, e state.Event) error
	Events(ctx context.Context, since time.Time, site string) ([]state.Event, error)
	EventsOf(ctx context.Context, since time.Time, operation string) ([]state.Event, error)

	// Batches and what they record.
	Commit(ctx context.Context, b state.Batch) error
	AddFailures(ctx context.Context, fs []state.Failure) error
	Failures(ctx context.Context, runID int64, limit int) ([]state.Failure, int64, error)
	EachFailure(ctx context.Context, since time.Time, site string, fn func(state.Failure) error) error
	PruneLog(ctx context.Context, keep state.LogKeep, now time.Time, batch int) (state.Pruned, error)
	FailedPackages(ctx context.Context, runID int64) (map[string]bool, bool, error)
	Changes(ctx context.Context, runID int64) ([]state.ChangeRecord, error)
	SetCheckpoint(ctx context.Context, c state.Checkpoint) error
	Checkpoint(ctx context.Context, source, capList string) (state.Checkpoint, bool, error)
	HasCheckpoint(ctx context.Context, source string) (bool, error)
	Holders(ctx context.Context, source string) ([]string, error)
	AddHolders(ctx context.Context, source string, sinks []string) error
	OtherSources(ctx context.Context, source string, sinks []string) ([]string, error)
	RemoveHolders(ctx context.Context, source string, sinks []string) error
	Progress(ctx context.Context, source, set string) (map[string]string, error)
	Retries(ctx context.Context, source, set string) ([]state.Retry, error)
	Deliveries(ctx context.Context, source, uri string) ([]state.Delivery, error)
	ChangeDocuments(ctx context.Context, source string) ([]state.ChangeDocument, error)

	// Resources.
	Resource(ctx context.Context, source, uri string) (state.Resource, bool, error)
	PutResources(ctx context.Context, rs []state.Resource) error
	CountResources(ctx context.Context, source string, includeDeleted bool) (int64, error)
	WalkResources(ctx context.Context, source string, fn func(state.Resource) error) error
	ForgetResources(ctx context.Context, source string, uris []string, fence *state.Lease) error

	// Packages and documents.
	PackageDone(ctx context.Context, url, sinks string) (state.PackageRecord, bool, error)
	SetPackagesDone(ctx context.Context, ps []state.PackageRecord) error
	Document(ctx context.Context, url string) (state.Document, bool, error)
	PutDocument(ctx context.Context, d state.Document) error

	// The site registry.
	PutSite(ctx context.Context, site state.Site) error
	SetSiteNext(ctx context.Context, name string, next time.Time) error
	RetrySite(ctx context.Context, name string, at, read time.Time) error
	SetSitePaused(ctx context.Context, name string, paused bool) error
	SiteHarvested(ctx context.Context, name string, last time.Time, status string, runID int64) error
	RemoveSite(ctx context.Context, name string) error
	Site(ctx context.Context, name string) (state.Site, error)
	Sites(ctx context.Context) ([]state.Site, error)
	DueSites(ctx context.Context, now time.Time) ([]state.Site, error)
	SetSitesDue(ctx context.Context, due []state.DueTime) error
	SitePage(ctx context.Context, q state.SiteQuery) (state.SitePage, error)
	SiteRuns(ctx context.Context, site string, before int64, limit int) ([]state.Run, error)
	RunningRun(ctx context.Context, site string) (state.Run, bool, error)
	RunCounts(ctx context.Context) (map[string]int64, error)
	SiteEvents(ctx context.Context, site string, limit int) ([]state.Event, error)

	// Reports sent.
	ClaimReport(ctx context.Context, key string) (bool, error)
	ReportSent(ctx context.Context, key string) error
	ReleaseReport(ctx context.Context, key string) error
	LastReport(ctx context.Context, prefix string) (string, bool, error)

	// Tasks spread over workers.
	CreateTask(ctx context.Context, t state.Task, parts []string, plan func(int) ([]byte, error), also func(context.Context, *sql.Tx, int64) error) (int64, error)
	TaskPartPlan(ctx context.Context, id int64, name string) ([]byte, error)
	OpenTask(ctx context.Context, key string) (state.Task, bool, error)
	TaskParts(ctx context.Context, id int64) ([]state.Part, error)
	TaskPart(ctx context.Context, id int64, name string) (state.Part, bool, error)
	CloseTask(ctx context.Context, id int64) error

	// JobDB opens a pool on the store's file for a job engine; the
	// caller closes it before the store.
	JobDB() (*sql.DB, error)
	// PostgresURL is the URL of the PostgreSQL database the store is
	// kept in ("" for a file), where a job engine connects instead.
	PostgresURL() string

	// View calls fn with a snapshot valid until fn returns; it never
	// blocks a writer, and fn's error is returned unchanged.
	View(ctx context.Context, fn func(S) error) error
}

// ChildEnv is the environment variable that makes Run, in a process the
// suite started, play a child's part.
const ChildEnv = "RSHARVEST_STATETEST_CHILD"

// Harness is what Run needs of an implementation.
type Harness[S Snapshot] struct {
	// Open opens the store kept at path, creating it when the file does
	// not exist. The suite gives it paths under t.TempDir(), and opens
	// one path several times at once, from this process and from others.
	Open func(ctx context.Context, path string) (Store[S], error)
	// Ahead, if not nil, moves the newest change stamp of the closed
	// store at path d into the future, as a clock d ahead of this one
	// would have recorded it: the store's next commits then run on a
	// clock set back by d. When it is nil that case is skipped.
	Ahead func(ctx context.Context, path string, d time.Duration) error
}

// Run runs the suite as subtests of t.
//
// The cases that need several processes run the test binary (os.Args[0])
// again, with -test.run selecting t's test and the environment variable
// ChildEnv set (to the child's part, in JSON); in such a process Run plays the child's part instead of
// running the suite. The test that calls Run must therefore call it
// whatever its flags, before anything that a child should not do.
func Run[S Snapshot](t *testing.T, h Harness[S]) {
	if spec, ok := childSpec(t); ok {
		runChild(t, h, spec)
		return
	}
	if h.Open == nil {
		t.Fatal("statetest: Harness.Open is nil")
	}
	t.Run("Runs", func(t *testing.T) { testRuns(t, h) })
	t.Run("Events", func(t *testing.T) { testEvents(t, h) })
	t.Run("FailuresRead", func(t *testing.T) { testFailuresRead(t, h) })
	t.Run("PruneLog", func(t *testing.T) { testPruneLog(t, h) })
	t.Run("Commit", func(t *testing.T) { testCommit(t, h) })
	t.Run("CommitRejects", func(t *testing.T) { testCommitRejects(t, h) })
	t.Run("Checkpoints", func(t *testing.T) { testCheckpoints(t, h) })
	t.Run("Retries", func(t *testing.T) { testRetries(t, h) })
	t.Run("Resources", func(t *testing.T) { testResources(t, h) })
	t.Run("Packages", func(t *testing.T) { testPackages(t, h) })
	t.Run("Documents", func(t *testing.T) { testDocuments(t, h) })
	t.Run("Sites", func(t *testing.T) { testSites(t, h) })
	t.Run("RegistryPages", func(t *testing.T) { testRegistryPages(t, h) })
	t.Run("Reports", func(t *testing.T) { testReports(t, h) })
	t.Run("Holders", func(t *testing.T) { testHolders(t, h) })
	t.Run("Tasks", func(t *testing.T) { testTasks(t, h) })
	t.Run("JobDB", func(t *testing.T) { testJobDB(t, h) })
	t.Run("View", func(t *testing.T) { testView(t, h) })
	t.Run("ViewStandsStill", func(t *testing.T) { testViewStandsStill(t, h) })
	t.Run("Reopen", func(t *testing.T) { testReopen(t, h) })
	t.Run("ConcurrentGoroutines", func(t *testing.T) { testGoroutines(t, h) })
	root := t.Name()
	t.Run("ConcurrentProcesses", func(t *testing.T) { testProcesses(t, h, root) })
	t.Run("StampsClockSetBack", func(t *testing.T) { testClockSetBack(t, h) })
}
