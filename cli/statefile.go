package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// stateHelp is the help of every command's --state.
const stateHelp = "state store: a file (SQLite), or a PostgreSQL database several machines share (postgres://user@host/db; the password from $PGPASSWORD or ~/.pgpass): the registry and what the harvests hold"

// stateShown is the default of --state as the help says it (see
// defaultStateFile).
const stateShown = "$RSHARVEST_STATE, else $XDG_STATE_HOME/rsharvest/rsharvest.db, else ~/.local/state/rsharvest/rsharvest.db"

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

// stateExists reports whether the state store exists: a file that does
// and is not empty (an empty file is one a store is yet to be made in), or
// a PostgreSQL database (whose store Open makes when it is empty).
func stateExists(file string) bool {
	fi, err := os.Stat(file)
	return err == nil && (fi.Size() > 0 || !fi.Mode().IsRegular()) || state.IsPostgres(file)
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
// a missing file is a usage error, never created, and so is an empty one
// (which opening would make a state store).
func (a *app) openStateToRead(ctx context.Context, file string) (*state.Store, error) {
	if err := stateHeld(file); err != nil {
		return nil, err
	}
	return state.Open(ctx, file, a.stateOptions(file)...)
}

// stateHeld is a usage error when file, not a PostgreSQL URL, is missing
// or empty: nothing was harvested with it, and a command that reads what
// it holds must not create it.
func stateHeld(file string) error {
	if state.IsPostgres(file) {
		return nil
	}
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usagef("no state file at %s: nothing was harvested with it (give --state FILE, or set $RSHARVEST_STATE)", file)
	case err == nil && fi.Size() == 0 && fi.Mode().IsRegular():
		return usagef("the state file %s is empty: nothing was harvested with it (give --state FILE, or set $RSHARVEST_STATE)", file)
	}
	return nil
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

// runStore is the store a run of f uses: the one the caller gave
// (f.store, which closing leaves open), else --state opened with its lock.
func (a *app) runStore(ctx context.Context, f syncFlags, log *slog.Logger) (*state.Store, func(), error) {
	if f.store != nil {
		return f.store, func() {}, nil
	}
	store, err := a.openState(ctx, f, log)
	if err != nil {
		return nil, nil, err
	}
	return store, func() { store.Close() }, nil
}

// dryRunStore is the store a dry run reads: --state when it exists (with
// its lock: no run changes it meanwhile), else an empty one in a
// temporary directory, removed after, so that a dry run never creates a
// state file.
func (a *app) dryRunStore(ctx context.Context, f syncFlags, log *slog.Logger) (*state.Store, func(), error) {
	if f.store != nil {
		return a.runStore(ctx, f, log)
	}
	if stateExists(f.State) {
		return a.runStore(ctx, f, log)
	}
	dir, err := os.MkdirTemp("", "rsharvest-dry-run-")
	if err != nil {
		return nil, nil, err
	}
	store, err := state.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return store, func() { store.Close(); os.RemoveAll(dir) }, nil
}

// openState opens the state store for one run, holding its lock until it
// is closed. It is called before the sinks are opened, so that a second
// run on the same state file stops before it touches anything of the
// first's. A state file in use fails at once, or after --wait-lock (said
// in the log when the wait begins), with a usage error (exit 2) naming the
// run holding it; a run interrupted while it waits is not a usage error.
func (a *app) openState(ctx context.Context, f syncFlags, log *slog.Logger) (*state.Store, error) {
	command := cmp.Or(f.command, "rsharvest")
	if err := prepareStateFile(f.State); err != nil {
		return nil, err
	}
	store, err := state.OpenExclusive(ctx, f.State, command, 0, a.stateOptions(f.State)...)
	if errors.Is(err, state.ErrLocked) && f.WaitLock > 0 {
		log.Info("waiting for the state file", "why", err, "wait-lock", f.WaitLock)
		store, err = state.OpenExclusive(ctx, f.State, command, f.WaitLock, a.stateOptions(f.State)...)
		if errors.Is(err, state.ErrLocked) {
			err = fmt.Errorf("%w; waited --wait-lock %s for it", err, f.WaitLock)
		}
	} else if errors.Is(err, state.ErrLocked) {
		err = fmt.Errorf("%w; use --wait-lock DURATION to wait for it", err)
	}
	switch {
	case err == nil:
		return store, nil
	case ctx.Err() != nil:
		return nil, err
	default:
		return nil, usageError{err}
	}
}
