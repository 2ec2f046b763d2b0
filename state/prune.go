package state

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// LogKeep is how much of the harvest log PruneLog keeps: the runs that
// began within Age of now (Age > 0), else each site's PerSite latest runs
// (PerSite > 0). The zero LogKeep keeps everything.
type LogKeep struct {
	Age     time.Duration
	PerSite int
}

// IsZero reports whether k keeps everything.
func (k LogKeep) IsZero() bool { return k.Age <= 0 && k.PerSite <= 0 }

// Pruned counts what PruneLog removed: the runs thinned, their failures,
// and the log lines.
type Pruned struct {
	Runs, Failures, Events int64
}

// DefaultPruneBatch is how many runs or log lines one of PruneLog's write
// transactions removes.
const DefaultPruneBatch = 500

// PruneLog thins the harvest log down to keep. Of a run beyond it, the
// report and the failures go; its one-line record (mode, source, site,
// status, times) stays, since the resources and changes it wrote name it.
// The log lines (events) older than the oldest run kept go: with Age,
// every line older than now-Age; with PerSite, a site's lines older than
// its oldest run kept (the harvester's own starts and stops stay). A run
// under way is never thinned. It works batch rows at a time (0:
// DefaultPruneBatch), each batch a write transaction of its own, so that
// harvests commit between batches; what it did before ctx ended stays
// done.
func (s *Store) PruneLog(ctx context.Context, keep LogKeep, now time.Time, batch int) (Pruned, error) {
	var p Pruned
	batch = cmp.Or(max(batch, 0), DefaultPruneBatch)
	switch {
	case keep.Age > 0:
		cut, err := encodeTime(now.Add(-keep.Age))
		if err != nil {
			return p, fatal("prune the harvest log", err)
		}
		if err := s.pruneRuns(ctx, &p, batch, "pruned = 0 AND started < ? AND status <> ? AND "+notOfOpenTask+" ORDER BY started, id", cut, StatusRunning); err != nil {
			return p, err
		}
		return p, s.pruneEvents(ctx, &p, batch, "at < ? ORDER BY at, id", cut)
	case keep.PerSite > 0:
		// The sites that have runs ("" for runs of no site).
		sites, err := column[string](ctx, s.r, "prune the harvest log", "SELECT DISTINCT site FROM runs")
		if err != nil {
			return p, err
		}
		for _, site := range sites {
			var (
				oldest  int64
				started sql.NullString
			)
			err := s.r.QueryRowContext(ctx, "SELECT id, started FROM runs WHERE site = ? ORDER BY id DESC LIMIT 1 OFFSET ?", site, keep.PerSite-1).Scan(&oldest, &started)
			if errors.Is(err, sql.ErrNoRows) {
				continue // no more runs than it keeps
			} else if err != nil {
				return p, fatal("prune the harvest log", err)
			}
			if err := s.pruneRuns(ctx, &p, batch, "site = ? AND id < ? AND pruned = 0 AND status <> ? AND "+notOfOpenTask+" ORDER BY id", site, oldest, StatusRunning); err != nil {
				return p, err
			}
			if site != "" && started.Valid {
				if err := s.pruneEvents(ctx, &p, batch, "site = ? AND at < ? ORDER BY id", site, started.String); err != nil {
					return p, err
				}
			}
		}
	}
	return p, nil
}

// notOfOpenTask keeps from thinning the runs of a spread task still open
// (its own and its units'): closing the task makes its report from theirs
// (see CloseTask).
const notOfOpenTask = `id NOT IN (SELECT p.run_id FROM task_parts p JOIN tasks t ON t.id = p.task_id WHERE t.closed = 0 AND p.run_id IS NOT NULL)
	AND id NOT IN (SELECT run_id FROM tasks WHERE closed = 0 AND run_id IS NOT NULL)`

// pruneRuns thins the runs that where (a condition, then an order, on
// args) selects, batch at a time.
func (s *Store) pruneRuns(ctx context.Context, p *Pruned, batch int, where string, args ...any) error {
	return s.pruneBatches(ctx, "SELECT id FROM runs WHERE "+where+" LIMIT ?", batch, args, func(ctx context.Context, tx *sql.Tx, in string, ids []any) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM failures WHERE run_id IN ("+in+")", ids...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		p.Failures += n
		res, err = tx.ExecContext(ctx, "UPDATE runs SET report = NULL, pruned = 1 WHERE id IN ("+in+")", ids...)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		p.Runs += n
		return nil
	})
}

// pruneEvents removes the log lines that where selects, batch at a time.
func (s *Store) pruneEvents(ctx context.Context, p *Pruned, batch int, where string, args ...any) error {
	return s.pruneBatches(ctx, "SELECT id FROM events WHERE "+where+" LIMIT ?", batch, args, func(ctx context.Context, tx *sql.Tx, in string, ids []any) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM events WHERE id IN ("+in+")", ids...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		p.Events += n
		return nil
	})
}

// pruneBatches reads up to batch ids with query (args, then the batch),
// hands them to apply in a write transaction of its own (in: their
// placeholders), and goes on until a read finds fewer than batch.
func (s *Store) pruneBatches(ctx context.Context, query string, batch int, args []any, apply func(ctx context.Context, tx *sql.Tx, in string, ids []any) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ids, err := column[any](ctx, s.r, "prune the harvest log", query, append(args, batch)...)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		tx, err := s.beginWrite(ctx)
		if err != nil {
			return fatal("prune the harvest log", err)
		}
		in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
		if err := apply(ctx, tx, in, ids); err != nil {
			_ = tx.Rollback()
			return fatal("prune the harvest log", err)
		}
		if err := tx.Commit(); err != nil {
			return fatal("prune the harvest log", err)
		}
		if len(ids) < batch {
			return nil
		}
	}
}
