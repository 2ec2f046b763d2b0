package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// StatusRunning is the status BeginRun records when Run.Status is empty.
const StatusRunning = "running"

// Run is one entry of the harvest log: a run of the harvester against one
// source.
type Run struct {
	// ID is assigned by BeginRun; ids are never reused.
	ID int64
	// Mode is what the run did ("baseline", "incremental", …); free text.
	Mode string
	// Source is the source URL the run harvested.
	Source string
	// Site is the registry's site the run harvested, or "".
	Site string
	// Status is StatusRunning until FinishRun sets the final status.
	Status string
	// Started and Finished bound the run; Finished is zero until FinishRun.
	Started, Finished time.Time
	// Report is the run's JSON report, or nil.
	Report []byte
}

// BeginRun records the start of a run and returns its id. r.ID is ignored;
// an empty r.Status is recorded as StatusRunning and a zero r.Started as the
// current time. r.Report, if not nil, must be valid JSON.
func (s *Store) BeginRun(ctx context.Context, r Run) (int64, error) {
	if r.Status == "" {
		r.Status = StatusRunning
	}
	if r.Started.IsZero() {
		r.Started = time.Now()
	}
	report, err := reportArg(r.Report)
	if err != nil {
		return 0, fatal("begin run", err)
	}
	ts, err := timeCols(nil, []string{"started", "finished"}, r.Started, r.Finished)
	if err != nil {
		return 0, fatal("begin run", err)
	}
	var id int64
	if err := s.w.QueryRowContext(ctx,
		"INSERT INTO runs (mode, source, site, status, started, finished, report) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
		r.Mode, r.Source, r.Site, r.Status, ts[0], ts[1], report).Scan(&id); err != nil {
		return 0, fatal("begin run", err)
	}
	return id, nil
}

