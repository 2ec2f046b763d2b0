// Package pipeline is rsharvest's executor: it runs the units of work a
// protocol's planner emits (source.Planner) through the stages
//
//	fetch → unpack → verify → deliver → commit
//
// as a concurrent streaming pipeline, the same for every protocol and
// mode. One errgroup owns a run; every stage
// owns and closes its output channel; every send and wait selects on the
// run's context; pools have fixed sizes and channels are bounded, so memory
// does not grow with the size of a dump. A fatal error cancels the run; an
// error of one package or resource is recorded and the run goes on.
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/internal/retry"
	"github.com/rsharvest/rsharvest/pipeline/unpack"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/unzip"
)

// Options configure a run.
type Options struct {
	// Source is where to start: a URL the protocol understands (for
	// ResourceSync, any of a source's documents or a bare site URL; for
	// OAI-PMH, a repository's base URL).
	Source string
	// SourceKey names the source in the state store: the resources,
	// deliveries, change documents and checkpoints of a run are kept under
	// it, so two sources that publish the same URI keep separate records,
	// and runs with the same key share what is held. Default: Source.
	SourceKey string
	// Sinks receive every verified resource. At least one is required.
	Sinks []sink.Sink
	// SinkNames name the sinks in the state store (which sink took which
	// version), in the order of Sinks; they must be stable across runs and
	// hold no credentials. Default: "sink1", "sink2", …
	SinkNames []string
	// Protocol plans the run's task: its planner is made with Settings
	// and the run's services (documents spooled, capped and asked for
	// conditionally; packages kept for the run). Required. Every unit it
	// emits is executed the same way, whatever the protocol and mode:
	// packages (all their entries, or their winners, as the package's
	// Index lists them), records to GET or carrying their bodies,
	// deletions.
	Protocol source.Protocol
	// Settings are what the job says of its source to the protocol.
	Settings source.Settings
	// Store is the state store. Required.
	Store Store
	// StoreShared says other runs use Store at the same time (several
	// sites harvested at once, or other machines sharing a store kept in
	// PostgreSQL): the run then marks interrupted only the runs of its
	// own source recorded as running (its caller holds the source's
	// lease, state.SourceLease), not every one
	// (state.Store.MarkInterrupted).
	StoreShared bool
	// Fence, when set, is the lease of the source the run's caller holds
	// (state.Store.Lease, state.SourceLease): every batch and checkpoint
	// the run commits is refused once another harvest has taken it
	// (state.Batch.Fence, state.ErrLeaseLost), so a worker whose lease
	// was given to another while it was cut off never commits after it.
	Fence *state.Lease
	// Part, when set, runs one part of a task spread over workers
	// (Divide, state.CreateTask): the planner emits that part's plan, and
	// the run records it done (with what it held back) instead of setting
	// checkpoints, which CloseTask sets once every part is done. The run
	// marks no other run interrupted (other parts run at once), and a
	// baseline's part finds nothing "no longer listed". Fence is then the
	// part's lease.
	Part *Part
	// Site is the registry's site harvested, recorded with the run ("":
	// none).
	Site string
	// Client fetches documents and packages. Required.
	Client *fetch.Client
	// Concurrency is the number of package downloads in flight (default
	// 4); as many packages again may be unpacked and delivered meanwhile.
	Concurrency int
	// ListConcurrency is the number of resource GETs in flight when
	// syncing from lists (default 16).
	ListConcurrency int
	// Workers is the number of entries verified and delivered in parallel
	// (default: the number of CPUs).
	Workers int
	// SpoolDir holds downloaded packages while they are unpacked (default:
	// the system's temporary directory). Each package's file is removed
	// when the package is done.
	SpoolDir string
	// Limits are the safety caps for ZIP packages.
	Limits unzip.Limits
	// MaxDocumentSize caps the bytes of one document fetched
	// from the source (documents are spooled to SpoolDir before they are
	// parsed): a longer one fails, permanently, wrapping fetch.ErrTooLarge,
	// so an endless body cannot fill the disk. It applies only when the
	// document's length is not given by its referrer. Zero means
	// fetch.DefaultMaxDocumentSize; negative means no cap.
	MaxDocumentSize int64
	// MaxPackageSize caps the bytes of a package whose dump does not give
	// its length (a length given is enforced exactly): a longer one fails,
	// permanently, wrapping fetch.ErrTooLarge. Zero or negative: no cap.
	MaxPackageSize int64
	// Set, when not empty, is the task's resource set: the run syncs only
	// the set it names, as its protocol understands the name. By default
	// every set is synced, each with its own checkpoints.
	Set string
	// RequireHash refuses resources that give no md5, sha-1, sha-256 or
	// sha-512: each fails, permanently, before its bytes are read. By
	// default (the specification makes hash and length optional) such a
	// resource is delivered after the checks that exist — its declared
	// length and, inside a package, the ZIP entry's CRC-32 — and counted as
	// unverified (runreport.Report.Resources.Unverified; the state records the check
	// it passed in state.Resource.Verified).
	RequireHash bool
	// VerifyAll checks every digest an entry lists. By default only the
	// strongest is checked (fixity.Hashes.Strongest: sha-512, else
	// sha-256, else sha-1, else md5), with the length and, inside a
	// package, the CRC-32: a weaker digest beside a stronger one adds no
	// integrity, only hashing time. The state records the digests the
	// entry lists either way.
	VerifyAll bool
	// DisableRangeResync always downloads whole packages. By default, on a
	// re-sync, a package whose server honours Range is read in place and
	// only its new or changed entries are fetched (see readPackage).
	DisableRangeResync bool
	// DisableStreaming processes a downloaded package only once it is
	// complete. By default, while a package downloads, the entries that
	// follow a leading manifest.xml are delivered as their bytes arrive,
	// each once its own checks pass, and the rest once the package is
	// complete (see package unpack).
	DisableStreaming bool
	// DisablePackageSkip reads every package again. By default a baseline
	// skips, without reading anything of it, a package the state records
	// as delivered in full to the same sinks with the same declared length
	// and hashes (see skip.go).
	DisablePackageSkip bool
	// SinkRetries is how often a sink's temporary failure is retried within
	// a run (default 3; negative: never), unless the sink retries its own
	// requests (sink.Retrier: es, solr); SinkBackoff the first wait
	// (default 200 ms).
	SinkRetries int
	SinkBackoff time.Duration
	// Counts, when set, receives the live counters (for progress display).
	Counts *Counts
	// DryRun reads the plan and tells Preview what the run would fetch,
	// write and delete, changing nothing: no resource is fetched, no sink
	// written, the state only read (see previewing).
	DryRun  bool
	Preview func(Preview)
	// Validate checks each document that says what it must be
	// (source.Record.DocumentType) before it is stored (see validate.go);
	// Schemas are the XSD files to validate a type against, by type.
	Validate bool
	Schemas  map[string]string
	// DeleteUnlisted deletes what the state holds of the source and a
	// run (baseline or incremental) of a protocol whose plans name
	// everything (source.Protocol.WholeListing) no longer lists; without
	// it, each is reported as skipped, "no longer listed", and stays held.
	DeleteUnlisted bool
	// MaxDelete, when set, bounds the resources the run may delete: its
	// deletions wait until the plan is read whole, and a run that would
	// delete more stops before deleting any (ErrTooManyDeletes).
	MaxDelete DeleteLimit
	// LiveEvery is how often a running run's counts so far are written to
	// its report in the state (Store.RunProgress), for a status page to
	// show (default 5 s; negative: never).
	LiveEvery time.Duration
	// Logger receives the run's log; nil discards it.
	Logger *slog.Logger
}

