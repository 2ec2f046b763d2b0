package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// Snapshot is a consistent read-only view of the store: every query of one
// Snapshot reads the same state, whatever is committed meanwhile. It is
// valid only inside the function given to View.
type Snapshot struct {
	tx *sql.Tx
}

// View calls fn with a Snapshot of the store, held in one read transaction
// that ends when fn returns. It never blocks a writer. fn's error is
// returned unchanged; the Snapshot's own errors are fatal.
func (s *Store) View(ctx context.Context, fn func(*Snapshot) error) error {
	tx, err := s.r.BeginTx(ctx, &s.dialect.snapshot)
	if err != nil {
		return fatal("view", err)
	}
	defer func() { _ = tx.Rollback() }()
	// SQLite starts a read transaction's snapshot at its first read: read
	// now, so the view is the state at the time View was called.
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM schema_version").Scan(&n); err != nil {
		return fatal("view", err)
	}
	return fn(&Snapshot{tx: tx})
}

// LastRecorded returns the newest change's recorded stamp (see
// ChangeRecord.Recorded), or the zero time when no change is recorded.
// On SQLite, every change recorded later is missing from the snapshot,
// and every change recorded up to it is in it. On PostgreSQL, where
// commits of different sources run at once, that holds of each source's
// own newest stamp (see Store.Commit): a reader that must not miss a
// change goes by those.
func (v *Snapshot) LastRecorded(ctx context.Context) (time.Time, error) {
	var last sql.NullInt64
	if err := v.tx.QueryRowContext(ctx, "SELECT max(recorded) FROM changes").Scan(&last); err != nil {
		return time.Time{}, fatal("last recorded", err)
	}
	return decodeStamp(last), nil
}

// DescribedBy returns the source's own description its resource sets were
// found from (Checkpoint.DescribedBy: the one most recently recorded), or
// "" when none is recorded.
func (v *Snapshot) DescribedBy(ctx context.Context, source string) (string, error) {
	var d string
	err := v.tx.QueryRowContext(ctx, `SELECT described_by FROM checkpoints WHERE source = ? AND described_by <> ''
		ORDER BY updated DESC, resource_set LIMIT 1`, source).Scan(&d)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fatal("described by", err)
	}
	return d, nil
}

// SiteOf returns the registry site whose harvests last recorded source
// (the site of its latest run that had one), or "" when no site's did.
func (v *Snapshot) SiteOf(ctx context.Context, source string) (string, error) {
	var s string
	err := v.tx.QueryRowContext(ctx, "SELECT site FROM runs WHERE source = ? AND site <> '' ORDER BY id DESC LIMIT 1", source).Scan(&s)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fatal("site of", err)
	}
	return s, nil
}

// Sources returns, in order, every source the store holds resources or
// changes of.
func (v *Snapshot) Sources(ctx context.Context) ([]string, error) {
	return column[string](ctx, v.tx, "sources", `SELECT source FROM (SELECT DISTINCT source FROM resources
		UNION SELECT DISTINCT source FROM changes WHERE source <> '') AS held ORDER BY source`)
}

// ResourceQuery selects resources of one source for Snapshot.WalkResources.
type ResourceQuery struct {
	// Source is the source ("": every source).
	Source string
	// Held keeps only what the destination holds: no tombstone, and no
	// record of a resource that failed before it was ever held.
	Held bool
}

// CountResources counts the resources q selects.
func (v *Snapshot) CountResources(ctx context.Context, q ResourceQuery) (int64, error) {
	where, args := q.where()
	var n int64
	if err := v.tx.QueryRowContext(ctx, "SELECT count(*) FROM resources WHERE "+where, args...).Scan(&n); err != nil {
		return 0, fatal("count resources", err)
	}
	return n, nil
}

// WalkResources calls fn for each resource q selects, in (source, URI)
// order, streaming the rows. An error from fn stops the walk and is
// returned unchanged.
func (v *Snapshot) WalkResources(ctx context.Context, q ResourceQuery, fn func(Resource) error) error {
	return walkResources(ctx, v.tx, q, fn)
}

func (q ResourceQuery) where() (string, []any) {
	where := "(? = '' OR source = ?)"
	if q.Held {
		where += " AND deleted = 0 AND outcome <> 'failed'"
	}
	return where, []any{q.Source, q.Source}
}

// querier is what a walk reads from: the read pool or a Snapshot's
// transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// column returns the one column of the rows query (with args) reads from
// db; what names the read in its error.
func column[T any](ctx context.Context, db querier, what, query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fatal(what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, fatal(what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal(what, err)
	}
	return out, nil
}

func walkResources(ctx context.Context, db querier, q ResourceQuery, fn func(Resource) error) error {
	where, args := q.where()
	rows, err := db.QueryContext(ctx, selectResource+" WHERE "+where+" ORDER BY source, uri", args...)
	if err != nil {
		return fatal("walk resources", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanResource(rows)
		if err != nil {
			return fatal("walk resources", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fatal("walk resources", err)
	}
	return nil
}

// ChangeQuery selects changes for Snapshot.WalkChanges.
type ChangeQuery struct {
	// Source is the source whose changes are walked.
	Source string
	// After walks only the changes recorded after it (zero: all).
	After time.Time
	// Superseded sets ChangeRecord.Superseded (a look-up per change).
	Superseded bool
}

// WalkChanges calls fn for each change q selects, in the order they were
// recorded, streaming the rows. Changes recorded before their stamp was
// kept (by an older version) are not walked. An error from fn stops the
// walk and is returned unchanged.
func (v *Snapshot) WalkChanges(ctx context.Context, q ChangeQuery, fn func(ChangeRecord) error) error {
	after := int64(math.MinInt64)
	if !q.After.IsZero() {
		if err := checkYear(q.After); err != nil {
			return fatal("walk changes", fmt.Errorf("after: %w", err))
		}
		after = stamp(q.After)
	}
	superseded := "0"
	if q.Superseded {
		superseded = `EXISTS (SELECT 1 FROM changes l
			WHERE l.source = c.source AND l.uri = c.uri AND l.recorded > c.recorded)`
	}
	rows, err := v.tx.QueryContext(ctx, "SELECT "+changeCols+", "+superseded+`
		FROM changes c WHERE source = ? AND recorded IS NOT NULL AND recorded > ? ORDER BY recorded, id`, q.Source, after)
	if err != nil {
		return fatal("walk changes", err)
	}
	defer rows.Close()
	for rows.Next() {
		var superseded bool
		c, err := scanChange(rows, &superseded)
		if err != nil {
			return fatal("walk changes", err)
		}
		c.Superseded = superseded
		if err := fn(c); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fatal("walk changes", err)
	}
	return nil
}
