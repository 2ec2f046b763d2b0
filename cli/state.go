package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/state"
)

// stateCommand returns the "state" command: what concerns the state store
// itself (check).
func (a *app) stateCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "state",
		Short: "Look after the state store itself: check that it is sound",
		Args:  cobra.NoArgs,
	}
	var file string
	check := &cobra.Command{
		Use:   "check",
		Short: "Check the state file with SQLite's integrity check (every page and index): prints ok, or what is wrong (exit 2); a state kept in PostgreSQL is its server's to check",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			var problems []string
			st, err := a.openStateToRead(ctx, file)
			switch {
			case errors.Is(err, state.ErrDamaged) && !state.IsPostgres(file):
				// Refused as damaged: the check of the plain file says
				// what is wrong.
				if problems, _ = state.CheckFile(ctx, file); len(problems) == 0 {
					return err
				}
			case err != nil:
				return err
			case state.IsPostgres(file):
				// SQLite's check has nothing to read there: say so,
				// rather than "ok" of what was not checked.
				st.Close()
				fmt.Fprintln(a.stdout, "not checked: the state is kept in PostgreSQL, whose server checks its own data (amcheck, pg_checksums); this command checks a state file")
				return nil
			default:
				defer st.Close()
				if problems, err = st.Check(ctx, false); err != nil {
					return err
				}
			}
			if err := state.Damaged(file, problems); err != nil {
				for _, p := range problems {
					fmt.Fprintln(a.stdout, p)
				}
				return err
			}
			fmt.Fprintln(a.stdout, "ok")
			return nil
		},
	}
	registerState(check.Flags(), &file)
	c.AddCommand(check)
	return c
}
