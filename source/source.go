// Package source holds the model every protocol and the pipeline share: a
// Task is what one run does, a Planner (one per protocol, in a package of
// its own below source, such as source/resourcesync) turns a task into
// Units of work, a Record is what reaches the sinks, and Checkpoints are
// where the task leaves each resource set once every unit succeeded. The
// pipeline executes every unit the same way (fetch → unpack → verify →
// deliver → commit) and holds a checkpoint back at a temporary failure.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// Mode is what a task does.
type Mode string

// The modes of a task.
const (
	// Baseline copies every resource the source holds now (a snapshot).
	Baseline Mode = "baseline"
	// Incremental applies the changes of a range: the latest change of
	// each resource in it.
	Incremental Mode = "incremental"
)

// Task is what one run does.
type Task struct {
	// Source is where to start: a URL the protocol understands.
	Source string
	// Key names the source in the state store (default: Source).
	Key string
	// Mode is baseline or incremental.
	Mode Mode
	// From and Until are an incremental task's range, inclusive. A zero
	// From means "from each resource set's checkpoint"; a zero Until means
	// "up to now".
	From, Until time.Time
	// Set, when not empty, limits the task to the resource set it names.
	Set string
	// Sinks name the sinks the task delivers to.
	Sinks []string
	// Part, when not empty, is one of the parts a Parter divided the task
	// into, and PartPlan the plan Parts gave it (nil when the name holds
	// all the part needs): Plan emits that part's units only — a plan's
	// without reading the source again — and the checkpoints it returns
	// are not recorded (the task's are, once every part has committed).
	Part     string
	PartPlan []byte
}

// Change is the kind of a change a record reports.
type Change string

// The kinds of change. A record of a snapshot has none ("").
const (
	Created Change = "created"
	Updated Change = "updated"
	Deleted Change = "deleted"
)

// Link is a link a record carries to a related resource.
type Link struct {
	Rel, Href, Type string
	// Pri orders links of one relation (lowest first), as mirrors are.
	Pri int
	// Modified, Hashes and Length describe what the link names, when the
	// source says (a rel="via" link's original; zero values, or a Length
	// below 1, when it does not).
	Modified time.Time
	Hashes   fixity.Hashes
	Length   int64
}

// Record is one resource as it reaches the sinks: what it is, what its
// bytes must match, and where they come from.
type Record struct {
	// URI identifies the resource within its source. It need not be a
	// URL (an OAI-PMH identifier is not): where the bytes come from is
	// Location's.
	URI string
	// Version is the version of the resource this record is, as its
	// protocol names it (a revision number, an ETag, an OAI-PMH
	// datestamp), opaque to the executor; "" when the protocol gives
	// none. When given, "already held?" compares it with the version the
	// state holds, before any hash; otherwise the hashes decide.
	Version string
	// Location is where the bytes of a record that carries none, outside
	// a package, are fetched from: "" means URI (a ResourceSync
	// resource's URI is where it is).
	Location string
	// Mirrors are the other locations of the same bytes, tried in order
	// when Location fails (the planner decides them: a ResourceSync
	// entry's rel="duplicate" links, by priority).
	Mirrors []string `json:",omitempty"`
	// ResourceSet is the resource set it belongs to, or "".
	ResourceSet string
	// Listed is the document or package that lists the record.
	Listed string
	// Change is the change the record reports ("" in a snapshot), and
	// ChangeTime when it happened (zero: unknown).
	Change     Change
	ChangeTime time.Time
	// Length (-1 when unknown) and Hashes are what the bytes must match.
	Length int64
	Hashes fixity.Hashes
	// DocumentType is what the document must be — a namespace, a formal
	// public identifier or a MIME type — checked before it is stored when
	// validation is on (pipeline.Options.Validate); "" for nothing said.
	DocumentType string
	// Type is the media type; Lastmod the resource's last modification.
	Type    string
	Lastmod time.Time
	Links   []Link
	// Sets and About are what a protocol says of a record beside its
	// body, for the sinks that keep it: the sets it belongs to (OAI-PMH
	// setSpecs) and its about containers, each a standalone XML document
	// (OAI-PMH provenance, rights, …).
	Sets  []string
	About []string
	// Path is where the bytes are inside a package, or "".
	Path string
	// Seq is the entry's position (from 0) in the manifest or document
	// listing it: with URI and ChangeTime it names one entry of a package
	// even among several changes of a resource in the same second.
	Seq int64
	// Open, when set, opens a body the record carries (a protocol whose
	// responses hold the records themselves); otherwise the bytes are
	// read from Path in the package, or fetched from URI.
	Open func(ctx context.Context) (io.ReadCloser, error) `json:"-"`
}

