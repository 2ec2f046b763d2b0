// Package cli is rsharvest's command line: it maps flags and config files
// into jobs and settings, calls the libraries that do the work (harvest,
// progress, harvestlog, publish/publisher, status, daemon, bench/harness),
// prints what they return and maps outcomes to exit codes. It holds no
// logic of its own beyond that mapping.
//
// Exit codes:
//
//	0  every resource synced
//	1  the run finished, but some packages or resources failed (see the report)
//	2  usage or configuration error (bad flag, unknown sink, unwritable state)
//	3  the source could not be read (no document found to sync from)
//	4  a fatal error stopped the run (state store or sink failing, disk full)
//	130 interrupted (SIGINT/SIGTERM); run again to continue
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/progress"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/unzip"
)

// Exit codes of the rsharvest command.
const (
	ExitOK          = 0
	ExitPartial     = 1
	ExitUsage       = 2
	ExitSource      = 3
	ExitFatal       = 4
	ExitInterrupted = 130
)

// stampedVersion and stampedCommit are what the release build stamps in
// (scripts/release.sh: -ldflags -X …/cli.stampedVersion=v1.2.3); set at
// link time, never changed.
var stampedVersion, stampedCommit string

// Version returns the version of the running binary: the release build's
// stamp, else its module version, else "dev" (a build from a work tree).
func Version() string {
	if stampedVersion != "" {
		return stampedVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Build describes the running binary: its commit (from the build's
// version control information: the revision, "-dirty" when the tree had
// changes; "" when it was not built from a repository), the commit's time,
// and whether it is the fast build (libdeflate linked in) or the portable
// one (pure Go).
type Build struct {
	Version, Commit, Time, Kind, Go, Platform string
}

// BuildOf returns the running binary's Build.
func BuildOf() Build {
	b := Build{Version: Version(), Kind: "portable (pure Go: klauspost/compress inflates)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if unzip.Inflater() == "libdeflate" {
		b.Kind = "fast (libdeflate inflates small entries)"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && b.Commit != "" {
			b.Commit += "-dirty"
		}
	}
	if stampedCommit != "" {
		b.Commit = stampedCommit
	}
	return b
}

// UserAgent is the User-Agent header rsharvest sends.
func UserAgent() string { return "rsharvest/" + Version() }

// usageError marks errors in how the command was called.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// Main runs the command line args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := &app{stdout: stdout, stderr: stderr}
	root := app.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return app.code
	}
	code := exitCode(ctx, err)
	if code == ExitInterrupted {
		fmt.Fprintln(stderr, "rsharvest: interrupted:", runreport.Resume)
		return code
	}
	fmt.Fprintln(stderr, "rsharvest:", err)
	return code
}

// exitCode maps an error to the documented exit codes.
func exitCode(ctx context.Context, err error) int {
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case strings.HasPrefix(err.Error(), "unknown command"), strings.HasPrefix(err.Error(), "unknown flag"),
		strings.Contains(err.Error(), "flag needs an argument"), strings.Contains(err.Error(), "invalid argument"),
		strings.Contains(err.Error(), "required flag"):
		return ExitUsage
	}
	switch harvest.ClassOf(ctx, err) {
	case harvest.Invalid:
		return ExitUsage
	case harvest.Interrupted:
		return ExitInterrupted
	case harvest.Unreadable:
		return ExitSource
	case harvest.Stopped:
		return ExitPartial // stopped by --max-delete: nothing deleted
	}
	return ExitFatal
}

// app carries what every command shares.
type app struct {
	stdout, stderr io.Writer
	logLevel       string
	// quiet: only warnings and errors are logged, and no progress shown.
	quiet      bool
	logFormat  string
	cpuProfile string
	// allowReadable opens a state file other users may read
	// (--allow-readable-state), with a warning.
	allowReadable bool
	code          int
	// shown is the progress display on stderr, which the log shares (see
	// display).
	shown *progress.Display
	// outMu serialises what the harvests of several sites print.
	outMu sync.Mutex
}

// display returns the progress display on the app's standard error, the
// stream the log writes to.
func (a *app) display() *progress.Display {
	if a.shown == nil {
		a.shown = progress.New(a.stderr)
	}
	return a.shown
}

// printableAttr makes a log record's string or error value that holds a
// C1 control (which JSON leaves as it is) printable as the summary does
// (runreport.Printable); other values are left as they are.
func printableAttr(_ []string, a slog.Attr) slog.Attr {
	var s string
	switch a.Value.Kind() {
	case slog.KindString:
		s = a.Value.String()
	case slog.KindAny:
		err, ok := a.Value.Any().(error)
		if !ok {
			return a
		}
		s = err.Error()
	default:
		return a
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r >= 0x80 && r <= 0x9f }) {
		a.Value = slog.StringValue(runreport.Printable(s))
	}
	return a
}

