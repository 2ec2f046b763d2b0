package state

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Task is a task spread over workers: its planner divided it into parts
// (source.Parter), each executed as a unit of its own — by any worker, as
// a job of its own — and the resource sets' checkpoints it reaches are
// recorded only once every part has committed (see CloseTask).
type Task struct {
	ID int64
	// Source is the source key its records are kept under; Site the
	// registry site harvested, or "".
	Source, Site string
	// Mode is the task's mode ("baseline", "incremental").
	Mode string
	// RunID is the run that stands for the whole task in the harvest log.
	RunID int64
	// Fence, when not nil, is the source's lease of the harvest that
	// creates the task (CreateTask): one another harvest has taken since
	// refuses the task. Not stored.
	Fence *Lease
	// Checkpoints are where the task leaves its resource sets when every
	// part succeeds, as its planner said (JSON, the caller's).
	Checkpoints []byte
	Created     time.Time
	// Closed says its checkpoints were recorded (or it was abandoned).
	Closed bool
	// Fresh says the source held nothing when the task was divided: its
	// parts' runs, which see each other's commits, know it is a first
	// load.
	Fresh bool
	// Slots is how many of its units may run at once when its site has a
	// rate (the workers alive when it was divided), 0 for no bound: every
	// unit of the task, queued again too, shares the same slots.
	Slots int
}

// Part is one part of a spread task.
type Part struct {
	Task int64
	Name string
	// Done says a run committed the part whole: its RunID, and Holds,
	// what it held back (JSON, the caller's: its temporary failures).
	Done  bool
	RunID int64
	Holds []byte
}

// PartDone, in a Batch, records that a run executed part Name of task Task
// whole: its holds (JSON) are kept for CloseTask. A part done again (its
// job given to another worker) is overwritten — unless GiveUp says this
// is a part given up (done without its units), which leaves a part done
// as it is. When Status is set, run RunID is finished in the same
// transaction, as FinishRun would (Finished, Status, Report): whoever sees
// the part done sees its run's final report.
type PartDone struct {
	Task   int64
	Name   string
	RunID  int64
	Holds  []byte
	GiveUp bool

	Finished time.Time
	Status   string
	Report   []byte
}

// ErrTaskClosed is wrapped by the error of a batch of a unit whose task is
// closed (Batch.Task).
var ErrTaskClosed = errors.New("the spread task is closed")

