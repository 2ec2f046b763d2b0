package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/resourcesync"
	"github.com/rsharvest/rsharvest/state"
)

// syncFlags are the flags of every command that syncs.
type syncFlags struct {
	source           string
	sinks            []string
	state            string
	report           string
	concurrency      int
	workers          int
	rate             float64
	retries          int
	headers          []string
	spoolDir         string
	stallTimeout     time.Duration
	allowMissingHash bool // accepted, no effect (hash-less resources are accepted by default)
	requireHash      bool
	allowPrivate     bool
	waitLock         time.Duration
	// command is the command's path ("rsharvest sync"), recorded as the
	// holder of the state file's lock.
	command         string
	progress        string
	from, until     string
	config          string
	prefer          string
	sets            []string
	protocol        string
	metadataPrefix  string
	rangeParts      int
	maxDocumentSize int64
	// site names the site harvested, in the log ("": none).
	site string
	// store, when not nil, is a store the caller opened and owns, shared
	// by the runs of several sites at once (see runCommand); nil: the run
	// opens --state for itself.
	store *state.Store
	// sourceKey names the source in the state store (default: source);
	// the demo sets it, its source's port changing from run to run.
	sourceKey string
	// everyday marks a run chosen by sync.
	everyday bool
	// concurrencySet tells an explicit --concurrency (which then also
	// bounds list GETs) from the default.
	concurrencySet bool
}

func (f *syncFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.source, "source", "", "source URL: a Source Description, Capability List, Resource Dump (Index), or a site URL")
	fl.StringArrayVar(&f.sinks, "sink", nil, "where resources go, e.g. fs:DIR (repeatable)")
	fl.StringVar(&f.state, "state", "rsharvest.db", "state store file (SQLite)")
	fl.StringVar(&f.report, "report", "", "write the run's report as JSON to this file")
	fl.IntVar(&f.concurrency, "concurrency", 4, "packages downloaded and unpacked at once; with lists, resource requests in flight (default 16 then)")
	fl.IntVar(&f.workers, "workers", runtime.NumCPU(), "entries verified and delivered in parallel")
	fl.Float64Var(&f.rate, "rate", 0, "requests per second per host (0 = unlimited)")
	fl.IntVar(&f.retries, "retries", 5, "retries of a failed request (timeouts, resets, 429, 5xx)")
	fl.StringArrayVar(&f.headers, "header", nil, "extra HTTP header 'Name: value' for every request (repeatable)")
	fl.StringVar(&f.spoolDir, "spool-dir", "", "directory for packages being unpacked (default: the system temp dir)")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", 30*time.Second, "fail (and resume) a download that receives no bytes for this long")
	fl.BoolVar(&f.requireHash, "require-hash", false, "refuse resources that give no md5, sha-1, sha-256 or sha-512 (by default they are delivered after their length and CRC-32 checks, and counted as unverified)")
	fl.BoolVar(&f.allowPrivate, "allow-private-addresses", false, "let the URLs a source lists (resources, mirrors, redirects) lead to loopback, link-local, private or cloud metadata addresses; by default only a source served from such an address may list addresses of its kind")
	fl.BoolVar(&f.allowMissingHash, "allow-missing-hash", false, "no effect, kept for compatibility: resources without a hash are accepted by default (see --require-hash)")
	_ = fl.MarkDeprecated("allow-missing-hash", "resources without a hash are accepted by default; --require-hash refuses them")
	fl.StringArrayVar(&f.sets, "set", nil, "sync only this resource set: its capability list's URL, file or directory name (default: every set); OAI-PMH: a setSpec, repeatable (each set its own resource set, harvested in parallel)")
	fl.StringVar(&f.protocol, "protocol", "auto", "the source's protocol: auto (an OAI-PMH repository answers Identify; anything else is ResourceSync), resourcesync, oai-pmh")
	fl.StringVar(&f.metadataPrefix, "metadata-prefix", oaipmh.DefaultMetadataPrefix, "OAI-PMH: the metadata format harvested")
	fl.StringVar(&f.prefer, "prefer", "dump", "dump: Resource/Change Dumps, lists where no dump exists; list: Resource/Change Lists first")
	fl.IntVar(&f.rangeParts, "range-parts", 1, "download each large package as N parallel Range requests (for links where one connection is slower than the link)")
	fl.Int64Var(&f.maxDocumentSize, "max-document-size", manifest.DefaultMaxDocumentSize, "largest ResourceSync document read from the source, in bytes (-1: no cap)")
	fl.DurationVar(&f.waitLock, "wait-lock", 0, "when another run uses the state file, wait up to this long for it to end (default: fail at once)")
	fl.StringVar(&f.progress, "progress", "auto", "progress display: auto (bars on a terminal, log lines otherwise), bars, log, none")
}