func (a *app) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.logLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	if a.quiet {
		lvl = max(lvl, slog.LevelWarn)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if a.logFormat == "json" {
		// JSON escapes C0 controls only: what a source names (a URI, an
		// error quoting one) may hold C1 controls, which would reach a
		// terminal raw. The text handler quotes them itself.
		opts.ReplaceAttr = printableAttr
		return slog.New(slog.NewJSONHandler(a.display().Writer(), opts))
	}
	return slog.New(slog.NewTextHandler(a.display().Writer(), opts))
}

// noSourceArgs refuses arguments, as cobra.NoArgs, and says how to give a
// URL as the source: the usual slip is "rsharvest sync http://…".
func noSourceArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if strings.Contains(args[0], "://") {
		cmd := c.Name()
		if !c.HasParent() {
			cmd = "sync"
		}
		return usagef("%s takes no arguments: give the source with --source, as in: rsharvest %s --source %s --sink fs:DIR", c.CommandPath(), cmd, args[0])
	}
	if !c.HasParent() {
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			return usagef("unknown command %q: did you mean %s?", args[0], strings.Join(s, " or "))
		}
		return usagef("unknown command %q (see rsharvest --help)", args[0])
	}
	return usagef("%s takes no arguments, got %q", c.CommandPath(), args[0])
}

// flagError is the error of a flag c does not take or cannot parse: an
// unknown one names the flag of c's it was likely meant to be.
func flagError(c *cobra.Command, err error) error {
	name, unknown := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !unknown {
		return usageError{err}
	}
	var names, longer []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			names = append(names, f.Name)
			if strings.HasPrefix(f.Name, name) {
				longer = append(longer, f.Name)
			}
		}
	})
	s := config.Suggest(name, names)
	if s == "" && len(longer) == 1 { // the start of one flag's name
		s = longer[0]
	}
	if s != "" {
		return usagef("%v: did you mean --%s?", err, s)
	}
	return usagef("%v (see %s --help)", err, c.CommandPath())
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "rsharvest",
		Short: "A fast, verifying ResourceSync Destination",
		Long: "rsharvest keeps copies of sources' resources in sync: ResourceSync Sources (in bulk from their Resource and\n" +
			"Change Dumps, else their Resource and Change Lists) and OAI-PMH repositories (ListRecords), into sinks (a filesystem\n" +
			"mirror, S3, Elasticsearch-style indexes, Solr), verifying every byte against the published digests, and skips what\n" +
			"it already holds. Sites on a schedule: \"rsharvest sites\", \"rsharvest run --due\" from cron, or \"rsharvest daemon\".",
		Version:       Version() + " (inflater " + unzip.Inflater() + ")",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noSourceArgs,
		RunE:          func(c *cobra.Command, _ []string) error { return c.Help() },
		// A misspelt command is suggested (noSourceArgs).
		SuggestionsMinimumDistance: 2,
	}
	a.logLevel, a.logFormat = "info", "text"
	settings().Register(root.PersistentFlags(), config.AsFlag, a)
	root.PersistentFlags().StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the command to this file")
	root.PersistentFlags().BoolVar(&a.allowReadable, "allow-readable-state", false, "open a state file that other users may read (it holds the registry's credentials: by default such a file is refused)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if a.cpuProfile == "" {
			return nil
		}
		f, err := os.Create(a.cpuProfile)
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			return usagef("--cpuprofile: %v", err)
		}
		root.PersistentPostRun = func(*cobra.Command, []string) { pprof.StopCPUProfile(); f.Close() }
		return nil
	}
	root.SetFlagErrorFunc(flagError)
	root.Flags().Bool("version", false, "print the version") // no -v: that is --verbose
	root.AddCommand(a.baselineCommand(), a.incrementalCommand(), a.syncEverydayCommand(), a.auditCommand(), a.indexCommand(), a.lsCommand(), a.catCommand(), a.discoverCommand(), a.oaiCommand(), a.sitesCommand(), a.runCommand(), a.daemonCommand(), a.logCommand(), a.publishCommand(), a.stateCommand(), a.benchCommand(), a.genCommand(), a.serveCommand(), a.demoCommand(), a.docsCommand(), a.versionCommand())
	refuseUnknownSubcommands(root)
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usagef("no help on %q: not a command (see rsharvest --help)", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	})
	return root
}

// refuseUnknownSubcommands makes every group of commands below c (sites,
// state, oai, …) refuse an argument that is none of its commands, as the
// root does, with a usage error: cobra would print the group's help and
// succeed, and a misspelt command in a crontab would never fail.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		if sub.HasSubCommands() && sub.Run == nil && sub.RunE == nil {
			sub.Args = func(g *cobra.Command, args []string) error {
				if len(args) == 0 {
					return nil
				}
				if s := g.SuggestionsFor(args[0]); len(s) > 0 {
					return usagef("unknown command %q for %s: did you mean %s?", args[0], g.CommandPath(), strings.Join(s, " or "))
				}
				return usagef("unknown command %q for %s (see %s --help)", args[0], g.CommandPath(), g.CommandPath())
			}
			sub.RunE = func(g *cobra.Command, _ []string) error { return g.Help() }
		}
		refuseUnknownSubcommands(sub)
	}
}
