package harvest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinks"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/protocols"
	"github.com/rsharvest/rsharvest/state"
)

// Harvester runs jobs on one state store.
type Harvester struct {
	// Store is the state store; the caller opened it (with its lock) and
	// closes it.
	Store *state.Store
	// Shared says several harvests use Store at once (see
	// pipeline.Options.StoreShared); a store kept in PostgreSQL always is.
	Shared bool
	// Command names the harvester in the leases it holds ("rsharvest
	// sync"), for a harvest that finds one held.
	Command string
	// LeaseWait is how long a harvest waits for the lease of its site or
	// source when another harvest holds it (0: it fails at once with a
	// *state.LeasedError).
	LeaseWait time.Duration
	// Sinks opens the sinks a job names (nil: SinkKinds).
	Sinks sink.Registry
	// UserAgent is sent with every request ("": fetch's default).
	UserAgent string
	// Log takes the harvest's log records (nil: discarded).
	Log *slog.Logger
	// OnRetry, when set, is told of every request about to be retried
	// (a progress display); otherwise each retry is logged.
	OnRetry func(fetch.Retry)
	// Counts, when set, is updated as the run goes (a progress display).
	Counts *pipeline.Counts
	// Preview, when set, is told what a dry run (Job.DryRun) would do; it
	// may be called from several goroutines at once.
	Preview func(pipeline.Preview)
	// Protocols are the protocols a job may name (nil: protocols.All).
	Protocols source.Registry
	// Units, when set and ready (a daemon sharing its jobs in PostgreSQL
	// runs with it), queues the units of the harvests of the sites that
	// ask to be spread (Job.Spread): see Unit.
	Units *daemon.Units
	// UnitPoll is how often a spread harvest looks whether its units are
	// done (0: DefaultUnitPoll).
	UnitPoll time.Duration
	// Over, when set, changes every registry site's job after the site's
	// settings (Site): a command's flags laid over them for one harvest
	// (run --bwlimit 1M; see Over).
	Over func(*Job) error
	// DryRun makes every harvest of a registry site a dry run (Job.DryRun)
	// that changes nothing: neither the registry (its last and next
	// harvest), nor the harvest log, nor a report is written or sent.
	DryRun bool
	// KeepLog is how much of the harvest log a harvest of registry sites
	// keeps (see PruneLog; zero: everything).
	KeepLog state.LogKeep
}

// Over returns a Harvester.Over that lays over a site's job the settings
// of the harvest of registry sites (config.OfRun) that given reports given
// (the flags given), at their values in flags.
func Over(flags Job, given func(*config.Setting) bool) func(*Job) error {
	ofRun := func(s *config.Setting) bool { return s.Where&config.OfRun != 0 && given(s) }
	return func(j *Job) error { return Settings().Lay(&flags, j, ofRun) }
}

// Run harvests j in mode m and returns the run's report (nil when the run
// could not begin). An *InvalidError is a setting of j that is wrong.
// Mode Sync runs a baseline when the state has no checkpoint for the
// job's source (its SourceKey), an incremental run otherwise, and a
// baseline after all when the source offers no changes or a resource set
// was never loaded.
//
// The run holds the lease of its source (state.SourceLease) throughout: a
// harvest of the same source elsewhere — in this process, or on another
// machine sharing the store — makes it wait LeaseWait, then fail with an
// error wrapping state.ErrLocked.
//
// What the job's sinks hold is the job's (see StateKey): into sinks that
// share none with those that hold the source's resources, its first
// harvest is a baseline; a sink added to the holders is filled after the
// harvest from the copies they keep (Index).
func (h *Harvester) Run(ctx context.Context, m Mode, j Job) (*runreport.Report, error) {
	return h.harvest(ctx, m, j, h.LeaseWait)
}

// harvest is Run, waiting up to wait for the source's lease: the run
// under the key of what j's sinks hold, then the holders recorded and the
// sinks added filled.
func (h *Harvester) harvest(ctx context.Context, m Mode, j Job, wait time.Duration) (*runreport.Report, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	j.prepare()
	j, added, fence, release, err := h.leaseSource(ctx, j, wait)
	if err != nil {
		return nil, err
	}
	defer release()
	rep, err := h.run(ctx, m, j, fence)
	if err == nil {
		h.recordHolders(ctx, j, added, rep, func(targets []string) (IndexReport, error) { return h.index(ctx, j, targets) })
	}
	return rep, err
}

