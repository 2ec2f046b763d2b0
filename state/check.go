package state

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/sqlitefile"
)

// ErrDamaged is wrapped by the error of a state file SQLite's check finds
// damaged (a corrupt page, a broken index): what it holds cannot be
// trusted.
var ErrDamaged = errors.New("the state file is damaged")

// Check runs SQLite's integrity check on the state file (quick: its
// quick_check, which skips matching the indexes against their tables) and
// returns what it found wrong, nothing when the file is sound. A store
// kept in PostgreSQL is its server's to check: Check returns nothing.
func (s *Store) Check(ctx context.Context, quick bool) ([]string, error) {
	if s.PostgresURL() != "" {
		return nil, nil
	}
	pragma := "PRAGMA integrity_check(100)"
	if quick {
		pragma = "PRAGMA quick_check(100)"
	}
	rows, err := s.w.QueryContext(ctx, pragma)
	if err != nil {
		return nil, fatal("check", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, fatal("check", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("check", err)
	}
	return problems, nil
}

// damaged is the error of the state file at path whose check found
// problems, or nil.
func damaged(path string, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return errclass.Fatalf("state: %s: %w: %s (restore it from a backup; rsharvest state check lists what is wrong)",
		path, ErrDamaged, strings.Join(problems[:min(len(problems), 3)], "; "))
}

// Damaged is the error of Check's problems for the state at path, or nil.
func Damaged(path string, problems []string) error { return damaged(path, problems) }

// CheckFile runs SQLite's integrity check on the state file at path
// opened read-only as a plain database, without reading the store's
// schema: what the check says of a file Open refuses as damaged. A file
// SQLite cannot read at all gives its error as the one problem.
func CheckFile(ctx context.Context, path string) ([]string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	db, err := sqlitefile.Open(abs, url.Values{"mode": {"ro"}}, 1)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check(100)")
	if err != nil {
		return []string{err.Error()}, nil
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return append(problems, err.Error()), nil
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		problems = append(problems, err.Error())
	}
	return problems, nil
}
