package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/protocols"
	"github.com/rsharvest/rsharvest/state"
)

// syncFlags are the flags of every command that syncs: a harvest's job,
// and what belongs to the process (the state file, the report file, the
// progress display, the lock).
type syncFlags struct {
	harvest.Job
	state  string
	report string
	// waitLock is how long to wait for another run to release the state
	// file.
	waitLock time.Duration
	// command is the command's path ("rsharvest sync"), recorded as the
	// holder of the state file's lock.
	command  string
	progress string
	config   string
	// dryRun: tell what the run would do, change nothing (--dry-run).
	dryRun bool
	// store, when not nil, is a store the caller opened and owns, shared
	// by the runs of several sites at once (see runCommand); nil: the run
	// opens --state for itself.
	store *state.Store
}

func (f *syncFlags) register(c *cobra.Command) {
	d := harvest.DefaultJob()
	fl := c.Flags()
	fl.StringVar(&f.Source, "source", "", "source URL: a ResourceSync Source Description, Capability List, Resource Dump (Index) or site URL, or an OAI-PMH repository's base URL")
	fl.StringArrayVar(&f.Sinks, "sink", nil, "where resources go (repeatable): fs:DIR, s3://BUCKET/PREFIX?endpoint=HOST:PORT, es:http://HOST:PORT[/es]/INDEX, solr:http://HOST:PORT/solr/CORE")
	fl.StringVar(&f.state, "state", defaultStateFile(), stateHelp)
	fl.StringVar(&f.report, "report", "", "write the run's report as JSON to this file")
	fl.IntVar(&f.Concurrency, "concurrency", d.Concurrency, "packages downloaded and unpacked at once; with lists, resource requests in flight (default 16 then)")
	fl.IntVar(&f.Workers, "workers", d.Workers, "entries verified and delivered in parallel")
	fl.Float64Var(&f.Rate, "rate", d.Rate, "requests per second per host (0 = unlimited)")
	fl.StringVar(&f.BwLimit, "bwlimit", "", `cap the bytes per second received, all requests together: 10M (MiB/s), 500k, 2.5MB/s (default: no cap)`)
	fl.BoolVar(&f.Spread, "spread", false, "for a registry site whose state is kept in PostgreSQL: divide its harvest into units that any daemon sharing the registry executes, each a River job (OAI-PMH: its date windows and sets; a ResourceSync baseline: its packages and slices of 1,000 of its lists' resources); elsewhere, or for a protocol that does not divide, the harvest runs whole")
	fl.BoolVar(&f.DeleteUnlisted, "delete-unlisted", false, "remove what a harvest list no longer names (by default it stays held and is reported as no longer listed)")
	fl.BoolVar(&f.CheckDocuments, "validate", false, "check each document that says what it must be (a harvest list's documentType) before it is stored: well-formed XML whose root is in that namespace (or whose DOCTYPE names that public identifier, or served as that MIME type); one that is not is that document's permanent failure")
	fl.StringArrayVar(&f.Schemas, "schema", nil, "TYPE=FILE.xsd: also validate documents of TYPE against the schema, with xmllint (repeatable; implies --validate)")
	fl.StringVar(&f.MaxDelete, "max-delete", "", `stop a run that would delete more than this many resources (100), or this share of those held (5%), before it deletes any; exit 1 (default: no bound)`)
	fl.IntVar(&f.Retries, "retries", d.Retries, "retries of a failed request (timeouts, resets, 429, 5xx)")
	fl.StringArrayVar(&f.Headers, "header", nil, "extra HTTP header 'Name: value' for every request (repeatable)")
	fl.StringVar(&f.SpoolDir, "spool-dir", "", "directory for packages being unpacked (default: the system temp dir)")
	fl.DurationVar(&f.StallTimeout, "stall-timeout", d.StallTimeout, "fail (and resume) a download that receives no bytes for this long")
	fl.Int64Var(&f.LowSpeedLimit, "low-speed-limit", d.LowSpeedLimit, "bytes a second: a response slower than this for --low-speed-time fails, temporarily (0: no cutoff)")
	fl.DurationVar(&f.LowSpeedTime, "low-speed-time", d.LowSpeedTime, "how long a response may stay under --low-speed-limit")
	fl.StringArrayVar(&f.HeaderOrigins, "header-origin", nil, "an origin (https://host[:port]) besides the source's that the --header values are sent to (repeatable; by default they go to the source's origin only)")
	fl.IntVar(&f.MaxPages, "max-pages", 0, fmt.Sprintf("OAI-PMH: the most pages of one list or date window a run reads; a repository still sending resumption tokens then is stopped, the run partial, and the next run goes on from there (default %d)", oaipmh.DefaultMaxPages))
	fl.BoolVar(&f.RequireHash, "require-hash", false, "refuse resources that give no md5, sha-1, sha-256 or sha-512 (by default they are delivered after their length and CRC-32 checks, and counted as unverified)")
	fl.BoolVar(&f.AllowPrivateAddresses, "allow-private-addresses", false, "let the URLs a source lists (resources, mirrors, redirects) lead to loopback, link-local, private or cloud metadata addresses; by default only a source served from such an address may list addresses of its kind")
	fl.StringVar(&f.Verify, "verify", d.Verify, "which digests of those an entry lists are checked: strongest (sha-512, else sha-256, else sha-1, else md5; with the length and CRC-32) or all")
	fl.BoolVar(&f.AllowMissingHash, "allow-missing-hash", false, "no effect, kept for compatibility: resources without a hash are accepted by default (see --require-hash)")
	_ = fl.MarkDeprecated("allow-missing-hash", "resources without a hash are accepted by default; --require-hash refuses them")
	fl.StringArrayVar(&f.Sets, "set", nil, "sync only this resource set: its capability list's URL, file or directory name (default: every set); OAI-PMH: a setSpec, repeatable (each set its own resource set, harvested in parallel)")
	fl.StringVar(&f.Protocol, "protocol", d.Protocol, "the source's protocol: "+protocols.All().Help())
	fl.StringVar(&f.MetadataPrefix, "metadata-prefix", d.MetadataPrefix, "OAI-PMH: the metadata format harvested")
	fl.StringVar(&f.Prefer, "prefer", d.Prefer, "dump: Resource/Change Dumps, lists where no dump exists; list: Resource/Change Lists first")
	fl.IntVar(&f.RangeParts, "range-parts", d.RangeParts, "download each large package as N parallel Range requests (for links where one connection is slower than the link)")
	fl.Int64Var(&f.MaxDocumentSize, "max-document-size", d.MaxDocumentSize, "largest ResourceSync document read from the source, in bytes (-1: no cap)")
	fl.DurationVar(&f.waitLock, "wait-lock", 0, "when another run uses the state file, wait up to this long for it to end (default: fail at once)")
	fl.StringVar(&f.progress, "progress", "auto", "progress display: auto (bars on a terminal, log lines otherwise), bars, log, none")
	fl.StringVar(&f.config, "config", "", "YAML config file; flags given on the command line override it")
}