// leaseSource takes the lease of j's source (waiting up to wait), then,
// under it, finds the key of what j's sinks hold (StateKey) and takes
// that key's lease too: a harvest of another site of the same source,
// begun meanwhile, finds the holders this one records before it lets the
// source go, and so its own key (its first harvest a baseline, never an
// incremental run from this one's checkpoint). Every entry point takes
// the source's lease first, then the key's, so that two never wait for
// each other. It returns j with its SourceKey, the sinks to fill (see
// StateKey), the fence of what is committed (the source's lease) and what
// releases both.
func (h *Harvester) leaseSource(ctx context.Context, j Job, wait time.Duration) (Job, []string, *state.Lease, func(), error) {
	fence, release, err := h.lease(ctx, wait, state.SourceLease(j.Source))
	if err != nil {
		return j, nil, nil, nil, err
	}
	key, added, err := StateKey(ctx, h.Store, j)
	if err != nil {
		release()
		return j, nil, nil, nil, err
	}
	j.SourceKey = key
	if k := state.SourceLease(key); k != state.SourceLease(j.Source) {
		_, releaseKey, err := h.lease(ctx, wait, k)
		if err != nil {
			release()
			return j, nil, nil, nil, err
		}
		releaseSource := release
		release = func() { releaseKey(); releaseSource() }
	}
	return j, added, fence, release, nil
}

// siteSourceWait is how long a site's harvest waits for its source's
// lease, held by the harvest of another site of the same source: until
// that one ends (its context bounds it).
const siteSourceWait = 7 * 24 * time.Hour

// run is Run, under the leases harvest took (fence: the source's).
func (h *Harvester) run(ctx context.Context, m Mode, j Job, fence *state.Lease) (*runreport.Report, error) {
	log := h.log()
	if j.Site != "" {
		log = log.With("site", j.Site)
	}
	opts, closeSinks, err := h.options(ctx, j, log)
	if err != nil {
		return nil, err
	}
	opts.Fence = fence // what the run commits, only while the source is still its
	rng, _ := j.Range()
	everyday := m == Sync
	if everyday {
		has, err := h.Store.HasCheckpoint(ctx, j.Key())
		if err != nil {
			closeSinks(ctx)
			return nil, err
		}
		m = Baseline
		if has || !rng.From.IsZero() {
			m = Incremental
		}
		log.Info("sync", "mode", m)
	}
	if h.spreads(j) {
		rep, handled, err := h.spread(ctx, m, j, opts, rng, log)
		if handled {
			if cerr := closeSinks(context.WithoutCancel(ctx)); cerr != nil && err == nil {
				err = fmt.Errorf("closing sinks: %w", cerr)
			}
			return rep, err
		}
	}
	if !j.DryRun {
		if err := h.abandonTask(ctx, j, log); err != nil {
			closeSinks(ctx)
			return nil, err
		}
	}
	var rep *runreport.Report
	var runErr error
	if m == Baseline {
		rep, runErr = pipeline.Baseline(ctx, opts)
	} else {
		rep, runErr = pipeline.Incremental(ctx, opts, rng)
		if everyday && (errors.Is(runErr, source.ErrNotOffered) || errors.Is(runErr, pipeline.ErrNoCheckpoint)) {
			// No Change Dump or Change List, or a resource set never
			// loaded (new, or its dump gives no "at"): catching up means
			// comparing with the current snapshot again (unchanged
			// resources are skipped).
			log.Info("syncing from the snapshot", "why", runErr)
			rep, runErr = pipeline.Baseline(ctx, opts)
		}
	}
	if cerr := closeSinks(context.WithoutCancel(ctx)); cerr != nil && runErr == nil {
		runErr = fmt.Errorf("closing sinks: %w", cerr)
		if rep != nil {
			rep.Status, rep.Error = runreport.StatusFailed, runErr.Error()
		}
	}
	return rep, runErr
}

