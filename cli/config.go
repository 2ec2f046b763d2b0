package cli

import (
	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/config"
)

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
		given := func(s *config.Setting) bool { return c.Flags().Changed(s.Name) }
		if err := doc.Apply(settings(), given, &f.Job, &f.processOpts, a); err != nil {
			return usageError{err}
		}
	}
	return f.validate()
}