// registerRange adds --from and --until (incremental and sync).
func (f *syncFlags) registerRange(c *cobra.Command) {
	c.Flags().StringVar(&f.From, "from", "", "start of the range, inclusive: a W3C datetime, or a duration back from now (24h) (default: the checkpoint)")
	c.Flags().StringVar(&f.Until, "until", "", "end of the range, inclusive: a W3C datetime, or a duration back from now (default: now)")
}

func (f *syncFlags) validate() error {
	if err := f.Job.Validate(); err != nil {
		return usageError{err}
	}
	if f.waitLock < 0 {
		return usagef("--wait-lock must not be negative")
	}
	switch f.progress {
	case "auto", "bars", "log", "none":
	default:
		return usagef("--progress: want auto, bars, log or none")
	}
	return nil
}

// parseHeaders turns "Name: value" flags into a header set.
func parseHeaders(hs []string) (http.Header, error) {
	j := harvest.Job{Headers: hs}
	h, err := j.Header()
	if err != nil {
		return nil, usageError{err}
	}
	return h, nil
}

// Sync modes.
const (
	modeBaseline    = harvest.Baseline
	modeIncremental = harvest.Incremental
	modeSync        = harvest.Sync
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

func (a *app) syncCommand(mode harvest.Mode, short string) *cobra.Command {
	var f syncFlags
	c := &cobra.Command{
		Use:   string(mode),
		Short: short,
		Args:  noSourceArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := a.applyConfig(c, &f); err != nil {
				return err
			}
			f.ConcurrencySet = c.Flags().Changed("concurrency")
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
	c.Flags().BoolVar(&f.dryRun, "dry-run", false, "read the plan and print what the run would fetch, write and delete, changing nothing: no resource fetched (packages only where their index is needed), no sink written, the state only read")
	return c
}

// codeOf maps a finished run's report to an exit code.
func codeOf(rep *runreport.Report) int {
	if rep.Status == runreport.StatusOK {
		return ExitOK
	}
	return ExitPartial
}

// runSync opens the state store (unless the caller gave one) and runs a
// harvest of the mode with the progress display, then writes the report.
func (a *app) runSync(ctx context.Context, mode harvest.Mode, f syncFlags) (*runreport.Report, error) {
	log := a.logger()
	open := a.runStore
	if f.dryRun {
		open = a.dryRunStore
	}
	store, closeStore, err := open(ctx, f, log)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	counts := &pipeline.Counts{}
	shown := f.progress
	if a.quiet || (f.dryRun && shown == "auto") {
		shown = "none" // a dry run's lines go to standard output
	}
	stopProgress := a.display().Start(ctx, shown, counts, log)
	h := a.harvester(store, f.store != nil, log)
	h.Counts, h.Command, h.LeaseWait = counts, cmp.Or(f.command, "rsharvest"), f.waitLock
	if f.dryRun {
		f.DryRun, h.Preview = true, a.printPreview()
	}
	rep, runErr := h.Run(ctx, mode, f.Job)
	if errors.Is(runErr, state.ErrLocked) && f.waitLock == 0 {
		runErr = fmt.Errorf("%w; use --wait-lock DURATION to wait for it", runErr)
	}
	stopProgress()
	if rep != nil && f.report != "" {
		if err := rep.WriteFile(f.report); err != nil {
			return rep, errors.Join(runErr, err)
		}
	}
	return rep, runErr
}

// harvester is the harvest library on store, with the command's sinks,
// User-Agent and retry display.
func (a *app) harvester(store *state.Store, shared bool, log *slog.Logger) *harvest.Harvester {
	return &harvest.Harvester{Store: store, Shared: shared, Sinks: Sinks(), UserAgent: UserAgent(), Log: log, OnRetry: a.display().OnRetry(log)}
}

// pipelineOptions opens what a run needs from the flags — the state store
// (unless f gives one), the sinks and the HTTP client — and returns the
// pipeline's options with a function closing the sinks, and the store
// unless the caller gave it (f.store).
func (a *app) pipelineOptions(ctx context.Context, f syncFlags, log *slog.Logger) (pipeline.Options, func(context.Context) error, error) {
	store, closeStore, err := a.runStore(ctx, f, log)
	if err != nil {
		return pipeline.Options{}, nil, err
	}
	opts, closeSinks, err := a.harvester(store, f.store != nil, log).Options(ctx, f.Job)
	if err != nil {
		closeStore()
		return opts, nil, err
	}
	return opts, func(ctx context.Context) error {
		defer closeStore()
		return closeSinks(ctx)
	}, nil
}

// runStore is the store a run of f uses: the one the caller gave
// (f.store, which closing leaves open), else --state opened with its lock.
func (a *app) runStore(ctx context.Context, f syncFlags, log *slog.Logger) (*state.Store, func(), error) {
	if f.store != nil {
		return f.store, func() {}, nil
	}
	store, err := a.openState(ctx, f, log)
	if err != nil {
		return nil, nil, err
	}
	return store, func() { store.Close() }, nil
}

// dryRunStore is the store a dry run reads: --state when it exists (with
// its lock: no run changes it meanwhile), else an empty one in a
// temporary directory, removed after, so that a dry run never creates a
// state file.
func (a *app) dryRunStore(ctx context.Context, f syncFlags, log *slog.Logger) (*state.Store, func(), error) {
	if f.store != nil {
		return a.runStore(ctx, f, log)
	}
	if stateExists(f.state) {
		return a.runStore(ctx, f, log)
	}
	dir, err := os.MkdirTemp("", "rsharvest-dry-run-")
	if err != nil {
		return nil, nil, err
	}
	store, err := state.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return store, func() { store.Close(); os.RemoveAll(dir) }, nil
}

// printPreview prints each thing a dry run would do on a line of standard
// output: "fetch URL (12.3 MiB)", "write URI (2048 bytes)", "delete URI".
func (a *app) printPreview() func(pipeline.Preview) {
	var mu sync.Mutex
	return func(p pipeline.Preview) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.Action == pipeline.PreviewDelete:
			fmt.Fprintf(a.stdout, "would delete %s\n", p.URI)
		case p.Length < 0:
			fmt.Fprintf(a.stdout, "would %s %s\n", p.Action, p.URI)
		default:
			fmt.Fprintf(a.stdout, "would %s %s (%d bytes)\n", p.Action, p.URI, p.Length)
		}
	}
}

// openState opens the state store for one run, holding its lock until it
// is closed. It is called before the sinks are opened, so that a second
// run on the same state file stops before it touches anything of the
// first's. A state file in use fails at once, or after --wait-lock (said
// in the log when the wait begins), with a usage error (exit 2) naming the
// run holding it; a run interrupted while it waits is not a usage error.
func (a *app) openState(ctx context.Context, f syncFlags, log *slog.Logger) (*state.Store, error) {
	command := cmp.Or(f.command, "rsharvest")
	if err := prepareStateFile(f.state); err != nil {
		return nil, err
	}
	store, err := state.OpenExclusive(ctx, f.state, command, 0, a.stateOptions(f.state)...)
	if errors.Is(err, state.ErrLocked) && f.waitLock > 0 {
		log.Info("waiting for the state file", "why", err, "wait-lock", f.waitLock)
		store, err = state.OpenExclusive(ctx, f.state, command, f.waitLock, a.stateOptions(f.state)...)
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

// summary renders rep for standard output. When the run ended with err,
// the error line is left out: Main prints err on standard error, and the
// screen shows it once.
func summary(rep *runreport.Report, err error) string {
	if err == nil {
		return rep.Summary()
	}
	r := *rep
	r.Error = ""
	return r.Summary()
}
