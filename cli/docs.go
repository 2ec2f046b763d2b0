package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/status"
)

// manDate is the date the man pages carry: fixed, so that the pages made
// from the same code are the same bytes (a test compares them with those
// committed).
var manDate = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)

// docsCommand writes the reference made from the code, never by hand: a
// Markdown page per command and the settings reference (--markdown DIR),
// a man page per command (--man DIR).
func (a *app) docsCommand() *cobra.Command {
	var markdown, man string
	c := &cobra.Command{
		Use:   "docs",
		Short: "Write the reference made from the code: a Markdown page per command and the settings reference (--markdown DIR), a man page per command (--man DIR)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if markdown == "" && man == "" {
				return usagef("docs: give --markdown DIR, --man DIR or both")
			}
			return WriteReference(markdown, man)
		},
	}
	c.Flags().StringVar(&markdown, "markdown", "", "write a Markdown page per command, and settings.md (every key of config and sites files), into this directory")
	c.Flags().StringVar(&man, "man", "", "write a man page (section 1) per command into this directory")
	return c
}

// WriteReference writes the reference of the commands as a fresh process
// has them: into markdown ("": none) a page per command and settings.md,
// into man ("": none) a man page per command. What depends on the machine
// (the number of CPUs, the user's home) is written as the help says it,
// so that the same code writes the same bytes anywhere.
func WriteReference(markdown, man string) error {
	root := (&app{stdout: io.Discard, stderr: io.Discard}).rootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.DisableAutoGenTag = true
	if markdown != "" {
		if err := os.MkdirAll(markdown, 0o755); err != nil {
			return err
		}
		if err := doc.GenMarkdownTree(root, markdown); err != nil {
			return fmt.Errorf("docs: %w", err)
		}
		if err := os.WriteFile(filepath.Join(markdown, "settings.md"), []byte(settingsReference()), 0o644); err != nil {
			return err
		}
		metrics := "# Metrics\n\nThe series the daemon's `/metrics` gives (with `--listen` and the status page's credentials), beside\n" +
			"Go's and the process's. The series of the whole registry are always there; those of one site (`rsharvest_site_…`)\n" +
			"are there for every site of a registry of at most `--metrics-sites` sites (100), else for the sites marked\n" +
			"`metrics: true` (`sites add --metrics`), so that a scrape stays small and quick whatever the registry holds.\n" +
			"`contrib/prometheus/rsharvest-alerts.yml` has alerting rules on them.\n\n" + status.MetricsHelp()
		if err := os.WriteFile(filepath.Join(markdown, "metrics.md"), []byte(metrics), 0o644); err != nil {
			return err
		}
	}
	if man != "" {
		if err := os.MkdirAll(man, 0o755); err != nil {
			return err
		}
		header := &doc.GenManHeader{Title: "RSHARVEST", Section: "1", Source: "rsharvest", Manual: "rsharvest manual", Date: &manDate}
		if err := doc.GenManTree(root, header, man); err != nil {
			return fmt.Errorf("docs: %w", err)
		}
	}
	return nil
}

// settingsReference is docs/reference/settings.md: every setting of the
// settings table, where it may be given, its default and its meaning.
func settingsReference() string {
	var b strings.Builder
	j, p, a := harvest.DefaultJob(), processOpts{Progress: "auto"}, app{logLevel: "info", logFormat: "text"}
	b.WriteString("# Settings\n\n" +
		"Every setting rsharvest takes, made from the one table the flags, the config files (`--config FILE.yaml`)\n" +
		"and the sites (a sites file, `sites add` and `sites edit`) are made from. A key is the flag's name with\n" +
		"`_` for `-`. Flags given on the command line override a config file; `run`'s flags of how a harvest\n" +
		"goes are laid over each site's own settings for that run.\n\n" +
		"## In a config file\n\n")
	_ = settings().Reference(&b, config.InFile, &j, &p, &a)
	b.WriteString("\n## In a site\n\nA site also has `name`, `schedule`, `contact` and `notify`.\n\n")
	_ = harvest.Settings().Reference(&b, config.InSite, &j)
	b.WriteString("\n## Flags only\n\n")
	flagsOnly := slices.DeleteFunc(settings(), func(s config.Setting) bool { return s.Where&(config.InFile|config.InSite) != 0 })
	_ = flagsOnly.Reference(&b, config.AsFlag, &j, &p, &a)
	return b.String()
}