// machineLocal refuses, for a registry site whose state is kept in
// PostgreSQL — harvested by whichever machine's daemon or cron takes it —
// a sink whose copies only this machine would read (sink.Local: fs,
// unless its directory is declared shared, fs:DIR?shared=1).
func (h *Harvester) machineLocal(j Job, sinks []sink.Sink) error {
	if j.Site == "" || h.Store.PostgresURL() == "" {
		return nil
	}
	for i, s := range sinks {
		if l, ok := s.(sink.Local); ok && l.Local() {
			return &InvalidError{fmt.Errorf("site %s: sink %s: the registry is in PostgreSQL and any machine may harvest the site, but this directory is one machine's: "+
				"declare it on storage every machine mounts (fs:DIR?shared=1), or use an s3, es or solr sink", j.Site, RedactSpecs(j.Sinks[i : i+1])[0])}
		}
	}
	return nil
}

// lease takes the leases keys (one once, if named twice) for one harvest,
// waiting up to wait for each, and returns the first (the fence of what
// the harvest commits) and what releases them all.
func (h *Harvester) lease(ctx context.Context, wait time.Duration, keys ...string) (first *state.Lease, release func(), err error) {
	var held []*state.Lease
	release = func() {
		for _, l := range held {
			if err := l.Release(); err != nil {
				h.log().Warn("a lease could not be released; it ends with the connection", "error", err)
			}
		}
	}
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			continue
		}
		l, err := h.Store.Lease(ctx, k, cmp.Or(h.Command, "rsharvest"), wait)
		if err != nil {
			release()
			return nil, nil, err
		}
		held = append(held, l)
	}
	return held[0], release, nil
}

// Audit compares what the sinks of j hold with its source
// (pipeline.Audit); with repair it also fetches what is missing or
// mismatched and removes what the source no longer lists. It holds the
// source's lease as Run does.
func (h *Harvester) Audit(ctx context.Context, j Job, repair bool) (*pipeline.AuditReport, error) {
	j.prepare()
	j, _, fence, release, err := h.leaseSource(ctx, j, h.LeaseWait)
	if err != nil {
		return nil, err
	}
	defer release()
	opts, closeSinks, err := h.Options(ctx, j)
	if err != nil {
		return nil, err
	}
	opts.Fence = fence
	defer closeSinks(context.WithoutCancel(ctx))
	if repair {
		if err := h.repairable(ctx, j, opts.SourceKey); err != nil {
			return nil, err
		}
	}
	ar, err := pipeline.Audit(ctx, opts, repair)
	if err != nil {
		return ar, fmt.Errorf("audit: %w", err)
	}
	return ar, nil
}

// repairable refuses a repair of j whose state records nothing of the
// source under key (the key of j's source in j's sinks): every resource
// the sinks hold would look extra, and every change since the snapshot
// would be rolled back — the sinks named otherwise than the source was
// harvested into them ("fs:DIR/" for "fs:DIR"), or another state file.
func (h *Harvester) repairable(ctx context.Context, j Job, key string) error {
	n, err := h.Store.CountResources(ctx, key, true)
	if err != nil || n > 0 {
		return err
	}
	hint, src := "", state.SourceKey(j.Source)
	if held, err := h.Store.Holders(ctx, src); err != nil {
		return err
	} else if len(held) > 0 {
		hint = " (this state holds it in " + strings.Join(held, ", ") + ")"
	}
	return &InvalidError{fmt.Errorf("audit --repair: this state records nothing of %s held in %s%s: a repair would take all they hold for extra; "+
		"name the sinks as the source was harvested into them, with its state file, or harvest it first", src, strings.Join(RedactSpecs(j.Sinks), ", "), hint)}
}