func (o *Options) defaults() error {
	if o.Source == "" {
		return errclass.Fatalf("no source given")
	}
	if len(o.Sinks) == 0 {
		return errclass.Fatalf("no sink given")
	}
	if o.Store == nil || o.Client == nil {
		return errclass.Fatalf("pipeline: a state store and a fetch client are required")
	}
	if o.Protocol.New == nil {
		return errclass.Fatalf("pipeline: no protocol to plan with")
	}
	if o.SourceKey == "" {
		o.SourceKey = o.Source
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.SinkRetries == 0 {
		o.SinkRetries = 3
	}
	if o.SinkBackoff <= 0 {
		o.SinkBackoff = 200 * time.Millisecond
	}
	if o.SpoolDir == "" {
		o.SpoolDir = os.TempDir()
	}
	if o.MaxDocumentSize == 0 {
		o.MaxDocumentSize = fetch.DefaultMaxDocumentSize
	}
	if o.Counts == nil {
		o.Counts = &Counts{}
	}
	if o.LiveEvery == 0 {
		o.LiveEvery = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Limits.Logger == nil {
		o.Limits.Logger = o.Logger
	}
	return nil
}

// run is the state of one synchronisation.
type run struct {
	opts    Options
	log     *slog.Logger
	counts  *Counts
	rec     recorder
	runID   int64
	results chan result
	sinks   []boundSink

	// marks orders the planner's marks after the units before them.
	marks progress

	// book tracks which packages were delivered in full (see skip.go).
	book packageBook

	// reader reads the packages (see readPackage): it holds a slot per
	// download in flight (Options.Concurrency) and the change packages an
	// incremental run keeps between planning and applying.
	reader *unpack.Reader

	// checkpoints are where the run's plan leaves each resource set when
	// every unit succeeds (set when planning ends).
	checkpoints []source.Checkpoint
	// wouldStop is the error of the real run that a dry run's plan would
	// have stopped (too many deletions: see deleteGuard), ending the dry
	// run once its whole plan is previewed.
	wouldStop error

	// docMu orders the run's decisions on the copies of documents kept
	// for conditional requests (see keepCopy, forgetCopy).
	docMu sync.Mutex
	// forgotten are the documents whose kept copy this run forgot (see
	// planFailed), each once; guarded by docMu.
	forgotten map[string]bool

	atMu sync.Mutex
	// holds are, per resource set, the earliest change time of a
	// temporary failure; temporary counts those failures.
	holds map[string]time.Time

	// lateFailed are URIs a batching sink reported failed before their
	// outcome reached the commit stage, with the sinks that failed them
	// (owned by the commit goroutine).
	lateFailed map[string][]string

	// resync says the state held resources when the run began: a re-sync,
	// where reading packages by Range can pay (see readPackage). Decided once,
	// so that a first sync never turns to Range as its own outcomes commit.
	resync bool
	// fresh, when the state held no record of the source (tombstones
	// included) when the run began, holds the URIs the commit stage has
	// received since: holding asks the state only about those.
	fresh *freshFilter

	// onFinish, when set, runs after a run without fatal error, before the
	// run is closed in the state store (checkpoints).
	onFinish func(ctx context.Context, rep *runreport.Report) error

	// mode is what the run does with what its plan names: delivering
	// (a harvest), or an audit's listing (see strategy).
	mode strategy

	// stopLive stops writing the counts so far to the state (see live).
	stopLive func()

	// listed, in a baseline of a protocol whose plans name everything,
	// holds the URIs the plan named (see unlisted); nil otherwise.
	listed *freshFilter
}

// boundSink is a sink with a semaphore of its declared concurrency.
type boundSink struct {
	sink.Sink
	name string
	// limit is how many writes it takes at once; io is the sink within
	// that limit and with the run's retries (sink.WithLimit,
	// sink.WithRetry): Put and Delete go through it.
	limit int
	io    sink.Sink
}

func (s boundSink) Put(ctx context.Context, res *sink.Resource, body io.Reader) error {
	return s.io.Put(ctx, res, body)
}

func (s boundSink) Delete(ctx context.Context, uri string) error { return s.io.Delete(ctx, uri) }

func newRun(opts Options) *run {
	var mode strategy = delivering{}
	if opts.DryRun {
		opts.Store, mode = dryStore{opts.Store}, previewing{}
	}
	opts.Counts.client.Store(opts.Client)
	r := &run{opts: opts, log: opts.Logger, counts: opts.Counts, mode: mode}
	r.reader = r.newReader()
	for i, s := range opts.Sinks {
		n := opts.Workers
		if l, ok := s.(sink.Limiter); ok && l.Concurrency() > 0 {
			n = l.Concurrency()
		}
		name := fmt.Sprintf("sink%d", i+1)
		if i < len(opts.SinkNames) && opts.SinkNames[i] != "" {
			name = opts.SinkNames[i]
		}
		retries := sink.RetryPolicy{Retries: max(opts.SinkRetries, 0), Backoff: opts.SinkBackoff, Notify: func(uri string, rt retry.Retry) {
			r.log.Debug("sink call failed; retrying", "sink", name, "uri", uri, "attempt", rt.Attempt-1, "in", rt.Wait, "error", rt.Err)
		}}
		r.sinks = append(r.sinks, boundSink{Sink: s, name: name, limit: n, io: sink.WithRetry(sink.WithLimit(s, n), retries)})
	}
	return r
}

// begin records the run in the state store.
func (r *run) begin(ctx context.Context, rep *runreport.Report) error {
	if r.opts.Part == nil {
		only := ""
		if r.opts.StoreShared {
			only = r.opts.Source
		}
		n, err := r.opts.Store.MarkInterrupted(ctx, rep.Started, only, r.opts.Fence)
		if err != nil {
			return err
		}
		if n > 0 {
			r.log.Warn("earlier runs did not finish (interrupted); this run picks up where they stopped", "runs", n)
		}
	}
	id, err := r.opts.Store.BeginRun(ctx, state.Run{Mode: rep.Mode, Source: r.opts.Source, Site: r.opts.Site, Started: rep.Started})
	if err != nil {
		return err
	}
	r.runID, rep.RunID = id, id
	rep.Protocol, rep.DryRun, rep.NoDigests = r.opts.Protocol.Name, r.opts.DryRun, r.opts.Protocol.NoDigests
	for _, s := range r.sinks {
		rep.Sinks = append(rep.Sinks, s.name)
	}
	held, err := r.opts.Store.CountResources(ctx, r.opts.SourceKey, false)
	if err != nil {
		return err
	}
	r.resync = held > 0 && (r.opts.Part == nil || !r.opts.Part.Fresh)
	r.reader.Resync = r.resync
	if !r.resync && r.opts.Part == nil {
		// (A part's run shares its source with the other parts running
		// at once: what the state holds is not only what it commits.)
		all, err := r.opts.Store.CountResources(ctx, r.opts.SourceKey, true)
		if err != nil {
			return err
		}
		if all == 0 {
			r.fresh = newFreshFilter()
		}
	}
	r.stopLive = r.live(ctx, *rep)
	if r.opts.Protocol.WholeListing && r.opts.Set == "" && r.opts.Part == nil && r.resync {
		r.listed = newFreshFilter()
	}
	return nil
}

// commitBatch commits b to the state, fenced by Options.Fence — and, for
// a part of a spread task, only while the task is open.
func (r *run) commitBatch(ctx context.Context, b state.Batch) error {
	b.Fence = r.opts.Fence
	if r.opts.Part != nil {
		b.Task = r.opts.Part.Task
	}
	return r.opts.Store.Commit(ctx, b)
}

// live writes the run's counts so far to its report in the state every
// Options.LiveEvery, from a goroutine of its own, until the returned
// function is called (which waits for it). head is the report as begun.
func (r *run) live(ctx context.Context, head runreport.Report) (stop func()) {
	if r.opts.LiveEvery < 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.opts.LiveEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rep := head
			r.rec.fill(&rep, r.counts)
			rep.Failures, rep.Skips = nil, nil // counts only
			rep.Planned, rep.PlanRead = r.counts.Planned.Load(), r.counts.PlanRead.Load()
			js, err := json.Marshal(rep)
			if err == nil {
				err = r.opts.Store.RunProgress(ctx, r.runID, js)
			}
			if err != nil && ctx.Err() == nil {
				r.log.Debug("the counts so far could not be recorded", "error", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// anySet stands for every resource set when a failure's set is unknown.
const anySet = unpack.AnySet

// noteHold records a temporary failure of resource set (anySet when
// unknown) at change time t: the next incremental run of the set must
// start no later than the earliest of them; with an unknown time (zero),
// the set's checkpoint does not advance at all. ep is the epoch of the
// unit that failed (nil: unknown), whose set's marks from then on are
// dropped (see progress).
func (r *run) noteHold(set string, t time.Time, ep *epoch) {
	r.marks.fail(ep, set)
	r.atMu.Lock()
	defer r.atMu.Unlock()
	if r.holds == nil {
		r.holds = map[string]time.Time{}
	}
	if t.IsZero() {
		t = time.Unix(0, 0).UTC() // before any range: no advance
	}
	if prev, ok := r.holds[set]; !ok || t.Before(prev) {
		r.holds[set] = t
	}
}

// setBroken records that the documents of resource set set could not be
// read (err): a failure of that set,
// which holds its checkpoint whatever err's class, since part of what the
// set publishes was never seen: at at, the earliest change time the part
// not seen can hold (zero: where the task started in the set).
func (r *run) setBroken(ctx context.Context, set string, err error, at time.Time, ep *epoch) {
	// The set stands where a package would: the packages of the other
	// sets delivered in full are still recorded (see recordPackages).
	f := runreport.Failure{URI: set, Package: set, Stage: "resource set", Error: err.Error(), Permanent: errclass.IsPermanent(err)}
	r.failIn(ctx, f, set, at, countsNone, ep)
	if f.Permanent {
		r.noteHold(set, at, ep)
	}
}

// holdOf returns the earliest hold of set (including those of unknown
// set), and whether there is one.
func (r *run) holdOf(set string) (time.Time, bool) {
	r.atMu.Lock()
	defer r.atMu.Unlock()
	h, ok := r.holds[set]
	if a, aok := r.holds[anySet]; aok && (!ok || a.Before(h)) {
		h, ok = a, true
	}
	return h, ok
}

// Baseline copies every resource of the source's snapshot, as the planner
// of its protocol plans a baseline task, into the sinks, verified. It returns the run's report; the error is non-nil only
// for a fatal condition that ended the run early (the report then has
// status "failed"). Failures of single packages or resources are recorded
// in the report and the state store, and the run goes on.
func Baseline(ctx context.Context, opts Options) (*runreport.Report, error) {
	opts, cleanup, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	r := newRun(opts)
	rep := &runreport.Report{Mode: "baseline", Source: opts.Source, Started: time.Now().UTC()}
	if err := r.begin(ctx, rep); err != nil {
		return nil, err
	}
	r.onFinish = func(ctx context.Context, rep *runreport.Report) error {
		if err := r.recordPackages(ctx); err != nil {
			return err
		}
		if r.opts.Part != nil {
			return r.partDone(ctx, rep)
		}
		return r.setBaselineCheckpoints(ctx, rep)
	}
	runErr := r.execute(ctx, r.task(source.Baseline, Range{}))
	return r.finish(ctx, rep, runErr)
}

// execute runs task: the planner's units flow through fetch → unpack →
// verify → deliver → commit, the same stages for every mode and every
// protocol.
func (r *run) execute(ctx context.Context, task source.Task) error {
	defer r.reader.Kept.Close()
	g, ctx := errgroup.WithContext(ctx)
	pkgs := make(chan source.Package, r.opts.Concurrency)
	entries := make(chan entryJob, 4*r.opts.Workers)
	listEntries := make(chan entryJob, r.listConcurrency())
	r.results = make(chan result, 256)

	// plan: the planner's packages into pkgs, its records (to GET, to
	// delete, or with their bodies) straight into listEntries.
	var producers sync.WaitGroup
	producers.Add(1)
	g.Go(func() error {
		defer producers.Done()
		defer close(pkgs)
		defer close(listEntries)
		return r.plan(ctx, task, pkgs, listEntries)
	})
	// fetch + unpack: packages in parallel, their entries into entries.
	// Twice as many packages as downloads are in flight, so that while
	// some are processed the next ones download (see unpack.Reader.Downloads).
	var pkgWG sync.WaitGroup
	for range r.packageWorkers() {
		pkgWG.Add(1)
		producers.Add(1)
		g.Go(func() error {
			defer producers.Done()
			defer pkgWG.Done()
			for {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case j, ok := <-pkgs:
					if !ok {
						return nil
					}
					if err := r.mode.readPackage(ctx, r, j, entries); err != nil {
						return err
					}
					r.book.noteDone(j.URL, r.book.fingerprintOf(j))
				}
			}
		})
	}
	g.Go(func() error {
		producers.Wait()
		close(entries)
		r.counts.PlanRead.Store(ctx.Err() == nil)
		return nil
	})
	// verify + deliver: entries in parallel, outcomes into results;
	// Resource List entries (a GET each) on a pool of their own.
	var workWG sync.WaitGroup
	r.startWorkers(ctx, g, &workWG, r.deliveryWorkers(), entries)
	r.startWorkers(ctx, g, &workWG, r.listConcurrency(), listEntries)
	g.Go(func() error {
		workWG.Wait()
		producers.Wait()
		close(r.results)
		return nil
	})
	// commit: one goroutine owns the state store's writes.
	g.Go(func() error { return r.commit(ctx) })
	return g.Wait()
}

// startWorkers starts n goroutines that verify and deliver the entries of
// in and send the outcomes to the commit stage.
func (r *run) startWorkers(ctx context.Context, g *errgroup.Group, wg *sync.WaitGroup, n int, in <-chan entryJob) {
	for range n {
		wg.Add(1)
		g.Go(func() error {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					// Release what is still queued, so the packages
					// waiting for their entries can finish.
					for j := range in {
						j.done()
					}
					return ctx.Err()
				case j, ok := <-in:
					if !ok {
						return nil
					}
					res := r.mode.handle(ctx, r, j)
					j.done()
					res.ep = j.ep
					if res.fatal != nil {
						return res.fatal
					}
					if err := r.send(ctx, res); err != nil {
						return err
					}
				}
			}
		})
	}
}

// deliveryWorkers is the number of goroutines verifying and delivering
// package entries: Workers (the CPUs, for inflating and hashing), or more
// when a sink takes more writes in flight (an object store or an index
// answers after a round trip, and the CPUs would idle meanwhile).
func (r *run) deliveryWorkers() int {
	n := r.opts.Workers
	for _, s := range r.sinks {
		n = max(n, s.limit)
	}
	return n
}

// packageWorkers is the number of packages in flight: Options.Concurrency
// downloading, as many again being unpacked and delivered.
func (r *run) packageWorkers() int { return 2 * r.opts.Concurrency }

// listConcurrency is the number of resource GETs in flight for lists.
func (r *run) listConcurrency() int {
	if r.opts.ListConcurrency > 0 {
		return r.opts.ListConcurrency
	}
	return 16
}

// plan plans task: packages into out, records straight into entries. The
// checkpoints the plan reaches are kept for the end of the run.
func (r *run) plan(ctx context.Context, task source.Task, out chan<- source.Package, entries chan<- entryJob) error {
	send := func(ctx context.Context, j entryJob) error {
		if r.listed != nil {
			r.listed.add(j.rec.URI)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case entries <- j:
			r.counts.Planned.Add(1)
			return nil
		}
	}
	var guard *deleteGuard
	if r.opts.MaxDelete.IsSet() {
		held, err := r.opts.Store.CountResources(ctx, r.opts.SourceKey, false)
		if err != nil {
			return err
		}
		guard = &deleteGuard{limit: r.opts.MaxDelete.of(held), held: held, spec: r.opts.MaxDelete, dry: r.opts.DryRun}
	}
	cps, err := r.planTask(ctx, task, func(ctx context.Context, u source.Unit) error {
		if u.Record != nil {
			rec := u.Record
			j := entryJob{pkg: &source.Package{URL: rec.Listed, Dump: rec.Listed, ResourceSet: rec.ResourceSet, List: true}, rec: rec, done: func() {}, ep: r.marks.enter()}
			if guard != nil && rec.Change == source.Deleted {
				would, err := r.wouldDelete(ctx, rec)
				if err != nil {
					return err
				}
				if would {
					return guard.hold(ctx, j, send)
				}
			}
			return send(ctx, j)
		}
		r.counts.notePackage(u.Package.Expect.Length)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case out <- *u.Package:
			return nil
		}
	})
	r.checkpoints = cps
	if err == nil && r.listed != nil {
		err = r.unlisted(ctx, guard, send)
	}
	if err != nil || guard == nil {
		return err
	}
	if guard.dry {
		// The whole plan is previewed; then the run says whether the real
		// one would have stopped (see finish).
		r.wouldStop = guard.check()
		return nil
	}
	if err := guard.check(); err != nil {
		return err
	}
	// The plan is read whole and its deletions are within the limit.
	for _, j := range guard.waiting {
		if err := send(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

// SourceError reports that the source's documents could not be read, so the
// run could not even find what to sync.
type SourceError = source.SourceError

// failIn records failure f of resource set set (anySet when unknown),
// met at change time changeTime, adding to the figure c says: through the
// commit stage, into the state store and the report. The checkpoint rule:
// a temporary failure holds the set's checkpoint at once, and so does the
// failure of a whole package whatever its class — a permanent failure is a
// property of one record, never of what holds several, whose records are
// asked for again by the next run. ep is the failure's epoch when the
// planner emitted it (see progress), or nil.
func (r *run) failIn(ctx context.Context, f runreport.Failure, set string, changeTime time.Time, c counted, ep *epoch, retry ...*source.Record) {
	r.log.Warn("failed", "uri", f.URI, "package", f.Package, "stage", f.Stage, "permanent", f.Permanent, "error", f.Error)
	if !f.Permanent || c == countsPackage {
		r.noteHold(set, changeTime, ep)
	}
	res := result{failure: &f, changeTime: changeTime, counts: c, ep: ep}
	if len(retry) > 0 && f.Permanent {
		res.retry = retry[0]
	}
	_ = r.send(ctx, res)
}

func (r *run) send(ctx context.Context, res result) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case r.results <- res:
		return nil
	}
}

// finish closes the run: status, state, report.
func (r *run) finish(ctx context.Context, rep *runreport.Report, runErr error) (*runreport.Report, error) {
	r.stopLive()
	if runErr == nil {
		runErr = r.wouldStop
	}
	rep.Finished = time.Now().UTC()
	r.rec.fill(rep, r.counts)
	st := r.opts.Client.Stats()
	rep.Fetch = runreport.FetchStats{Requests: st.Requests, Retries: st.Retries, Resumes: st.Resumes, Restarts: st.Restarts, Throttled: st.Throttled}
	if rep.Packages.Total == 0 || runErr != nil {
		// No package: what came is the lists, pages and resources. A run
		// interrupted or stopped says what it received, the packages it
		// was reading included.
		rep.Bytes.Downloaded = max(rep.Bytes.Downloaded, st.BytesDownloaded)
	}
	if rep.Mode == "baseline" {
		for _, cp := range r.checkpoints {
			if !cp.Next.IsZero() && (rep.At == nil || cp.Next.Before(*rep.At)) {
				at := cp.Next
				rep.At = &at
			}
		}
	}
	switch {
	case runErr != nil && (ctx.Err() != nil || errors.Is(runErr, context.Canceled)):
		rep.Status = runreport.StatusInterrupted
		rep.Error = "interrupted: " + runreport.Resume
	case runErr != nil:
		rep.Status = runreport.StatusFailed
		rep.Error = runErr.Error()
	case rep.Resources.Failed > 0 || rep.Packages.Failed > 0 || len(rep.Failures) > 0:
		rep.Status = runreport.StatusPartial
	default:
		rep.Status = runreport.StatusOK
	}
	// The state store must record the run even when ctx was cancelled.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if runErr == nil && r.onFinish != nil {
		if err := r.onFinish(cctx, rep); err != nil {
			runErr = err
			rep.Status, rep.Error = runreport.StatusFailed, err.Error()
		}
	}
	js, _ := json.Marshal(rep)
	if err := r.opts.Store.FinishRun(cctx, r.runID, rep.Finished, rep.Status, js); err != nil && runErr == nil {
		runErr = err
		rep.Status, rep.Error = runreport.StatusFailed, err.Error()
	}
	return rep, runErr
}

// setBaselineCheckpoints records, per resource set, the snapshot's time
// (a Resource Dump's "at") as the point incremental sync continues from — unless a temporary
// failure of that set (or of no known set), or the set's broken documents,
// mean part of its snapshot is still missing (seed 003).
func (r *run) setBaselineCheckpoints(ctx context.Context, rep *runreport.Report) error {
	now := time.Now().UTC()
	for _, c := range r.checkpoints {
		if c.Next.IsZero() {
			continue
		}
		if _, held := r.holdOf(c.ResourceSet); held {
			continue // part of this set's snapshot is still missing
		}
		cp := state.Checkpoint{Source: r.opts.SourceKey, ResourceSet: c.ResourceSet, Next: c.Next, Baseline: c.Next, RunID: r.runID, Updated: now,
			DescribedBy: c.DescribedBy}
		if err := r.commitBatch(ctx, state.Batch{Checkpoint: &cp}); err != nil {
			return err
		}
	}
	return nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
