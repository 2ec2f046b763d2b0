package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/sqlitefile"
)

// JobDB opens a pool on the store's file for a job engine that keeps its
// own tables there (River's SQLite driver, which the daemon uses): one
// connection, as that driver asks, the same busy timeout as the store's
// writer, and transactions that take the write lock when they begin, so
// that the engine's writes and the store's wait for each other instead of
// failing. The caller closes it before the store. A store kept in
// PostgreSQL has no such pool: its engine connects to PostgresURL.
func (s *Store) JobDB() (*sql.DB, error) {
	if s.pgConfig != nil {
		return nil, fatal("job db", errors.New("the store is kept in PostgreSQL: a job engine connects to its URL"))
	}
	abs, err := filepath.Abs(s.path)
	if err != nil {
		return nil, fatal("job db", err)
	}
	db, err := sqlitefile.Open(abs, url.Values{
		"_pragma": {"busy_timeout(10000)", "synchronous(NORMAL)"},
		"_txlock": {"immediate"},
	}, 1)
	if err != nil {
		return nil, fatal("job db", err)
	}
	return db, nil
}

// ErrSchemaInUse is wrapped by HoldJobSchema's error when another daemon
// holds the schema.
var ErrSchemaInUse = errors.New("job schema in use by another daemon")

// HoldJobSchema makes schema in pool's PostgreSQL database when it is
// absent and holds it with a session advisory lock on a connection of its
// own until release is called (or the process dies, which ends the
// session): one daemon per schema; another gets ErrSchemaInUse. With
// shared (daemons sharing one registry's jobs), it waits for the lock
// instead: the caller holds it only while it brings the tables up to date.
func HoldJobSchema(ctx context.Context, pool *pgxpool.Pool, schema string, shared bool) (release func(), err error) {
	if !schemaName.MatchString(schema) || len(schema) > 40 {
		return nil, errclass.Fatalf("daemon: --jobs-schema %q: letters, digits and underscores, at most 40, not starting with a digit", schema)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, errclass.NewRetryable(fmt.Errorf("daemon: --jobs-db: %w", err))
	}
	lock := "SELECT pg_try_advisory_lock(hashtext($1))"
	if shared {
		lock = "SELECT true FROM (SELECT pg_advisory_lock(hashtext($1))) AS held" // waits
	}
	var held bool
	if err := conn.QueryRow(ctx, lock, "rsharvest daemon "+schema).Scan(&held); err != nil {
		conn.Release()
		return nil, errclass.NewRetryable(fmt.Errorf("daemon: --jobs-db: %w", err))
	}
	if !held {
		conn.Release()
		return nil, fmt.Errorf("daemon: %w: schema %s", ErrSchemaInUse, schema)
	}
	release = func() {
		// Unlocked by ending the session: a connection is not given back
		// to the pool holding the lock.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		release()
		return nil, errclass.Fatalf("daemon: --jobs-schema %s: %w", schema, err)
	}
	return release, nil
}

// schemaName is what River accepts as a schema's name.
var schemaName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