// FinishRun records the end of run id: when it finished, its final status
// (not empty) and its JSON report (nil for none; otherwise it must be valid
// JSON). A run id that does not exist gives an error wrapping ErrNotFound.
// Calling it again overwrites the earlier values.
func (s *Store) FinishRun(ctx context.Context, id int64, finished time.Time, status string, report []byte) error {
	if status == "" {
		return fatal("finish run", errors.New("empty status"))
	}
	rep, err := reportArg(report)
	if err != nil {
		return fatal("finish run", err)
	}
	fin, err := encodeTime(finished)
	if err != nil {
		return fatal("finish run", fmt.Errorf("finished: %w", err))
	}
	res, err := s.w.ExecContext(ctx, "UPDATE runs SET finished = ?, status = ?, report = ? WHERE id = ?", fin, status, rep, id)
	if err != nil {
		return fatal("finish run", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fatal("finish run", err)
	}
	if n == 0 {
		return fatal("finish run", fmt.Errorf("run %d: %w", id, ErrNotFound))
	}
	return nil
}

// RunProgress records report, a JSON report of the counts so far, on run
// id while it is running (a page shows a harvest's live counts); a run
// that has finished is left as it is. A run id that does not exist gives
// an error wrapping ErrNotFound.
func (s *Store) RunProgress(ctx context.Context, id int64, report []byte) error {
	rep, err := reportArg(report)
	if err != nil {
		return fatal("run progress", err)
	}
	res, err := s.w.ExecContext(ctx, "UPDATE runs SET report = ? WHERE id = ? AND status = ?", rep, id, StatusRunning)
	if err != nil {
		return fatal("run progress", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fatal("run progress", err)
	} else if n == 0 {
		if _, err := s.Run(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

func reportArg(report []byte) (any, error) {
	if report == nil {
		return nil, nil
	}
	if !json.Valid(report) {
		return nil, errors.New("report is not valid JSON")
	}
	return string(report), nil
}

const selectRun = "SELECT id, mode, source, site, status, started, finished, report FROM runs"

// Run returns run id, or an error wrapping ErrNotFound.
func (s *Store) Run(ctx context.Context, id int64) (Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, selectRun+" WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fatal("run", fmt.Errorf("run %d: %w", id, ErrNotFound))
	}
	if err != nil {
		return Run{}, fatal("run", err)
	}
	return r, nil
}

// Runs returns up to limit runs, newest (highest id) first; limit <= 0
// means all.
func (s *Store) Runs(ctx context.Context, limit int) ([]Run, error) {
	if limit <= 0 {
		return s.runs(ctx, selectRun+" ORDER BY id DESC")
	}
	return s.runs(ctx, selectRun+" ORDER BY id DESC LIMIT ?", limit)
}

// RunsSince returns the runs that began at since or later (zero: all), of
// site only when site is not "", oldest first.
func (s *Store) RunsSince(ctx context.Context, since time.Time, site string) ([]Run, error) {
	from := sinceArg(since)
	return s.runs(ctx, selectRun+" WHERE started >= ? AND (? = '' OR site = ?) ORDER BY started, id", from, site, site)
}

// RunsFinishedSince returns the runs that finished at since or later
// (none still running), oldest start first.
func (s *Store) RunsFinishedSince(ctx context.Context, since time.Time) ([]Run, error) {
	return s.runs(ctx, selectRun+" WHERE finished >= ? ORDER BY started, id", sinceArg(since))
}

func (s *Store) runs(ctx context.Context, query string, args ...any) ([]Run, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fatal("runs", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fatal("runs", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("runs", err)
	}
	return out, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

func scanRun(sc scanner) (Run, error) {
	var (
		r                 Run
		started, finished sql.NullString
		report            sql.NullString
	)
	if err := sc.Scan(&r.ID, &r.Mode, &r.Source, &r.Site, &r.Status, &started, &finished, &report); err != nil {
		return Run{}, err
	}
	var err error
	if r.Started, err = decodeTime("started", started); err != nil {
		return Run{}, err
	}
	if r.Finished, err = decodeTime("finished", finished); err != nil {
		return Run{}, err
	}
	if report.Valid {
		r.Report = []byte(report.String)
	}
	return r, nil
}

// StatusInterrupted marks a run that never finished (its process was
// killed); MarkInterrupted sets it.
const StatusInterrupted = "interrupted"

// MarkInterrupted closes the runs of source ("": of every source) still
// recorded as running as interrupted: the caller knows their processes
// died — it holds the state file's lock (one process uses a file at a
// time), or the source's lease (SourceLease), which it gives as fence
// (nil: none): a lease another harvest has taken since refuses it with an
// error wrapping ErrLeaseLost, as Batch.Fence does. It returns how many
// there were.
func (s *Store) MarkInterrupted(ctx context.Context, now time.Time, source string, fence *Lease) (int64, error) {
	fin, err := encodeTime(now)
	if err != nil {
		return 0, fatal("mark interrupted", err)
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return 0, fatal("mark interrupted", err)
	}
	defer tx.Rollback()
	if err := s.fenced(ctx, tx, fence); err != nil {
		return 0, fatal("mark interrupted", err)
	}
	res, err := tx.ExecContext(ctx, "UPDATE runs SET status = ?, finished = ? WHERE status = ? AND (? = '' OR source = ?)",
		StatusInterrupted, fin, StatusRunning, source, source)
	if err != nil {
		return 0, fatal("mark interrupted", err)
	}
	n, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return 0, fatal("mark interrupted", err)
	}
	return n, nil
}

// Event is an operation of the harvest log that is not a run: the
// harvester started or stopped (seed 004's steps 1 and 17).
type Event struct {
	At        time.Time
	Operation string
	// Site is the site concerned, or "".
	Site    string
	Message string
}

// AddEvent appends e to the harvest log; a zero At is the current time.
func (s *Store) AddEvent(ctx context.Context, e Event) error {
	if e.Operation == "" {
		return fatal("event", errors.New("an event needs an operation"))
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	at, err := encodeTime(e.At)
	if err != nil {
		return fatal("event", err)
	}
	if _, err := s.w.ExecContext(ctx, "INSERT INTO events (at, operation, site, message) VALUES (?, ?, ?, ?)", at, e.Operation, e.Site, e.Message); err != nil {
		return fatal("event", err)
	}
	return nil
}

// Events returns the events at since or later (zero: all), of site only
// when site is not "" (the harvester's starts and stops, of no site, are
// then left out), oldest first.
func (s *Store) Events(ctx context.Context, since time.Time, site string) ([]Event, error) {
	return s.events(ctx, "SELECT at, operation, site, message FROM events WHERE at >= ? AND (? = '' OR site = ?) ORDER BY at, id", sinceArg(since), site, site)
}

// EventsOf returns the events of operation at since or later, oldest
// first.
func (s *Store) EventsOf(ctx context.Context, since time.Time, operation string) ([]Event, error) {
	return s.events(ctx, "SELECT at, operation, site, message FROM events WHERE at >= ? AND operation = ? ORDER BY at, id", sinceArg(since), operation)
}

// events reads the events query (with args) selects: their at,
// operation, site and message.
func (s *Store) events(ctx context.Context, query string, args ...any) ([]Event, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fatal("events", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var (
			e  Event
			at sql.NullString
		)
		if err := rows.Scan(&at, &e.Operation, &e.Site, &e.Message); err != nil {
			return nil, fatal("events", err)
		}
		if e.At, err = decodeTime("at", at); err != nil {
			return nil, fatal("events", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("events", err)
	}
	return out, nil
}

// LastEventID is the id of the newest event of the harvest log (0: none);
// with EventAfter, a process watches the log for operators' actions.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.r.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) FROM events").Scan(&id); err != nil {
		return 0, fatal("events", err)
	}
	return id, nil
}

// EventAfter returns the id of the newest event of operation recorded
// after event id, or id when there is none: a cheap look (the events after
// id only) that a process polls.
func (s *Store) EventAfter(ctx context.Context, id int64, operation string) (int64, error) {
	var last int64
	if err := s.r.QueryRowContext(ctx, "SELECT coalesce(max(id), ?) FROM events WHERE id > ? AND operation = ?", id, id, operation).Scan(&last); err != nil {
		return id, fatal("events", err)
	}
	return last, nil
}

// sinceArg is a "from this time on" bound as a column value to compare
// with: "" (before every time) when since is zero.
func sinceArg(since time.Time) any {
	if from, err := encodeTime(since); err == nil && from != nil {
		return from
	}
	return ""
}

// SiteRuns returns up to limit runs of site, newest first, those before
// run before only when before is not 0: a page of a site's harvests,
// read through an index whatever the harvest log holds.
func (s *Store) SiteRuns(ctx context.Context, site string, before int64, limit int) ([]Run, error) {
	return s.runs(ctx, selectRun+" WHERE site = ? AND (? = 0 OR id < ?) ORDER BY id DESC LIMIT ?", site, before, before, max(limit, 1))
}

// RunningRun returns the run of site under way, the newest when a dead
// process left others recorded as running (ok false: none).
func (s *Store) RunningRun(ctx context.Context, site string) (Run, bool, error) {
	runs, err := s.runs(ctx, selectRun+" WHERE site = ? AND status = 'running' ORDER BY id DESC LIMIT 1", site)
	if err != nil || len(runs) == 0 {
		return Run{}, false, err
	}
	return runs[0], true, nil
}

// RunCounts counts the runs of the harvest log by status.
func (s *Store) RunCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT status, count(*) FROM runs GROUP BY status")
	if err != nil {
		return nil, fatal("runs", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fatal("runs", err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("runs", err)
	}
	return out, nil
}

// SiteEvents returns up to limit events of site, newest first (an index's
// read).
func (s *Store) SiteEvents(ctx context.Context, site string, limit int) ([]Event, error) {
	return s.events(ctx, "SELECT at, operation, site, message FROM events WHERE site = ? ORDER BY id DESC LIMIT ?", site, max(limit, 1))
}

// HourCount is how many harvests began in an hour, by how they ended:
// ok (ok or partial), failed (failed or interrupted), and the others
// (running).
type HourCount struct {
	Hour               time.Time
	OK, Failed, Others int
}

// RunsPerHour counts the harvests begun since since, by the hour they
// began (the hours without one left out), oldest first: a range of the
// index of runs by start.
func (s *Store) RunsPerHour(ctx context.Context, since time.Time) ([]HourCount, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT substr(started, 1, 13) AS h,
	sum(CASE WHEN status IN ('ok', 'partial') THEN 1 ELSE 0 END),
	sum(CASE WHEN status IN ('failed', 'interrupted') THEN 1 ELSE 0 END), count(*)
	FROM runs WHERE started >= ? GROUP BY h ORDER BY h`, sinceArg(since))
	if err != nil {
		return nil, fatal("runs", err)
	}
	defer rows.Close()
	var out []HourCount
	for rows.Next() {
		var (
			h        string
			c        HourCount
			ok, fail int
			all      int
		)
		if err := rows.Scan(&h, &ok, &fail, &all); err != nil {
			return nil, fatal("runs", err)
		}
		if c.Hour, err = time.Parse("2006-01-02T15", h); err != nil {
			continue // not a time this store writes
		}
		c.OK, c.Failed, c.Others = ok, fail, all-ok-fail
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("runs", err)
	}
	return out, nil
}

// SitesLastRuns calls fn with each site of the registry, by name, and its
// last harvest's run (zero: none): one read of the registry joined with
// the runs it names.
func (s *Store) SitesLastRuns(ctx context.Context, fn func(Site, Run) error) error {
	rows, err := s.r.QueryContext(ctx, `SELECT s.name, s.definition, s.next, s.last, s.last_status, s.last_run_id, s.updated, s.paused,
	r.id, r.mode, r.source, r.site, r.status, r.started, r.finished, r.report
	FROM sites s LEFT JOIN runs r ON r.id = s.last_run_id ORDER BY s.name`)
	if err != nil {
		return fatal("sites", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			st                      Site
			id                      sql.NullInt64
			mode, src, site, status sql.NullString
			started, finished, rep  sql.NullString
		)
		if err := scanSite(rows, &st, &id, &mode, &src, &site, &status, &started, &finished, &rep); err != nil {
			return fatal("sites", err)
		}
		var r Run
		if id.Valid {
			r = Run{ID: id.Int64, Mode: mode.String, Source: src.String, Site: site.String, Status: status.String}
			if r.Started, err = decodeTime("started", started); err != nil {
				return fatal("sites", err)
			}
			if r.Finished, err = decodeTime("finished", finished); err != nil {
				return fatal("sites", err)
			}
			if rep.Valid {
				r.Report = []byte(rep.String)
			}
		}
		if err := fn(st, r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fatal("sites", err)
	}
	return nil
}