// Site harvests registry site s as Run in mode Sync does, with the site's
// settings over the defaults; spoolDir, when not empty, is where its
// packages are unpacked. It holds the site's lease (state.SiteLease) as
// Run holds its source's: a site harvested elsewhere fails at once (InUse),
// while a source another site's harvest holds is waited for.
//
// A sink added to the site since its last harvest is then filled with
// what the site held before, from the copies its other sinks keep (Index),
// not from the source; what it still lacks is logged (see Run).
func (h *Harvester) Site(ctx context.Context, s *site.Site, spoolDir string) (*runreport.Report, error) {
	_, release, err := h.lease(ctx, 0, state.SiteLease(s.Name))
	if err != nil {
		return nil, err
	}
	defer release()
	return h.site(ctx, s, spoolDir)
}

// site is Site with the site's lease held by the caller.
func (h *Harvester) site(ctx context.Context, s *site.Site, spoolDir string) (*runreport.Report, error) {
	j, err := SiteJob(s)
	if err == nil && h.Over != nil {
		err = h.Over(&j)
	}
	if err != nil {
		return nil, &InvalidError{fmt.Errorf("site %s: %w", s.Name, err)}
	}
	if spoolDir != "" {
		j.SpoolDir = spoolDir
	}
	j.DryRun = j.DryRun || h.DryRun
	rep, err := h.harvest(ctx, Sync, j, siteSourceWait)
	if IsInvalid(err) {
		err = &InvalidError{fmt.Errorf("site %s: %w", s.Name, err)}
	}
	return rep, err
}

// SiteJob is the job of registry site s: its settings over the defaults
// (an error when the registry holds a setting this version does not take).
func SiteJob(s *site.Site) (Job, error) {
	j := DefaultJob()
	err := Settings().DecodeMapping(config.NewContext("site "+s.Name), s.Settings, config.InSite, nil, nil, &j)
	j.Site = s.Name
	return j, err
}

// Options opens what a run of j needs — the sinks (each checked
// reachable) and the HTTP client, with the planner of the source's
// protocol — and returns the pipeline's options with a function closing
// the sinks. The bench builds its runs with it, as a harvest's.
func (h *Harvester) Options(ctx context.Context, j Job) (pipeline.Options, func(context.Context) error, error) {
	if err := j.Validate(); err != nil {
		return pipeline.Options{}, nil, err
	}
	j.prepare()
	return h.options(ctx, j, h.log())
}

func (h *Harvester) options(ctx context.Context, j Job, log *slog.Logger) (pipeline.Options, func(context.Context) error, error) {
	headers, err := j.headerValues()
	if err != nil {
		return pipeline.Options{}, nil, err
	}
	if j.auth != "" && headers.Get("Authorization") == "" {
		headers.Set("Authorization", j.auth)
	}
	sinks, closeSinks, err := OpenSinks(ctx, h.Sinks, j.Sinks)
	if err != nil {
		return pipeline.Options{}, nil, &InvalidError{err}
	}
	if err := h.machineLocal(j, sinks); err != nil {
		closeSinks(ctx)
		return pipeline.Options{}, nil, err
	}
	schemas, _ := j.schemas() // checked by Validate
	client := fetch.New(fetch.Options{
		UserAgent:    h.UserAgent,
		Header:       headers,
		Rate:         j.Rate,
		Bandwidth:    float64(j.BwLimit),
		Retries:      FetchRetries(j.Retries),
		StallTimeout: j.StallTimeout,
		Logger:       log,
		RangeParts:   j.RangeParts,
		// Headers (credentials) go to the source's origin alone, and to
		// those the operator names.
		HeaderOrigins: append([]string{j.Source}, j.HeaderOrigins...),
		LowSpeedLimit: lowSpeed(j.LowSpeedLimit),
		LowSpeedTime:  j.LowSpeedTime,
		OnRetry:       h.OnRetry,
		// A server asking for more than fetch.DefaultMaxRetryAfter ends
		// the request: the run ends partial, its checkpoint held.
		EndOnLongRetryAfter: true,
		// What a source lists may not lead the harvester inward
		// (server-side request forgery), unless the source is served
		// from there itself.
		Addresses: &fetch.AddressPolicy{Source: j.Source, Allow: j.AllowPrivateAddresses},
	})
	proto, err := h.protocol(ctx, j, client, log)
	if err != nil {
		closeSinks(ctx)
		return pipeline.Options{}, nil, err
	}
	set := ""
	if len(j.Sets) == 1 {
		set = j.Sets[0]
	}
	listConcurrency := 0 // the pipeline's default
	if j.ConcurrencySet {
		listConcurrency = j.Concurrency
	}
	return pipeline.Options{
		Protocol:        proto,
		Settings:        j.settings(),
		Source:          j.Source,
		SourceKey:       j.SourceKey,
		Sinks:           sinks,
		SinkNames:       RedactSpecs(j.Sinks),
		Store:           h.Store,
		StoreShared:     h.Shared || h.Store.PostgresURL() != "",
		Site:            j.Site,
		Client:          client,
		Concurrency:     j.Concurrency,
		Workers:         j.Workers,
		ListConcurrency: listConcurrency,
		SpoolDir:        j.SpoolDir,
		RequireHash:     j.RequireHash,
		VerifyAll:       j.Verify == "all",
		MaxDelete:       j.MaxDelete,
		DryRun:          j.DryRun,
		DeleteUnlisted:  j.DeleteUnlisted,
		Validate:        !j.NoValidate || len(schemas) > 0,
		Schemas:         schemas,
		Preview:         h.Preview,
		Set:             set,
		MaxDocumentSize: j.MaxDocumentSize,
		MaxPackageSize:  max(j.MaxPackageSize, 0),
		Logger:          log,
		Counts:          h.Counts,
	}, closeSinks, nil
}