// Failure is something a planner met and could not plan: a malformed
// entry, a document that could not be read. The executor records it; a
// temporary one holds the checkpoint of its resource set.
type Failure struct {
	// URI is what failed: a resource's URI, or a document's URL.
	URI string
	// ResourceSet is the set it belongs to ("" when unknown: it then
	// holds every set).
	ResourceSet string
	// Stage names where it failed ("document", "manifest", "download",
	// "resource set").
	Stage string
	// Listed is the document or package that lists a failed resource, or
	// "".
	Listed string
	// Document is the document the failure was read in when that is not
	// Listed (a package's manifest copy), or "". The copy the executor
	// keeps of it, and of Listed, is forgotten: the next run reads it
	// again rather than the copy that failed.
	Document string
	// Err is the cause; its errclass tells temporary from permanent.
	Err error
	// Resource says the failure is one resource's, counted as a failed
	// resource of the run.
	Resource bool
	// Package says a whole package could not be read (URI is its URL),
	// counted as a failed package of the run.
	Package bool
	// WholeSet says a resource set could not be read in full: its
	// checkpoint is held (at At) whatever Err's class.
	WholeSet bool
	// At is the change time a temporary failure holds its set's
	// checkpoint at (zero: where the task started in the set).
	At time.Time
	// Retry, for a permanent failure of one record the planner can ask
	// for again by itself (an OAI-PMH record by its identifier), is that
	// record: the executor keeps it, and Holdings.Retries gives it back to
	// the next task, until a run delivers it.
	Retry *Record
}

// StageError is an error of a package opened for a planner, naming the
// stage that failed ("download", "unzip", "manifest").
type StageError struct {
	Stage string
	Err   error
}

// Error returns the cause's words.
func (e *StageError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *StageError) Unwrap() error { return e.Err }

// Document is a change document a planner read, for the state's record of
// them.
type Document struct {
	URL, ResourceSet, Capability string
	From, Until                  time.Time
}

// Unit is one unit of work: exactly one field is set.
type Unit struct {
	// Package is a package to read.
	Package *Package
	// Record is one resource: to fetch from its URI, or with its body.
	Record *Record
	// Failure is something planning could not plan.
	Failure *Failure
	// Document is a change document read while planning.
	Document *Document
	// Mark is progress to record once every unit emitted before it has
	// committed.
	Mark *Mark
	// Skip is something listed that the plan leaves out on purpose, and
	// why (a document listed twice), for the run's report.
	Skip *Skip
}

// Skip is what a plan leaves out of what its source lists, and why.
type Skip struct {
	// URI is what is left out; Listed the document listing it.
	URI, Listed string
	Reason      string
}

// Mark is a planner's note of how far it got, for a later task to resume
// from when this one does not finish (Holdings.Progress gives it back).
// The executor records it only once every Record, Failure and Document
// emitted before it has been committed, and drops it when a temporary
// failure holds its resource set, so a mark never claims what is not held.
// Packages are not awaited: a planner that emits packages does not mark.
// A set's marks are cleared when its checkpoint is set: they only matter
// until the task that made them, or one resuming it, succeeds.
type Mark struct {
	ResourceSet string
	// Key names what the mark is about, within the set; a later mark of
	// the same key replaces it.
	Key string
	// Value is the planner's own (it alone reads it).
	Value string
}

// Checkpoint is where a task leaves one resource set.
type Checkpoint struct {
	ResourceSet string
	// From and Until are the range an incremental task covers in the set.
	From, Until time.Time
	// Next is where the next incremental task of the set starts when
	// every unit of this one succeeds: a baseline's snapshot time, an
	// incremental task's end.
	Next time.Time
	// Baseline is the snapshot time the set was last loaded from.
	Baseline time.Time
	// Open says a change document of the set is still open (it grows).
	Open bool
	// DescribedBy is the source's own description the set was found
	// from, as discovered (a ResourceSync Source Description, else the
	// set's Capability List), or "" when it has none.
	DescribedBy string
}

// Intersects reports whether [from, until] meets [lo, hi], both inclusive;
// a zero from or until is open-ended.
func Intersects(from, until, lo, hi time.Time) bool {
	return (from.IsZero() || !from.After(hi)) && (until.IsZero() || !until.Before(lo))
}

// ErrNotOffered is wrapped by a planner's error when the source offers
// nothing the task can be planned from (no changes, for an incremental
// task): a sync then compares with the current snapshot instead.
var ErrNotOffered = errors.New("the source does not offer it")

// Holdings is the read-only view of the destination a planner plans
// against.
type Holdings interface {
	// Checkpoint returns where the last task left resource set, if any.
	Checkpoint(ctx context.Context, resourceSet string) (Checkpoint, bool, error)
	// Progress returns the marks (by Key) recorded for resource set since
	// its checkpoint was last set: what an unfinished task got through.
	Progress(ctx context.Context, resourceSet string) (map[string]string, error)
	// Retries returns the records of resource set whose own permanent
	// failure is outstanding (the checkpoint, or the progress marks, moved
	// past them): a task that would not list them again asks for each
	// again (the ResourceSync planner in incremental tasks; the OAI-PMH
	// planner in every task, since a baseline resumed from marks skips
	// what they cover). A record failed in a package comes back as it was
	// listed (its Path the entry's); one a planner failed as Failure.Retry
	// says.
	Retries(ctx context.Context, resourceSet string) ([]Record, error)
}

