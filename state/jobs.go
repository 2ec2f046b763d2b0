package state

import (
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"

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
