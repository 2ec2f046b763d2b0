// Package sqlitefile opens the SQLite databases of this project (the
// state file, the fs sink's packed layout) one way: through
// modernc.org/sqlite's "sqlite" database/sql driver, by a file: URI that
// carries the driver's parameters, in a pool whose connections are kept
// for the pool's life.
package sqlitefile

import (
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"

	"modernc.org/sqlite" // the "sqlite" driver
)

// DSN returns the file: URI of the database file path (absolute) with the
// driver's parameters (_pragma, _txlock, …).
func DSN(path string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: params.Encode()}
	return u.String()
}

// Open returns a pool on the database file path (absolute) with params,
// of at most conns connections, each kept open until the pool is closed
// (the driver's parameters apply to each connection as it opens). Like
// sql.Open it connects to nothing yet.
func Open(path string, params url.Values, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", DSN(path, params))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// Busy reports whether err is SQLite's SQLITE_BUSY (in any of its extended
// forms): another connection held the lock longer than busy_timeout, a
// temporary failure.
func Busy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == 5
}
