package state

import (
	"context"
	"slices"
	"strings"
)

// Holders returns the sinks (by their names, as a run's report gives
// them) that hold what the state records of source, sorted: those of its
// baselines, and those filled since from the others' copies. None means
// the state has not recorded which (a source never harvested, or harvested
// before they were kept).
func (s *Store) Holders(ctx context.Context, source string) ([]string, error) {
	return column[string](ctx, s.r, "holders", "SELECT sink FROM holders WHERE source = ? ORDER BY sink", source)
}

// AddHolders records that sinks hold what the state records of source
// (adding to those it holds already).
func (s *Store) AddHolders(ctx context.Context, source string, sinks []string) error {
	sinks = slices.Compact(slices.Sorted(slices.Values(sinks)))
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return fatal("holders", err)
	}
	defer tx.Rollback()
	for _, sink := range sinks {
		if _, err := tx.ExecContext(ctx, "INSERT INTO holders (source, sink) VALUES (?, ?) ON CONFLICT DO NOTHING", source, sink); err != nil {
			return fatal("holders", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fatal("holders", err)
	}
	return nil
}

// RemoveHolders records that sinks no longer hold what the state records
// of source (a harvest of it ran without them: what changed since is not
// theirs).
func (s *Store) RemoveHolders(ctx context.Context, source string, sinks []string) error {
	if len(sinks) == 0 {
		return nil
	}
	args := []any{source}
	for _, n := range sinks {
		args = append(args, n)
	}
	if _, err := s.w.ExecContext(ctx, "DELETE FROM holders WHERE source = ? AND sink IN (?"+strings.Repeat(", ?", len(sinks)-1)+")", args...); err != nil {
		return fatal("holders", err)
	}
	return nil
}

// OtherSources returns the sources other than source whose resources the
// state records as held in any of sinks (by name), and those it records no
// holders of (harvested before they were kept), sorted: the sources an
// audit of source must not take the resources of, in those sinks, for
// its own.
func (s *Store) OtherSources(ctx context.Context, source string, sinks []string) ([]string, error) {
	q := "SELECT DISTINCT source FROM resources WHERE source <> ? AND source NOT IN (SELECT source FROM holders)"
	args := []any{source}
	if len(sinks) > 0 {
		q += " UNION SELECT DISTINCT source FROM holders WHERE source <> ? AND sink IN (?" + strings.Repeat(", ?", len(sinks)-1) + ")"
		args = append(args, source)
		for _, n := range sinks {
			args = append(args, n)
		}
	}
	out, err := column[string](ctx, s.r, "other sources", q+" ORDER BY 1", args...)
	return out, err
}