// ErrNoCheckpoint is wrapped by the error of an incremental task with no
// From whose resource set has no checkpoint: run a baseline first.
var ErrNoCheckpoint = errors.New("no checkpoint for this source in the state store (run a baseline first, or give --from)")

// Resume returns where an incremental task starts in resource set set,
// the same for every protocol: From is the task's From, else the Next of
// the set's checkpoint in held; Until is the task's Until (zero: the
// planner's to decide, now or the source's clock); Baseline is carried
// over. Without a From and without a checkpoint the error wraps
// ErrNoCheckpoint; it is fatal: the run cannot go on.
func Resume(ctx context.Context, task Task, held Holdings, set string) (Checkpoint, error) {
	prev, ok, err := held.Checkpoint(ctx, set)
	if err != nil {
		return Checkpoint{}, err
	}
	cp := Checkpoint{ResourceSet: set, From: task.From, Until: task.Until, Baseline: prev.Baseline}
	if cp.From.IsZero() {
		if !ok {
			return Checkpoint{}, errclass.Fatalf("%s (resource set %q): %w", task.Source, set, ErrNoCheckpoint)
		}
		cp.From = prev.Next
	}
	return cp, nil
}

// SourceError reports that a task's source could not be read, so the run
// could not even find what to do. URL is where planning started.
type SourceError struct {
	URL string
	Err error
}

// Error names the source once: the cause's own words when they name it
// already (a fetch error names the URL it requested), and a cause that is
// itself a SourceError as it stands.
func (e *SourceError) Error() string {
	var inner *SourceError
	if errors.As(e.Err, &inner) {
		return e.Err.Error()
	}
	msg := e.Err.Error()
	if strings.Contains(msg, e.URL) {
		return "source unreadable: " + msg
	}
	return fmt.Sprintf("source %s unreadable: %s", e.URL, msg)
}

// Unwrap returns the cause.
func (e *SourceError) Unwrap() error { return e.Err }

// Planner is what a protocol implements: Plan emits the units of task, in
// order, to emit, reading held, and returns the checkpoints the task
// reaches when every unit succeeds — one per resource set it met. An error
// emit returns ends the plan with that error. Plan's own error means the
// plan is incomplete (the source could not be read, or a fatal
// condition); problems with single documents or entries are emitted as
// Failures and planning goes on.
type Planner interface {
	Plan(ctx context.Context, task Task, held Holdings, emit func(context.Context, Unit) error) ([]Checkpoint, error)
}

// Parter is a Planner that can divide a task into parts, each executed
// alone — by any worker of a cluster, in any order, again after a worker
// died — so that one source's harvest is spread over several machines.
type Parter interface {
	Planner
	// Parts plans task once and divides what it plans into parts, handing
	// each to add as soon as it is whole: its name (unique within the
	// task, opaque to the executor) and its plan (a PlanBuffer's Take, or
	// nil when the name holds all the part needs, such as one list to
	// request), which Plan takes back as Task.Part and Task.PartPlan. The
	// parts are disjoint and together plan the packages and records Plan
	// emits for the whole task; a part's plan is bounded (a package, or a
	// slice of records), and Parts holds no more than the part it forms.
	// Parts returns the checkpoints the task reaches when every part
	// succeeds. Planning a part again later (a worker's job rescued)
	// emits the same plan, the executor skipping what it committed. An
	// error wrapping ErrIndivisible says the task does not divide: what
	// add received is dropped, and the task planned whole. A part is not
	// divided again: a task with a Part is a fatal error.
	Parts(ctx context.Context, task Task, held Holdings, add func(ctx context.Context, name string, plan []byte) error) ([]Checkpoint, error)
}

// Package is a unit of work: a ZIP package to read (a Resource or Change
// Dump's package), or a Change List standing in for one (List).
type Package struct {
	// URL is the package's location.
	URL string
	// Expect is what the package's bytes must match: the length and
	// hashes its dump declares.
	Expect fixity.Expect
	// Dump is the Resource or Change Dump document listing it.
	Dump string
	// ResourceSet is the Capability List it comes from, or "".
	ResourceSet string
	// At is the snapshot datetime of a Resource Dump package.
	At time.Time
	// From and Until are a change package's interval (Until zero: open).
	From, Until time.Time
	// Contents is the URL of a copy of the package's manifest, or "".
	Contents string
	// List marks a Change List standing in for a package: its changes are
	// fetched by GET, not read from a ZIP.
	List bool
	// Wins, when not empty, are the only entries of the package to apply
	// (the latest change of each of their resources), as the planner read
	// them from a copy of the package's manifest or the manifest itself;
	// Seq names each one. Empty: every entry the package lists.
	Wins []Record
	// Index reads what the package holds, from its index entry (the
	// archive's top-level manifest.xml) or from the copy at Contents: the
	// executor knows nothing else of the package's format. Required for
	// a package that is not a List.
	Index Index `json:"-"`
}
