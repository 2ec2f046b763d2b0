package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// syncFlags are the flags of every command that syncs: a harvest's job,
// and what belongs to the process (the state file, the report file, the
// progress display, the lock).
type syncFlags struct {
	harvest.Job
	processOpts
	// command is the command's path ("rsharvest sync"), recorded as the
	// holder of the state file's lock.
	command string
	config  string
	// dryRun: tell what the run would do, change nothing (--dry-run).
	dryRun bool
	// store, when not nil, is a store the caller opened and owns, shared
	// by the runs of several sites at once (see runCommand); nil: the run
	// opens --state for itself.
	store *state.Store
}

// register adds the flags of every setting of the table a command that
// syncs takes (but those named in without), bound to f's job and process
// settings at their defaults, and --config.
func (f *syncFlags) register(c *cobra.Command, without ...string) {
	f.Job = harvest.DefaultJob()
	f.processOpts = processOpts{State: defaultStateFile(), Progress: "auto"}
	fl := c.Flags()
	registerSettings(fl, settings().Without(without...), config.AsFlag, &f.Job, &f.processOpts)
	fl.StringVar(&f.config, "config", "", "YAML config file; flags given on the command line override it")
}

func (f *syncFlags) validate() error {
	if err := f.Job.Validate(); err != nil {
		return usageError{err}
	}
	return nil
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
	if mode == modeBaseline {
		f.register(c, "from", "until")
	} else {
		f.register(c)
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
	if f.store == nil { // a command's own run, not one of several sites'
		logBuild(log)
	}
	if f.Report != "" {
		if err := writableFile(f.Report); err != nil {
			return nil, usagef("--report: %v", err)
		}
	}
	open := a.runStore
	if f.dryRun {
		open = a.dryRunStore
	}
	store, closeStore, err := open(ctx, f, log)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	counts := &harvest.Counts{}
	shown := f.Progress
	if a.quiet || (f.dryRun && shown == "auto") {
		shown = "none" // a dry run's lines go to standard output
	}
	stopProgress := a.display().Start(ctx, shown, counts, log)
	h := a.harvester(store, f.store != nil, log)
	h.Counts, h.Command, h.LeaseWait = counts, cmp.Or(f.command, "rsharvest"), f.WaitLock
	if f.dryRun {
		f.DryRun, h.Preview = true, a.printPreview()
	}
	rep, runErr := h.Run(ctx, mode, f.Job)
	if errors.Is(runErr, state.ErrLocked) && f.WaitLock == 0 {
		runErr = fmt.Errorf("%w; use --wait-lock DURATION to wait for it", runErr)
	}
	stopProgress()
	if rep != nil && f.Report != "" {
		if err := rep.WriteFile(f.Report); err != nil {
			return rep, errors.Join(runErr, err)
		}
	}
	return rep, runErr
}

// harvester is the harvest library on store, with the command's sinks,
// User-Agent and retry display.
func (a *app) harvester(store *state.Store, shared bool, log *slog.Logger) *harvest.Harvester {
	return &harvest.Harvester{Store: store, Shared: shared, Sinks: harvest.SinkKinds(), UserAgent: UserAgent(), Log: log, OnRetry: a.display().OnRetry(log)}
}

// pipelineOptions opens what a run needs from the flags — the state store
// (unless f gives one), the sinks and the HTTP client — and returns the
// pipeline's options with a function closing the sinks, and the store
// unless the caller gave it (f.store).
func (a *app) pipelineOptions(ctx context.Context, f syncFlags, log *slog.Logger) (harvest.RunOptions, func(context.Context) error, error) {
	store, closeStore, err := a.runStore(ctx, f, log)
	if err != nil {
		return harvest.RunOptions{}, nil, err
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

// printPreview prints each thing a dry run would do on a line of standard
// output: "fetch URL (12.3 MiB)", "write URI (2048 bytes)", "delete URI".
func (a *app) printPreview() func(harvest.Preview) {
	var mu sync.Mutex
	return func(p harvest.Preview) {
		mu.Lock()
		defer mu.Unlock()
		if p.Site != "" {
			fmt.Fprintf(a.stdout, "site %s: ", p.Site)
		}
		uri := runreport.Printable(p.URI) // a source's name: escaped
		switch {
		case p.Action == harvest.PreviewDelete:
			fmt.Fprintf(a.stdout, "would delete %s\n", uri)
		case p.Length < 0:
			fmt.Fprintf(a.stdout, "would %s %s\n", p.Action, uri)
		default:
			fmt.Fprintf(a.stdout, "would %s %s (%d bytes)\n", p.Action, uri, p.Length)
		}
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

// applyConfig loads --config, if given, and sets from it every setting
// whose flag was not given on the command line (flags override the
// file), then checks the flags.
func (a *app) applyConfig(c *cobra.Command, f *syncFlags) error {
	f.command = c.CommandPath()
	if f.config != "" {
		doc, err := config.Load(f.config)
		if err != nil {
			return usageError{err}
		}
		t := settings()
		if err := doc.Apply(t, t.Given(c.Flags().Changed), &f.Job, &f.processOpts, a); err != nil {
			return usageError{err}
		}
	}
	return f.validate()
}

// writableFile checks, before a run, that a file can be written at path
// (its directory exists and takes a new file; path is no directory), so
// that a report is not found unwritable only after the harvest.
func writableFile(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".rsharvest-check-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
