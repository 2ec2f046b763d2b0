package cli

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
	"github.com/spf13/cobra"
)

// stateHelp is the help of every command's --state.
const stateHelp = "state store: a file (SQLite), or a PostgreSQL database several machines share (postgres://user@host/db; the password from $PGPASSWORD or ~/.pgpass): the registry and what the harvests hold (default: $RSHARVEST_STATE, else $XDG_STATE_HOME/rsharvest/rsharvest.db, else ~/.local/state/rsharvest/rsharvest.db)"

// defaultStateFile is where the state lives when --state is not given:
// $RSHARVEST_STATE, else the user's state directory
// ($XDG_STATE_HOME/rsharvest, else ~/.local/state/rsharvest), so that cron,
// a shell in any directory and the daemon all find the same state.
func defaultStateFile() string {
	if f := os.Getenv("RSHARVEST_STATE"); f != "" {
		return f
	}
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "rsharvest.db"
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "rsharvest", "rsharvest.db")
}

// prepareStateFile makes the directory of a state file that is about to
// be created, when the file is the default one (a directory named on the
// command line must exist: a typo there is the user's to see).
func prepareStateFile(file string) error {
	if stateExists(file) || file != defaultStateFile() {
		return nil
	}
	return os.MkdirAll(filepath.Dir(file), 0o700)
}

// stateExists reports whether the state store exists: a file that does,
// or a PostgreSQL database (whose store Open makes when it is empty).
func stateExists(file string) bool {
	_, err := os.Stat(file)
	return err == nil || state.IsPostgres(file)
}

// siteState opens the state file of a registry command: to read only (a
// missing file a usage error) or to write (created where it is missing).
// A file that is not a state store is a usage error (exitCode).
func (a *app) siteState(ctx context.Context, file string, write bool) (*state.Store, error) {
	if !write {
		return a.openStateToRead(ctx, file)
	}
	if err := prepareStateFile(file); err != nil {
		return nil, err
	}
	return state.Open(ctx, file, a.stateOptions(file)...)
}

// stateOptions are the options the state file is opened with: one other
// users may read is opened with --allow-readable-state alone, and then
// with a warning.
func (a *app) stateOptions(file string) []state.Option {
	if !a.allowReadable {
		return nil
	}
	if state.Readable(file) {
		a.logger().Warn("the state file is readable by other users, and it holds the registry's credentials: make it private (chmod 600)", "state", file)
	}
	return []state.Option{state.AllowReadable()}
}

// openStateToRead opens the state file of a command that only reads it:
// a missing file is a usage error, never created.
func (a *app) openStateToRead(ctx context.Context, file string) (*state.Store, error) {
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) && !state.IsPostgres(file) {
		return nil, usagef("no state file at %s: nothing was harvested with it (give --state FILE, or set $RSHARVEST_STATE)", file)
	}
	return state.Open(ctx, file, a.stateOptions(file)...)
}

// siteJob is the job of registry site name in st; an unknown name is a
// usage error (noSite).
func siteJob(ctx context.Context, st *state.Store, name string) (harvest.Job, error) {
	s, err := site.Registry{Store: st}.Site(ctx, name)
	if err != nil {
		return harvest.Job{}, noSite(err)
	}
	j, err := harvest.SiteJob(s)
	if err != nil {
		return j, usageError{err}
	}
	return j, nil
}

// completeSites completes the name of a registry site of the state file
// *file (as --state gives it when the completion runs): shell completion
// of site names.
func (a *app) completeSites(file *string) cobra.CompletionFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		st, err := a.openStateToRead(c.Context(), *file)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer st.Close()
		sites, err := st.Sites(c.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, s := range sites {
			if strings.HasPrefix(s.Name, toComplete) && !slices.Contains(args, s.Name) {
				out = append(out, s.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
