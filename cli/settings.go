package cli

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
)

// processOpts are the settings of a command that belong to the process,
// not to a harvest: the state store, the report file, the progress
// display and the wait for the state file's lock.
type processOpts struct {
	State    string
	Report   string
	Progress string
	WaitLock time.Duration
}

// settings is the table of every setting: a harvest's (harvest.Settings)
// and the process's own, bound to *processOpts and *app.
func settings() config.Table {
	return append(harvest.Settings(), processSettings()...)
}

// processSettings are the rows of the process's settings.
func processSettings() config.Table {
	flagAndFile := config.AsFlag | config.InFile
	opts := func(bind func(*processOpts) config.Value) func(any) config.Value {
		return func(t any) config.Value {
			if p, ok := t.(*processOpts); ok {
				return bind(p)
			}
			return nil
		}
	}
	ofApp := func(bind func(*app) config.Value) func(any) config.Value {
		return func(t any) config.Value {
			if a, ok := t.(*app); ok {
				return bind(a)
			}
			return nil
		}
	}
	return config.Table{
		{Name: "state", Where: flagAndFile | config.OfRun, Env: "RSHARVEST_STATE", Help: stateHelp, Shown: stateShown,
			Bind: opts(func(p *processOpts) config.Value { return config.StatePath(&p.State) })},
		{Name: "report", Where: flagAndFile, Help: "write the run's report as JSON to this file",
			Bind: opts(func(p *processOpts) config.Value { return config.Path(&p.Report) })},
		{Name: "progress", Where: flagAndFile | config.OfRun, Help: "progress display: auto (bars on a terminal, log lines otherwise), bars, log, none",
			Bind: opts(func(p *processOpts) config.Value { return config.OneOf(&p.Progress, "auto", "bars", "log", "none") })},
		{Name: "wait-lock", Where: flagAndFile | config.OfRun, Help: "when another run uses the state file, wait up to this long for it to end (default: fail at once)",
			Bind: opts(func(p *processOpts) config.Value { return config.Duration(&p.WaitLock) })},
		{Name: "log-level", Where: flagAndFile, Help: "log level: debug, info, warn, error",
			Bind: ofApp(func(a *app) config.Value { return config.OneOf(&a.logLevel, "debug", "info", "warn", "error") })},
		{Name: "log-format", Where: flagAndFile, Help: "log format: text or json",
			Bind: ofApp(func(a *app) config.Value { return config.OneOf(&a.logFormat, "text", "json") })},
		{Name: "verbose", Short: "v", Where: config.AsFlag, Help: "more detail: debug log records (as --log-level debug)", Sets: "log-level",
			Bind: ofApp(func(a *app) config.Value { return config.Is(&a.logLevel, "debug") })},
		{Name: "progress-bars", Short: "P", Where: config.AsFlag | config.OfRun, Help: "show progress bars (as --progress bars)", Sets: "progress",
			Bind: opts(func(p *processOpts) config.Value { return config.Is(&p.Progress, "bars") })},
		{Name: "quiet", Short: "q", Where: flagAndFile, Help: "only warnings and errors: no info log records, no progress display (the summary is still printed)",
			Bind: ofApp(func(a *app) config.Value { return config.Bool(&a.quiet) })},
	}
}

// registerSettings adds the flags of t's settings given where (see
// config.Table.Register), bound to targets; those kept for compatibility
// only are hidden.
func registerSettings(fl *pflag.FlagSet, t config.Table, where config.Where, targets ...any) {
	t.Register(fl, where, targets...)
	if fl.Lookup("allow-missing-hash") != nil {
		_ = fl.MarkDeprecated("allow-missing-hash", "resources without a hash are accepted by default; --require-hash refuses them")
	}
}

// registerState adds --state, bound to file, as the table declares it.
func registerState(fl *pflag.FlagSet, file *string) {
	s, _ := processSettings().Flag("state")
	fl.StringVar(file, s.Name, defaultStateFile(), s.Help)
	fl.Lookup(s.Name).DefValue = s.Shown
}