// protocol returns the protocol of the job's source, from the
// Harvester's registry: the one it names, or with auto the one the source
// answers the probe of. Its settings are checked (an *InvalidError).
func (h *Harvester) protocol(ctx context.Context, j Job, client *fetch.Client, log *slog.Logger) (source.Protocol, error) {
	reg := h.Protocols
	if reg == nil {
		reg = protocols.All()
	}
	p, err := reg.Choose(ctx, j.Protocol, client, j.Source)
	if errors.Is(err, source.ErrUnknownProtocol) {
		return source.Protocol{}, invalidf("--protocol: %v", err)
	} else if err != nil {
		return source.Protocol{}, err
	}
	if j.Protocol == "auto" {
		log.Info("the source's protocol", "source", j.Source, "protocol", p.Name)
	}
	if _, err := p.New(j.settings(), source.Services{}); err != nil {
		return source.Protocol{}, &InvalidError{err}
	}
	return p, nil
}

func (h *Harvester) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

// SinkKinds is the registry of every kind of sink (package sink/sinks):
// what a Harvester opens sinks with when its Sinks is nil.
func SinkKinds() sink.Registry { return sinks.All() }

// OpenSinks opens every sink spec with reg (nil: SinkKinds), its ${NAME}
// references resolved from the environment; on failure it closes those
// already open.
func OpenSinks(ctx context.Context, reg sink.Registry, specs []string) ([]sink.Sink, func(context.Context) error, error) {
	if reg == nil {
		reg = SinkKinds()
	}
	var out []sink.Sink
	closeAll := func(ctx context.Context) error {
		var errs []error
		for _, s := range out {
			errs = append(errs, s.Close(ctx))
		}
		return errors.Join(errs...)
	}
	for _, spec := range specs {
		spec, err := expandEnv("sink "+sink.Redact(spec), spec)
		if err != nil {
			closeAll(ctx)
			return nil, nil, err
		}
		s, err := reg.Open(ctx, spec)
		if err != nil {
			closeAll(ctx)
			return nil, nil, err
		}
		out = append(out, s)
	}
	return out, closeAll, nil
}

// RedactSpecs returns sink specs without credentials (sink.Redact), to
// name sinks in the state store and in messages.
func RedactSpecs(specs []string) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = sink.Redact(s)
	}
	return out
}

// lowSpeed is the fetch client's low-speed limit of a job's: 0, no
// cutoff, is a negative limit there.
func lowSpeed(limit int64) int64 {
	if limit == 0 {
		return -1
	}
	return limit
}

// FetchRetries maps a job's Retries to fetch.Options.Retries, where 0
// means "the default" and a negative value "none".
func FetchRetries(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
