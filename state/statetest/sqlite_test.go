package statetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/state/statetest"
)

// TestSQLite runs the suite over the SQLite store. Its child processes
// run it too (see statetest.Run).
func TestSQLite(t *testing.T) {
	statetest.Run(t, statetest.Harness[*state.Snapshot]{
		Open: func(ctx context.Context, path string) (statetest.Store[*state.Snapshot], error) {
			return state.Open(ctx, path)
		},
		Ahead: ahead,
	})
}

// ahead moves the newest change stamp of the state file at path d later,
// writing the file with SQL: the store offers no other way to set its
// clock back.
func ahead(ctx context.Context, path string, d time.Duration) error {
	return aheadIn(ctx, "sqlite", path, "UPDATE changes SET recorded = recorded + ? WHERE recorded = (SELECT max(recorded) FROM changes)", d)
}

// aheadIn runs update, which moves the newest change stamp d later, on
// the database dsn of driver, and checks that it moved one row.
func aheadIn(ctx context.Context, driver, dsn, update string, d time.Duration) (err error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	res, err := db.ExecContext(ctx, update, d.Microseconds())
	if err != nil {
		return fmt.Errorf("move the newest stamp ahead: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("move the newest stamp ahead: %d rows (%v), want 1", n, err)
	}
	return nil
}
