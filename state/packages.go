package state

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// PackageRecord says that a run delivered every resource of a dump package
// to a set of sinks: the package as identified by Fingerprint (its declared
// length and hashes), to the sinks named by Sinks.
type PackageRecord struct {
	URL         string
	Sinks       string
	Fingerprint string
	// Resources is the number of resources the package held.
	Resources int64
	RunID     int64
	Updated   time.Time
}

// PackageDone returns the record of the package at url delivered to sinks,
// if there is one.
func (s *Store) PackageDone(ctx context.Context, url, sinks string) (PackageRecord, bool, error) {
	p := PackageRecord{URL: url, Sinks: sinks}
	var run sql.NullInt64
	var updated string
	err := s.r.QueryRowContext(ctx, "SELECT fingerprint, resources, run_id, updated FROM packages WHERE url = ? AND sinks = ?", url, sinks).
		Scan(&p.Fingerprint, &p.Resources, &run, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return PackageRecord{}, false, nil
	}
	if err != nil {
		return PackageRecord{}, false, fatal("package", err)
	}
	p.RunID = run.Int64
	p.Updated, _ = time.Parse(time.RFC3339Nano, updated)
	return p, true, nil
}

// SetPackagesDone records (or replaces) package records in one transaction.
// A caller records a package only once every outcome of its resources is
// committed.
func (s *Store) SetPackagesDone(ctx context.Context, ps []PackageRecord) error {
	if len(ps) == 0 {
		return nil
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return fatal("package", err)
	}
	defer tx.Rollback()
	for _, p := range ps {
		if p.Updated.IsZero() {
			p.Updated = time.Now()
		}
		if err := checkYear(p.Updated); err != nil {
			return fatal("package", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO packages (url, sinks, fingerprint, resources, run_id, updated) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (url, sinks) DO UPDATE SET fingerprint = excluded.fingerprint, resources = excluded.resources,
			run_id = excluded.run_id, updated = excluded.updated`,
			p.URL, p.Sinks, p.Fingerprint, p.Resources, nullID(p.RunID), p.Updated.UTC().Format(time.RFC3339Nano)); err != nil {
			return fatal("package", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fatal("package", err)
	}
	return nil
}

// ForgetPackages removes every package record, so that the next run reads
// every package again. ForgetResources calls it: a package record stands
// for its resources' records.
func (s *Store) ForgetPackages(ctx context.Context) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM packages"); err != nil {
		return fatal("package", err)
	}
	return nil
}

// FailedPackages returns the packages that failures of run runID name, and
// whether some failure of the run names no package.
func (s *Store) FailedPackages(ctx context.Context, runID int64) (map[string]bool, bool, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT DISTINCT package FROM failures WHERE run_id = ?", runID)
	if err != nil {
		return nil, false, fatal("failures", err)
	}
	defer rows.Close()
	failed := map[string]bool{}
	unattributed := false
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, false, fatal("failures", err)
		}
		if p == "" {
			unattributed = true
		} else {
			failed[p] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fatal("failures", err)
	}
	return failed, unattributed, nil
}