// registerRange adds --from and --until (incremental and sync).
func (f *syncFlags) registerRange(c *cobra.Command) {
	c.Flags().StringVar(&f.from, "from", "", "start of the range, W3C datetime, inclusive (default: the checkpoint)")
	c.Flags().StringVar(&f.until, "until", "", "end of the range, W3C datetime, inclusive (default: now)")
}

// rangeOf parses --from and --until.
func (f *syncFlags) rangeOf() (pipeline.Range, error) {
	var rng pipeline.Range
	var err error
	if f.from != "" {
		if rng.From, err = manifest.ParseDatetime(f.from); err != nil {
			return rng, usagef("--from: %v", err)
		}
	}
	if f.until != "" {
		if rng.Until, err = manifest.ParseDatetime(f.until); err != nil {
			return rng, usagef("--until: %v", err)
		}
	}
	if !rng.From.IsZero() && !rng.Until.IsZero() && rng.From.After(rng.Until) {
		return rng, usagef("--from %s is later than --until %s", f.from, f.until)
	}
	return rng, nil
}

func (f *syncFlags) validate() error {
	if f.source == "" {
		return usagef("--source is required")
	}
	if len(f.sinks) == 0 {
		return usagef("at least one --sink is required (e.g. --sink fs:./mirror)")
	}
	if f.concurrency < 1 || f.workers < 1 {
		return usagef("--concurrency and --workers must be at least 1")
	}
	if f.rangeParts < 1 {
		return usagef("--range-parts must be at least 1")
	}
	if f.waitLock < 0 {
		return usagef("--wait-lock must not be negative")
	}
	if f.maxDocumentSize == 0 || f.maxDocumentSize < -1 {
		return usagef("--max-document-size must be a number of bytes, or -1 for no cap")
	}
	if f.rate < 0 || f.retries < 0 {
		return usagef("--rate and --retries must not be negative")
	}
	if f.prefer != "dump" && f.prefer != "list" {
		return usagef("--prefer: want dump or list")
	}
	switch f.protocol {
	case "auto", "resourcesync", "oai-pmh":
	default:
		return usagef("--protocol: want auto, resourcesync or oai-pmh")
	}
	if f.metadataPrefix == "" {
		return usagef("--metadata-prefix must not be empty")
	}
	if slices.Contains(f.sets, "") {
		return usagef("--set must not be empty")
	}
	switch f.progress {
	case "auto", "bars", "log", "none":
	default:
		return usagef("--progress: want auto, bars, log or none")
	}
	if _, err := f.rangeOf(); err != nil {
		return err
	}
	_, err := parseHeaders(f.headers)
	return err
}

// parseHeaders turns "Name: value" flags into a header set.
func parseHeaders(hs []string) (http.Header, error) {
	h := http.Header{}
	for _, s := range hs {
		k, v, ok := strings.Cut(s, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n") || strings.ContainsAny(v, "\r\n") {
			return nil, usagef("--header %q: want 'Name: value'", redactHeader(s))
		}
		h.Add(k, strings.TrimSpace(v))
	}
	return h, nil
}

// redactHeader hides a header's value in messages: headers carry credentials.
func redactHeader(s string) string {
	k, _, ok := strings.Cut(s, ":")
	if !ok {
		return "…"
	}
	return k + ": …"
}

// Sync modes.
const (
	modeBaseline    = "baseline"
	modeIncremental = "incremental"
	modeSync        = "sync"
)

func (a *app) baselineCommand() *cobra.Command {
	return a.syncCommand(modeBaseline, "Copy every resource of a source from its Resource Dump(s) into sinks")
}

func (a *app) incrementalCommand() *cobra.Command {
	return a.syncCommand(modeIncremental, "Apply a source's changes in [--from, --until] from its Change Dump(s): latest change per resource, deletes included")
}

func (a *app) syncEverydayCommand() *cobra.Command {
	return a.syncCommand(modeSync, "The everyday command: a baseline when the state has no checkpoint for the source, else an incremental run from the checkpoint")
}

