package cli

import (
	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/config"
)

// applyConfig loads --config, if given, and copies its values onto every
// flag that was not set on the command line: flags override the file.
func (a *app) applyConfig(c *cobra.Command, f *syncFlags) error {
	if f.config == "" {
		return nil
	}
	file, err := config.Load(f.config)
	if err != nil {
		return usageError{err}
	}
	file.Apply(a.targets(f), c.Flags().Changed)
	return nil
}

// targets are where a config file's values go: f's flags and the app's
// log settings.
func (a *app) targets(f *syncFlags) config.Targets {
	return config.Targets{
		Source: &f.source, State: &f.state, Report: &f.report, SpoolDir: &f.spoolDir, Progress: &f.progress, LogLevel: &a.logLevel, LogFormat: &a.logFormat,
		From: &f.from, Until: &f.until, Sinks: &f.sinks, Headers: &f.headers,
		Concurrency: &f.concurrency, Workers: &f.workers, Retries: &f.retries, RangeParts: &f.rangeParts, MaxDocumentSize: &f.maxDocumentSize, Rate: &f.rate,
		StallTimeout: &f.stallTimeout, WaitLock: &f.waitLock, AllowMissingHash: &f.allowMissingHash, RequireHash: &f.requireHash, AllowPrivate: &f.allowPrivate, Prefer: &f.prefer, Sets: &f.sets,
		Protocol: &f.protocol, MetadataPrefix: &f.metadataPrefix,
	}
}