// CreateTask records task t (its ID, Created and Closed are set here) and
// its parts, each not done, with the plan plan(i) gives of parts[i] (plan
// nil, or a nil plan: none, TaskPartPlan gives nil), in one transaction,
// within which also (when not nil) runs too — what must happen if and only
// if the task is recorded, such as inserting its parts' jobs into a queue
// kept in the same database. Plans are read one at a time: a caller can
// keep them on disk. It returns the task's ID. A task needs a source, a
// mode and at least one part, each named once.
func (s *Store) CreateTask(ctx context.Context, t Task, parts []string, plan func(i int) ([]byte, error), also func(ctx context.Context, tx *sql.Tx, id int64) error) (id int64, err error) {
	if t.Source == "" || t.Mode == "" || len(parts) == 0 {
		return 0, fatal("create task", errors.New("a task needs a source, a mode and parts"))
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return 0, fatal("create task", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := s.fenced(ctx, tx, t.Fence); err != nil {
		return 0, fatal("create task", err)
	}
	now := s.clock().UTC()
	if err := tx.QueryRowContext(ctx,
		"INSERT INTO tasks (source, site, mode, run_id, checkpoints, created, closed, fresh, slots) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?) RETURNING id",
		t.Source, t.Site, t.Mode, nullID(t.RunID), string(t.Checkpoints), now.Format(timeLayout), boolInt(t.Fresh), max(t.Slots, 0)).Scan(&id); err != nil {
		return 0, fatal("create task", err)
	}
	for i, p := range parts {
		var pl []byte
		if plan != nil {
			if pl, err = plan(i); err != nil {
				return 0, fmt.Errorf("create task: part %q: %w", p, err)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO task_parts (task_id, name, done, holds, plan) VALUES (?, ?, 0, '', ?)", id, p, pl); err != nil {
			return 0, fatal("create task", fmt.Errorf("part %q: %w", p, err))
		}
	}
	if also != nil {
		if err := also(ctx, tx, id); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fatal("create task", err)
	}
	return id, nil
}

// OpenTask returns the newest task of source key that is not closed, and
// false when there is none.
func (s *Store) OpenTask(ctx context.Context, key string) (Task, bool, error) {
	var (
		t       Task
		runID   sql.NullInt64
		cps     string
		created sql.NullString
		fresh   int
	)
	err := s.r.QueryRowContext(ctx,
		"SELECT id, source, site, mode, run_id, checkpoints, created, fresh, slots FROM tasks WHERE source = ? AND closed = 0 ORDER BY id DESC LIMIT 1", key).
		Scan(&t.ID, &t.Source, &t.Site, &t.Mode, &runID, &cps, &created, &fresh, &t.Slots)
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, false, nil
	}
	if err != nil {
		return Task{}, false, fatal("open task", err)
	}
	t.RunID, t.Checkpoints, t.Fresh = runID.Int64, []byte(cps), fresh != 0
	if t.Created, err = decodeTime("created", created); err != nil {
		return Task{}, false, fatal("open task", err)
	}
	return t, true, nil
}

// TaskParts returns the parts of task id, in the order they were created.
// A task with none (no such task) gives none.
func (s *Store) TaskParts(ctx context.Context, id int64) ([]Part, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+partCols+" FROM task_parts WHERE task_id = ? ORDER BY seq", id)
	if err != nil {
		return nil, fatal("task parts", err)
	}
	defer rows.Close()
	var out []Part
	for rows.Next() {
		p := Part{Task: id}
		if err := scanPart(rows, &p); err != nil {
			return nil, fatal("task parts", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("task parts", err)
	}
	return out, nil
}

// TaskPart returns part name of task id, and false when there is none.
func (s *Store) TaskPart(ctx context.Context, id int64, name string) (Part, bool, error) {
	p := Part{Task: id}
	err := scanPart(s.r.QueryRowContext(ctx, "SELECT "+partCols+" FROM task_parts WHERE task_id = ? AND name = ?", id, name), &p)
	if errors.Is(err, sql.ErrNoRows) {
		return Part{}, false, nil
	}
	if err != nil {
		return Part{}, false, fatal("task part", err)
	}
	return p, true, nil
}

// TaskPartPlan returns the plan of part name of task id, as CreateTask
// recorded it: nil when it has none, or when there is no such part. A
// closed task keeps no plan: its parts' give an error wrapping
// ErrTaskClosed.
func (s *Store) TaskPartPlan(ctx context.Context, id int64, name string) ([]byte, error) {
	var (
		plan   []byte
		closed int
	)
	err := s.r.QueryRowContext(ctx, "SELECT p.plan, t.closed FROM task_parts p JOIN tasks t ON t.id = p.task_id WHERE p.task_id = ? AND p.name = ?", id, name).
		Scan(&plan, &closed)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fatal("task part plan", err)
	case closed != 0:
		return nil, fmt.Errorf("task %d: %w", id, ErrTaskClosed)
	}
	return plan, nil
}

// partCols are the columns of task_parts that scanPart reads.
const partCols = "name, done, run_id, holds"

// scanPart reads a row of partCols into p.
func scanPart(sc scanner, p *Part) error {
	var (
		done  int
		runID sql.NullInt64
		holds string
	)
	if err := sc.Scan(&p.Name, &done, &runID, &holds); err != nil {
		return err
	}
	p.Done, p.RunID, p.Holds = done != 0, runID.Int64, []byte(holds)
	return nil
}

// CloseTask marks task id closed, and forgets its parts' plans: OpenTask
// no longer returns it, and a batch of one of its units (Batch.Task)
// committed after it is refused. A
// task that does not exist gives an error wrapping ErrNotFound.
func (s *Store) CloseTask(ctx context.Context, id int64) (err error) {
	tx, err := s.beginWrite(ctx) // after any unit's batch under way
	if err != nil {
		return fatal("close task", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, "UPDATE tasks SET closed = 1 WHERE id = ?", id)
	if err != nil {
		return fatal("close task", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fatal("close task", fmt.Errorf("task %d: %w", id, ErrNotFound))
	}
	if _, err := tx.ExecContext(ctx, "UPDATE task_parts SET plan = NULL WHERE task_id = ? AND plan IS NOT NULL", id); err != nil {
		return fatal("close task", err)
	}
	if err := tx.Commit(); err != nil {
		return fatal("close task", err)
	}
	return nil
}

// commitPart records b's part done, in Commit's transaction.
func commitPart(ctx context.Context, tx *sql.Tx, p *PartDone) error {
	var done int
	err := tx.QueryRowContext(ctx, "SELECT done FROM task_parts WHERE task_id = ? AND name = ?", p.Task, p.Name).Scan(&done)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("part %q of task %d: %w", p.Name, p.Task, ErrNotFound)
	}
	if err != nil || (p.GiveUp && done != 0) {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE task_parts SET done = 1, run_id = ?, holds = ? WHERE task_id = ? AND name = ?",
		nullID(p.RunID), string(p.Holds), p.Task, p.Name); err != nil {
		return fmt.Errorf("part %q of task %d: %w", p.Name, p.Task, err)
	}
	if p.Status == "" {
		return nil
	}
	rep, err := reportArg(p.Report)
	if err != nil {
		return fmt.Errorf("part %q of task %d: %w", p.Name, p.Task, err)
	}
	fin, err := encodeTime(p.Finished)
	if err != nil {
		return fmt.Errorf("part %q of task %d: finished: %w", p.Name, p.Task, err)
	}
	res, err := tx.ExecContext(ctx, "UPDATE runs SET finished = ?, status = ?, report = ? WHERE id = ?", fin, p.Status, rep, p.RunID)
	if err != nil {
		return fmt.Errorf("part %q of task %d: run %d: %w", p.Name, p.Task, p.RunID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("part %q of task %d: run %d: %w", p.Name, p.Task, p.RunID, cmp.Or(err, ErrNotFound))
	}
	return nil
}