func (a *app) syncCommand(mode, short string) *cobra.Command {
	var f syncFlags
	c := &cobra.Command{
		Use:   mode,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := a.applyConfig(c, &f); err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			f.concurrencySet = c.Flags().Changed("concurrency")
			f.command = c.CommandPath()
			rep, err := a.runSync(c.Context(), mode, f)
			if rep != nil {
				fmt.Fprint(a.stdout, summary(rep, err))
			}
			if err != nil {
				return err
			}
			a.code = codeOf(rep)
			return nil
		},
	}
	f.register(c)
	if mode != modeBaseline {
		f.registerRange(c)
	}
	c.Flags().StringVar(&f.config, "config", "", "YAML config file; flags given on the command line override it")
	return c
}

// codeOf maps a finished run's report to an exit code.
func codeOf(rep *pipeline.Report) int {
	if rep.Status == pipeline.StatusOK {
		return ExitOK
	}
	return ExitPartial
}

// runSync wires the client, sinks and store and runs a sync of the mode.
func (a *app) runSync(ctx context.Context, mode string, f syncFlags) (*pipeline.Report, error) {
	log := a.logger()
	if f.site != "" {
		log = log.With("site", f.site)
	}
	opts, closeSinks, err := a.pipelineOptions(ctx, f, log)
	if err != nil {
		return nil, err
	}
	store := opts.Store
	if f.store == nil {
		defer store.Close()
	}
	counts := &pipeline.Counts{}
	opts.Counts = counts
	stopProgress := a.startProgress(ctx, f.progress, counts, log)
	rng, _ := f.rangeOf()
	if mode == modeSync {
		f.everyday = true
		has, err := store.HasCheckpoint(ctx, f.source)
		if err != nil {
			stopProgress()
			closeSinks(ctx)
			return nil, err
		}
		mode = modeBaseline
		if has || !rng.From.IsZero() {
			mode = modeIncremental
		}
		log.Info("sync", "mode", mode)
	}
	var rep *pipeline.Report
	var runErr error
	if mode == modeBaseline {
		rep, runErr = pipeline.Baseline(ctx, opts)
	} else {
		rep, runErr = pipeline.Incremental(ctx, opts, rng)
		if f.everyday && (errors.Is(runErr, resourcesync.ErrNoCapability) || errors.Is(runErr, pipeline.ErrNoCheckpoint)) {
			// No Change Dump or Change List, or a resource set never
			// loaded (new, or its dump gives no "at"): catching up means
			// comparing with the current snapshot again (unchanged
			// resources are skipped).
			log.Info("syncing from the snapshot", "why", runErr)
			rep, runErr = pipeline.Baseline(ctx, opts)
		}
	}
	stopProgress()
	if cerr := closeSinks(context.WithoutCancel(ctx)); cerr != nil && runErr == nil {
		runErr = fmt.Errorf("closing sinks: %w", cerr)
		if rep != nil {
			rep.Status, rep.Error = pipeline.StatusFailed, runErr.Error()
		}
	}
	if rep != nil && f.report != "" {
		if err := rep.WriteFile(f.report); err != nil {
			return rep, errors.Join(runErr, err)
		}
	}
	return rep, runErr
}

// pipelineOptions opens what every run needs from the flags — the sinks
// (each checked reachable), the state store and the HTTP client — and
// returns the pipeline's options with a function closing the sinks. The
// caller closes opts.Store (unless it gave it, f.store).
func (a *app) pipelineOptions(ctx context.Context, f syncFlags, log *slog.Logger) (pipeline.Options, func(context.Context) error, error) {
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return pipeline.Options{}, nil, err
	}
	store := f.store
	if store == nil {
		if store, err = openState(ctx, f, log); err != nil {
			return pipeline.Options{}, nil, err
		}
	}
	closeStore := func() {
		if f.store == nil {
			store.Close()
		}
	}
	sinks, closeSinks, err := openSinks(ctx, f.sinks)
	if err != nil {
		closeStore()
		return pipeline.Options{}, nil, usageError{err}
	}
	client := fetch.New(fetch.Options{
		UserAgent:    UserAgent(),
		Header:       headers,
		Rate:         f.rate,
		Retries:      fetchRetries(f.retries),
		StallTimeout: f.stallTimeout,
		Logger:       log,
		RangeParts:   f.rangeParts,
		OnRetry:      a.onRetry(log),
		// A server asking for more than fetch.DefaultMaxRetryAfter ends
		// the request: the run ends partial, its checkpoint held.
		EndOnLongRetryAfter: true,
		// What a source lists may not lead inward (server-side request
		// forgery), unless the source is served from there itself.
		Addresses: &fetch.AddressPolicy{Source: f.source, Allow: f.allowPrivate},
	})
	planner, err := chosenPlanner(ctx, f, client, log)
	if err == nil && planner == nil && len(f.sets) > 1 {
		err = usagef("--set: a ResourceSync source is synced one resource set at a time, or all of them (%d sets given)", len(f.sets))
	}
	if err != nil {
		closeStore()
		closeSinks(ctx)
		return pipeline.Options{}, nil, err
	}
	set := ""
	if planner == nil && len(f.sets) == 1 {
		set = f.sets[0]
	}
	return pipeline.Options{
		Planner:         planner,
		Source:          f.source,
		SourceKey:       f.sourceKey,
		Sinks:           sinks,
		SinkNames:       redactSpecs(f.sinks),
		Store:           store,
		StoreShared:     f.store != nil,
		Site:            f.site,
		Client:          client,
		Concurrency:     f.concurrency,
		Workers:         f.workers,
		ListConcurrency: listConcurrency(f),
		SpoolDir:        f.spoolDir,
		RequireHash:     f.requireHash,
		Prefer:          f.prefer,
		Set:             set,
		MaxDocumentSize: f.maxDocumentSize,
		Logger:          log,
	}, closeSinks, nil
}

