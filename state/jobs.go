package state

import (
	"database/sql"
	"net/url"
	"path/filepath"
)

// JobDB opens a pool on the store's file for a job engine that keeps its
// own tables there (River's SQLite driver, which the daemon uses): one
// connection, as that driver asks, the same busy timeout as the store's
// writer, and transactions that take the write lock when they begin, so
// that the engine's writes and the store's wait for each other instead of
// failing. The caller closes it before the store.
func (s *Store) JobDB() (*sql.DB, error) {
	abs, err := filepath.Abs(s.path)
	if err != nil {
		return nil, fatal("job db", err)
	}
	db, err := sql.Open("sqlite", dsn(abs, url.Values{
		"_pragma": {"busy_timeout(10000)", "synchronous(NORMAL)"},
		"_txlock": {"immediate"},
	}))
	if err != nil {
		return nil, fatal("job db", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}
