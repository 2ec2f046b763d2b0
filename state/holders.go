package state

import (
	"context"
	"slices"
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