// chosenPlanner returns the planner of the source's protocol: nil (the
// pipeline's ResourceSync planner) or the OAI-PMH planner, for
// --protocol oai-pmh or, with auto, a source that answers Identify.
func chosenPlanner(ctx context.Context, f syncFlags, client *fetch.Client, log *slog.Logger) (source.Planner, error) {
	p := &oaipmh.Planner{Client: client, MetadataPrefix: f.metadataPrefix, MaxDocumentSize: max(f.maxDocumentSize, 0), Log: log, Concurrency: f.concurrency, SetSpecs: f.sets}
	switch f.protocol {
	case "oai-pmh":
		return p, nil
	case "auto":
		if oaipmh.MayBeRepository(f.source) {
			if _, err := p.Identify(ctx, f.source); err == nil {
				log.Info("the source is an OAI-PMH repository", "source", f.source)
				return p, nil
			} else if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	return nil, nil
}

// openState opens the state store for one run, holding its lock until it
// is closed. It is called before the sinks are opened, so that a second
// run on the same state file stops before it touches anything of the
// first's. A state file in use fails at once, or after --wait-lock (said
// in the log when the wait begins), with a usage error (exit 2) naming the
// run holding it; a run interrupted while it waits is not a usage error.
func openState(ctx context.Context, f syncFlags, log *slog.Logger) (*state.Store, error) {
	command := cmp.Or(f.command, "rsharvest")
	store, err := state.OpenExclusive(ctx, f.state, command, 0)
	if errors.Is(err, state.ErrLocked) && f.waitLock > 0 {
		log.Info("waiting for the state file", "why", err, "wait-lock", f.waitLock)
		store, err = state.OpenExclusive(ctx, f.state, command, f.waitLock)
		if errors.Is(err, state.ErrLocked) {
			err = fmt.Errorf("%w; waited --wait-lock %s for it", err, f.waitLock)
		}
	} else if errors.Is(err, state.ErrLocked) {
		err = fmt.Errorf("%w; use --wait-lock DURATION to wait for it", err)
	}
	switch {
	case err == nil:
		return store, nil
	case ctx.Err() != nil:
		return nil, err
	default:
		return nil, usageError{err}
	}
}

// openSinks opens every sink spec; on failure it closes those already open.
func openSinks(ctx context.Context, specs []string) ([]sink.Sink, func(context.Context) error, error) {
	reg := Sinks()
	var out []sink.Sink
	closeAll := func(ctx context.Context) error {
		var errs []error
		for _, s := range out {
			errs = append(errs, s.Close(ctx))
		}
		return errors.Join(errs...)
	}
	for _, spec := range specs {
		s, err := reg.Open(ctx, spec)
		if err != nil {
			closeAll(ctx)
			return nil, nil, err
		}
		out = append(out, s)
	}
	return out, closeAll, nil
}

// redactSpecs returns sink specs without credentials (sink.Redact), to
// name sinks in the state store and in messages.
func redactSpecs(specs []string) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = sink.Redact(s)
	}
	return out
}

// listConcurrency is the number of resource GETs in flight for lists: an
// explicit --concurrency, else the pipeline's default.
func listConcurrency(f syncFlags) int {
	if f.concurrencySet {
		return f.concurrency
	}
	return 0
}

// fetchRetries maps --retries to fetch.Options.Retries, where 0 means "the
// default" and a negative value "none".
func fetchRetries(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
