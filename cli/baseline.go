package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/sink"
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
	allowMissingHash bool
	progress         string
}

func (f *syncFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.source, "source", "", "source URL: a Source Description, Capability List, Resource Dump (Index), or a site URL")
	fl.StringArrayVar(&f.sinks, "sink", nil, "where resources go, e.g. fs:DIR (repeatable)")
	fl.StringVar(&f.state, "state", "rsharvest.db", "state store file (SQLite)")
	fl.StringVar(&f.report, "report", "", "write the run's report as JSON to this file")
	fl.IntVar(&f.concurrency, "concurrency", 4, "packages downloaded and unpacked at once")
	fl.IntVar(&f.workers, "workers", runtime.NumCPU(), "entries verified and delivered in parallel")
	fl.Float64Var(&f.rate, "rate", 0, "requests per second per host (0 = unlimited)")
	fl.IntVar(&f.retries, "retries", 5, "retries of a failed request (timeouts, resets, 429, 5xx)")
	fl.StringArrayVar(&f.headers, "header", nil, "extra HTTP header 'Name: value' for every request (repeatable)")
	fl.StringVar(&f.spoolDir, "spool-dir", "", "directory for packages being unpacked (default: the system temp dir)")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", 30*time.Second, "fail (and resume) a download that receives no bytes for this long")
	fl.BoolVar(&f.allowMissingHash, "allow-missing-hash", false, "accept manifest entries without md5/sha-1/sha-256 (length and CRC-32 only)")
	fl.StringVar(&f.progress, "progress", "auto", "progress display: auto (bars on a terminal, log lines otherwise), bars, log, none")
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
	if f.rate < 0 || f.retries < 0 {
		return usagef("--rate and --retries must not be negative")
	}
	switch f.progress {
	case "auto", "bars", "log", "none":
	default:
		return usagef("--progress: want auto, bars, log or none")
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

func (a *app) baselineCommand() *cobra.Command {
	var f syncFlags
	c := &cobra.Command{
		Use:   "baseline",
		Short: "Copy every resource of a source from its Resource Dump(s) into sinks",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			rep, err := a.runBaseline(c.Context(), f)
			if rep != nil {
				fmt.Fprint(a.stdout, rep.Summary())
			}
			if err != nil {
				return err
			}
			a.code = codeOf(rep)
			return nil
		},
	}
	f.register(c)
	return c
}

// codeOf maps a finished run's report to an exit code.
func codeOf(rep *pipeline.Report) int {
	if rep.Status == pipeline.StatusOK {
		return ExitOK
	}
	return ExitPartial
}

// runBaseline wires the client, sinks and store and runs a baseline.
func (a *app) runBaseline(ctx context.Context, f syncFlags) (*pipeline.Report, error) {
	log := a.logger()
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return nil, err
	}
	sinks, closeSinks, err := openSinks(ctx, f.sinks)
	if err != nil {
		return nil, usageError{err}
	}
	store, err := state.Open(ctx, f.state)
	if err != nil {
		closeSinks(ctx)
		return nil, usageError{err}
	}
	defer store.Close()
	client := fetch.New(fetch.Options{
		UserAgent:    UserAgent(),
		Header:       headers,
		Rate:         f.rate,
		Retries:      f.retries,
		StallTimeout: f.stallTimeout,
		Logger:       log,
	})
	counts := &pipeline.Counts{}
	stopProgress := a.startProgress(ctx, f.progress, counts, log)
	rep, runErr := pipeline.Baseline(ctx, pipeline.Options{
		Source:           f.source,
		Sinks:            sinks,
		Store:            store,
		Client:           client,
		Concurrency:      f.concurrency,
		Workers:          f.workers,
		SpoolDir:         f.spoolDir,
		AllowMissingHash: f.allowMissingHash,
		Counts:           counts,
		Logger:           log,
	})
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
