package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
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
		ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, updated = excluded.updated, due = NULL`,
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
	return s.updateSite(ctx, name, "next = ?, due = NULL", at)
}

// SiteHarvested records that a harvest of site name began at last, ended
// with status in run runID (0: none), and clears its explicit next
// harvest, the next being derived from this one; but not an explicit
// next later than last, which an edit of the site (or --next) set while
// the harvest ran.
func (s *Store) SiteHarvested(ctx context.Context, name string, last time.Time, status string, runID int64) error {
	at, err := encodeTime(last)
	if err != nil {
		return fatal("site", err)
	}
	return s.updateSite(ctx, name, "next = CASE WHEN next > ? THEN next END, due = NULL, last = ?, last_status = ?, last_run_id = ?", at, at, status, nullID(runID))
}

// RetrySite makes site name, whose harvest failed or was interrupted, due
// again at at: unless its explicit next harvest is no longer read, the one
// read before that harvest began (zero: none), but one set since (an edit
// of the site, or a harvest asked for, while the harvest ran), which is
// kept.
func (s *Store) RetrySite(ctx context.Context, name string, at, read time.Time) error {
	next, err := encodeTime(at)
	if err != nil {
		return fatal("site", err)
	}
	var was any = "" // no next was set: any now is one set since
	if !read.IsZero() {
		if was, err = encodeTime(read); err != nil {
			return fatal("site", err)
		}
	}
	return s.updateSite(ctx, name, "next = CASE WHEN next IS NOT NULL AND next <> ? THEN next ELSE ? END, due = NULL", was, next)
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
	return s.sitesQuery(ctx, "SELECT name, definition, next, last, last_status, last_run_id, updated, paused FROM sites "+where+" ORDER BY name", args...)
}

// sitesQuery returns the sites query reads (rows as scanSite reads them).
func (s *Store) sitesQuery(ctx context.Context, query string, args ...any) ([]Site, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fatal("sites", err)
	}
	defer rows.Close()
	var out []Site
	for rows.Next() {
		var st Site
		if err := scanSite(rows, &st); err != nil {
			return nil, fatal("sites", err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("sites", err)
	}
	return out, nil
}

// scanSite reads a row of name, definition, next, last, last_status,
// last_run_id, updated, paused (then more) into st.
func scanSite(sc scanner, st *Site, more ...any) error {
	var (
		next, last, upd sql.NullString
		runID           sql.NullInt64
		paused          int
	)
	if err := sc.Scan(append([]any{&st.Name, &st.Definition, &next, &last, &st.LastStatus, &runID, &upd, &paused}, more...)...); err != nil {
		return err
	}
	st.LastRunID, st.Paused = runID.Int64, paused != 0
	for _, f := range []struct {
		col string
		v   sql.NullString
		dst *time.Time
	}{{"next", next, &st.Next}, {"last", last, &st.Last}, {"updated", upd, &st.Updated}} {
		var err error
		if *f.dst, err = decodeTime(f.col, f.v); err != nil {
			return err
		}
	}
	return nil
}

// DueTime is a site's next harvest as the registry computed it from the
// site's row as read: Updated is the row's Updated then.
type DueTime struct {
	Name    string
	At      time.Time
	Updated time.Time
}

// SetSitesDue records, in one transaction, each site's next harvest as
// the registry computes it from its schedule (zero: unknown, computed
// again at the next look for due sites). Every change of a site's
// definition, last harvest or explicit next harvest makes it unknown; a
// site whose row changed since it was read (its updated is no longer the
// one read, whatever the clocks) is left so: its time was computed from
// what it no longer is.
func (s *Store) SetSitesDue(ctx context.Context, due []DueTime) error {
	if len(due) == 0 {
		return nil
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return fatal("site", err)
	}
	defer tx.Rollback()
	for _, d := range due {
		at, err := encodeTime(d.At)
		if err != nil {
			return fatal("site", err)
		}
		read, err := encodeTime(d.Updated.UTC())
		if err != nil {
			return fatal("site", err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE sites SET due = ? WHERE name = ? AND updated = ?", at, d.Name, read); err != nil {
			return fatal("site", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fatal("site", err)
	}
	return nil
}

// DueSites returns the sites not paused whose next harvest, as recorded
// (SetSitesDue), is at now or before, or is not known: the candidates the
// registry checks against their schedules. Through an index: with nothing
// due, nothing is read.
func (s *Store) DueSites(ctx context.Context, now time.Time) ([]Site, error) {
	at, err := encodeTime(now)
	if err != nil {
		return nil, fatal("sites", err)
	}
	// Two ranges of the index of due times (an OR would scan the table).
	return s.sitesQuery(ctx, `SELECT * FROM (
	SELECT name, definition, next, last, last_status, last_run_id, updated, paused FROM sites WHERE paused = 0 AND due IS NULL
	UNION ALL
	SELECT name, definition, next, last, last_status, last_run_id, updated, paused FROM sites WHERE paused = 0 AND due <= ?) d ORDER BY name`, at)
}

// The states of a site on the status page, in the order it lists them.
const (
	SiteFailing = "failing" // its last harvest failed, ended partial or was interrupted
	SiteRunning = "running" // a harvest of it is under way
	SiteDue     = "due"     // its next harvest has come
	SitePaused  = "paused"
	SiteOK      = "ok"
)

// SiteStates are the states of SiteQuery.State, in the order a page lists
// them.
var SiteStates = []string{SiteFailing, SiteRunning, SiteDue, SitePaused, SiteOK}

// SiteQuery is a page of the registry: the sites whose name holds Search
// ("": all), in State ("": any), ordered by state (failing, running,
// due, paused, ok) then name, Limit of them from Offset. A site is due
// when its next harvest, as recorded (SetSitesDue) at Now, has come or is
// not known.
type SiteQuery struct {
	Search, State string
	Limit, Offset int
	Now           time.Time
}

// SitePage is what a SiteQuery finds: its sites, each with its state; how
// many sites of the search are in each state; and how many match the
// query in all.
type SitePage struct {
	Sites  []SiteInState
	Counts map[string]int
	Total  int
}

// SiteInState is a site and its state (one of SiteStates).
type SiteInState struct {
	Site
	State string
}

// siteState is the SQL of a site's state (see SiteStates), with one
// parameter: now.
const siteState = `CASE WHEN EXISTS (SELECT 1 FROM runs r WHERE r.site = sites.name AND r.status = 'running') THEN 'running'
	WHEN last_status IN ('failed', 'partial', 'interrupted') THEN 'failing'
	WHEN paused <> 0 THEN 'paused'
	WHEN due IS NULL OR due <= ? THEN 'due'
	ELSE 'ok' END`

// Sites reads a page of the registry (see SiteQuery): a scan of the sites
// table and an index probe per site, whatever the harvest log holds.
func (s *Store) SitePage(ctx context.Context, q SiteQuery) (SitePage, error) {
	at, err := encodeTime(q.Now)
	if err != nil {
		return SitePage{}, fatal("sites", err)
	}
	like := "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(q.Search) + "%"
	from := "(SELECT sites.*, " + siteState + " AS state FROM sites WHERE (? = '' OR name LIKE ? ESCAPE '\\')) s"
	page := SitePage{Counts: map[string]int{}}
	rows, err := s.r.QueryContext(ctx, "SELECT state, count(*) FROM "+from+" GROUP BY state", at, q.Search, like)
	if err != nil {
		return page, fatal("sites", err)
	}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return page, fatal("sites", err)
		}
		page.Counts[st] = n
		if q.State == "" || q.State == st {
			page.Total += n
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return page, fatal("sites", err)
	}
	order := "CASE state WHEN 'failing' THEN 0 WHEN 'running' THEN 1 WHEN 'due' THEN 2 WHEN 'paused' THEN 3 ELSE 4 END, name"
	rows, err = s.r.QueryContext(ctx, "SELECT name, definition, next, last, last_status, last_run_id, updated, paused, state FROM "+from+
		" WHERE (? = '' OR state = ?) ORDER BY "+order+" LIMIT ? OFFSET ?", at, q.Search, like, q.State, q.State, max(q.Limit, 1), max(q.Offset, 0))
	if err != nil {
		return page, fatal("sites", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st SiteInState
		if err := scanSite(rows, &st.Site, &st.State); err != nil {
			return page, fatal("sites", err)
		}
		page.Sites = append(page.Sites, st)
	}
	if err := rows.Err(); err != nil {
		return page, fatal("sites", err)
	}
	return page, nil
}
