package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Site is one site of the registry: its definition, as the site package
// writes it, and where its harvests stand.
type Site struct {
	// Name is the site's name; it must not be empty.
	Name string
	// Definition is the site's definition (a YAML mapping).
	Definition string
	// Next is the next harvest when one was set explicitly, else zero
	// (derived from Last and the site's schedule).
	Next time.Time
	// Last is when the site's last harvest began (zero: never), with its
	// status (the run's: ok, partial, failed, interrupted) and run.
	Last       time.Time
	LastStatus string
	LastRunID  int64
	// Paused says the site is never due until resumed (SetSitePaused).
	Paused bool
	// Updated is when the row last changed (Sites fills it).
	Updated time.Time
}

// ErrNoSite is wrapped by the error of a site the registry does not hold.
var ErrNoSite = errors.New("no such site")

// PutSite adds the site s.Name, or replaces its definition; where its
// harvests stand is kept (Next, Last and the rest of s are ignored).
func (s *Store) PutSite(ctx context.Context, site Site) error {
	if site.Name == "" || site.Definition == "" {
		return fatal("put site", errors.New("a site needs a name and a definition"))
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO sites (name, definition, updated) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, updated = excluded.updated`,
		site.Name, site.Definition, time.Now().UTC().Format(timeLayout))
	if err != nil {
		return fatal("put site", err)
	}
	return nil
}

// SetSitePaused pauses (never due) or resumes site name.
func (s *Store) SetSitePaused(ctx context.Context, name string, paused bool) error {
	return s.updateSite(ctx, name, "paused = ?", boolInt(paused))
}

// SetSiteNext sets (zero: clears) the explicit next harvest of site name.
func (s *Store) SetSiteNext(ctx context.Context, name string, next time.Time) error {
	at, err := encodeTime(next)
	if err != nil {
		return fatal("site", err)
	}
	return s.updateSite(ctx, name, "next = ?", at)
}

// SiteHarvested records that a harvest of site name began at last, ended
// with status in run runID (0: none), and clears its explicit next
// harvest: the next is derived from this one.
func (s *Store) SiteHarvested(ctx context.Context, name string, last time.Time, status string, runID int64) error {
	at, err := encodeTime(last)
	if err != nil {
		return fatal("site", err)
	}
	return s.updateSite(ctx, name, "next = NULL, last = ?, last_status = ?, last_run_id = ?", at, status, nullID(runID))
}

func (s *Store) updateSite(ctx context.Context, name, set string, args ...any) error {
	args = append(args, time.Now().UTC().Format(timeLayout), name)
	res, err := s.w.ExecContext(ctx, "UPDATE sites SET "+set+", updated = ? WHERE name = ?", args...)
	if err != nil {
		return fatal("site", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fatal("site", err)
	} else if n == 0 {
		return fmt.Errorf("site %q: %w", name, ErrNoSite)
	}
	return nil
}

// RemoveSite removes site name from the registry (what its harvests hold
// stays in the state).
func (s *Store) RemoveSite(ctx context.Context, name string) error {
	res, err := s.w.ExecContext(ctx, "DELETE FROM sites WHERE name = ?", name)
	if err != nil {
		return fatal("remove site", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("site %q: %w", name, ErrNoSite)
	}
	return nil
}

// Site returns site name; its error wraps ErrNoSite when there is none.
func (s *Store) Site(ctx context.Context, name string) (Site, error) {
	sites, err := s.sites(ctx, "WHERE name = ?", name)
	if err != nil {
		return Site{}, err
	}
	if len(sites) == 0 {
		return Site{}, fmt.Errorf("site %q: %w", name, ErrNoSite)
	}
	return sites[0], nil
}

// Sites returns every site of the registry, by name.
func (s *Store) Sites(ctx context.Context) ([]Site, error) { return s.sites(ctx, "") }

func (s *Store) sites(ctx context.Context, where string, args ...any) ([]Site, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT name, definition, next, last, last_status, last_run_id, updated, paused FROM sites "+where+" ORDER BY name", args...)
	if err != nil {
		return nil, fatal("sites", err)
	}
	defer rows.Close()
	var out []Site
	for rows.Next() {
		var (
			st              Site
			next, last, upd sql.NullString
			runID           sql.NullInt64
			paused          int
		)
		if err := rows.Scan(&st.Name, &st.Definition, &next, &last, &st.LastStatus, &runID, &upd, &paused); err != nil {
			return nil, fatal("sites", err)
		}
		st.LastRunID, st.Paused = runID.Int64, paused != 0
		for _, f := range []struct {
			col string
			v   sql.NullString
			dst *time.Time
		}{{"next", next, &st.Next}, {"last", last, &st.Last}, {"updated", upd, &st.Updated}} {
			if *f.dst, err = decodeTime(f.col, f.v); err != nil {
				return nil, fatal("sites", err)
			}
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("sites", err)
	}
	return out, nil
}
