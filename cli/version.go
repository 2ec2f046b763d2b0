package cli

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// versionCommand prints what the binary is: its version and commit, and
// whether it is the fast build or the portable one.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit, and whether this binary is the fast build (libdeflate) or the portable one (pure Go)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b := BuildOf()
			commit := "unknown (not built from a repository)"
			if b.Commit != "" {
				commit = strings.TrimSpace(b.Commit + " " + b.Time)
			}
			fmt.Fprintf(a.stdout, "rsharvest %s\ncommit:   %s\nbuild:    %s\ngo:       %s %s\n", b.Version, commit, b.Kind, b.Go, b.Platform)
			return nil
		},
	}
}

// logBuild says, once at the start of a command that harvests, what the
// binary is (see versionCommand).
func logBuild(log *slog.Logger) {
	b := BuildOf()
	log.Info("rsharvest", "version", b.Version, "commit", cmp.Or(b.Commit, "unknown"), "build", b.Kind)
}
