package cli

import (
	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/config"
)

// applyConfig loads --config, if given, and copies its values onto every
// flag that was not set on the command line (flags override the file),
// then checks the flags.
func (a *app) applyConfig(c *cobra.Command, f *syncFlags) error {
	f.command = c.CommandPath()
	if f.config != "" {
		file, err := config.Load(f.config)
		if err != nil {
			return usageError{err}
		}
		file.Apply(a.targets(f), c.Flags().Changed)
	}
	return f.validate()
}

// targets are where a config file's values go: f's flags and the app's
// log settings.
func (a *app) targets(f *syncFlags) config.Targets {
	t := f.Job.Targets()
	t.State, t.Report, t.Progress, t.WaitLock, t.LogLevel, t.LogFormat, t.Quiet = &f.state, &f.report, &f.progress, &f.waitLock, &a.logLevel, &a.logFormat, &a.quiet
	return t
}
