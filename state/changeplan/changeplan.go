// Package changeplan is the scratch database of one incremental
// ResourceSync task: the changes its change packages list, kept on disk so
// that the planner finds each resource's latest change whatever the size
// of the task. It is the state's SQL for planners, as package state is the
// SQL of what is held.
package changeplan

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the plan's scratch database

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/source"
)

// Plan is the scratch database of one incremental task: every change in
// the task's range, as read from the change packages' manifests, so that
// the latest change of each resource (its winner) is found on disk rather
// than in memory, whatever the order in which packages were read; and the
// failures met reading them, emitted in a fixed order once reading ends.
// A Plan lives in its own file, removed by Close. Add and Fail may be
// called from several goroutines; the reads come after Decide.
type Plan struct {
	path string
	db   *sql.DB
	// PageSize is how many rows a read takes at a time (default 1000).
	PageSize int
}

// Planned is one change entry of a package: Pkg is the package's index in
// the task's packages.
type Planned struct {
	Pkg int
	Rec *source.Record
}

// New makes an empty plan in a new file in dir.
func New(ctx context.Context, dir string) (*Plan, error) {
	f, err := os.CreateTemp(dir, "rsharvest-plan-*.db")
	if err != nil {
		return nil, errclass.Fatalf("plan: %w", err)
	}
	f.Close()
	abs, _ := filepath.Abs(f.Name())
	p := &Plan{path: abs}
	dsn := url.URL{Scheme: "file", Path: filepath.ToSlash(abs),
		RawQuery: url.Values{"_pragma": {"journal_mode(OFF)", "synchronous(OFF)", "temp_store(FILE)"}}.Encode()}
	if p.db, err = sql.Open("sqlite", dsn.String()); err != nil {
		os.Remove(abs)
		return nil, errclass.Fatalf("plan: %w", err)
	}
	p.db.SetMaxOpenConns(1)
	const schema = `CREATE TABLE changes (
		uri TEXT NOT NULL, time INTEGER NOT NULL, change TEXT NOT NULL,
		pkg INTEGER NOT NULL, package_from INTEGER NOT NULL, package TEXT NOT NULL, seq INTEGER NOT NULL,
		rec TEXT NOT NULL);
	CREATE TABLE failures (pkg INTEGER NOT NULL, seq INTEGER NOT NULL, f TEXT NOT NULL);
	CREATE INDEX failures_order ON failures (pkg, seq)`
	if _, err := p.db.ExecContext(ctx, schema); err != nil {
		p.Close()
		return nil, errclass.Fatalf("plan: %w", err)
	}
	return p, nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Add records changes of the package at index pkg, in one transaction.
func (p *Plan) Add(ctx context.Context, j *source.Package, pkg int, recs []*source.Record) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO changes VALUES (?,?,?,?,?,?,?,?)`)
	if err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	defer st.Close()
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return errclass.Fatalf("plan: %s: %w", r.URI, err)
		}
		if _, err := st.ExecContext(ctx, r.URI, nanos(r.ChangeTime), string(r.Change), pkg, nanos(j.From), j.URL, r.Seq, string(b)); err != nil {
			return errclass.Fatalf("plan: add %s: %w", r.URI, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	return nil
}

// storedFailure is a failure as the plan keeps it: its error as text, and
// the error's class.
type storedFailure struct {
	source.Failure
	Err       string
	Permanent bool
}

// Fail records a failure met reading the package at index pkg (seq: the
// entry's position, -1 for the package's own).
func (p *Plan) Fail(ctx context.Context, pkg int, seq int64, f source.Failure) error {
	b, err := json.Marshal(storedFailure{Failure: f, Err: f.Err.Error(), Permanent: errclass.IsPermanent(f.Err)})
	if err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	if _, err := p.db.ExecContext(ctx, `INSERT INTO failures VALUES (?,?,?)`, pkg, seq, string(b)); err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	return nil
}

// Failures calls fn with every failure recorded, by package and position.
func (p *Plan) Failures(ctx context.Context, fn func(source.Failure) error) error {
	q := pageQuery{text: "f", from: "failures", keys: []string{"pkg", "seq", "rowid"}}
	return p.page(ctx, q, func(text string, _ int) error {
		var sf storedFailure
		if err := json.Unmarshal([]byte(text), &sf); err != nil {
			return errclass.Fatalf("plan: %w", err)
		}
		f := sf.Failure
		if sf.Permanent {
			f.Err = errclass.NewPermanent(errors.New(sf.Err))
		} else {
			f.Err = errclass.NewRetryable(errors.New(sf.Err))
		}
		return fn(f)
	})
}

// Decide computes the winner of every resource: its latest change by
// (time, package from, package URL, position). Call it once, after every
// Add.
func (p *Plan) Decide(ctx context.Context) error {
	const q = `CREATE TABLE winners AS SELECT * FROM (
		SELECT *, ROW_NUMBER() OVER (PARTITION BY uri ORDER BY time DESC, package_from DESC, package DESC, seq DESC) AS rn
		FROM changes) WHERE rn = 1;
		CREATE INDEX winners_pkg ON winners (pkg, seq);
		CREATE INDEX winners_uri ON winners (uri);`
	if _, err := p.db.ExecContext(ctx, q); err != nil {
		return errclass.Fatalf("plan: decide: %w", err)
	}
	return nil
}

// Deletes calls fn with every winning delete, in URI order.
func (p *Plan) Deletes(ctx context.Context, fn func(Planned) error) error {
	return p.winners(ctx, pageQuery{where: "change = 'deleted'", keys: []string{"uri"}}, fn)
}

// PutPackages returns the indexes of the packages holding a winning
// create or update, last first.
func (p *Plan) PutPackages(ctx context.Context) ([]int, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT DISTINCT pkg FROM winners WHERE change <> 'deleted' ORDER BY pkg DESC`)
	if err != nil {
		return nil, errclass.Fatalf("plan: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var pkg int
		if err := rows.Scan(&pkg); err != nil {
			return nil, errclass.Fatalf("plan: %w", err)
		}
		out = append(out, pkg)
	}
	if err := rows.Err(); err != nil {
		return nil, errclass.Fatalf("plan: %w", err)
	}
	return out, nil
}

// PutsIn calls fn with every winning create or update of package pkg, in
// manifest order.
func (p *Plan) PutsIn(ctx context.Context, pkg int, fn func(Planned) error) error {
	return p.winners(ctx, pageQuery{where: "pkg = ? AND change <> 'deleted'", args: []any{pkg}, keys: []string{"seq"}}, fn)
}

// Newest returns the newest change time read from each package, by index.
func (p *Plan) Newest(ctx context.Context) (map[int]time.Time, error) {
	out := map[int]time.Time{}
	rows, err := p.db.QueryContext(ctx, `SELECT pkg, MAX(time) FROM changes GROUP BY pkg`)
	if err != nil {
		return nil, errclass.Fatalf("plan: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pkg int
		var t int64
		if err := rows.Scan(&pkg, &t); err != nil {
			return nil, errclass.Fatalf("plan: %w", err)
		}
		out[pkg] = time.Unix(0, t).UTC()
	}
	if err := rows.Err(); err != nil {
		return nil, errclass.Fatalf("plan: %w", err)
	}
	return out, nil
}

// Counts returns how many changes were read and how many won.
func (p *Plan) Counts(ctx context.Context) (changes, winners int64, err error) {
	if err := p.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM changes), (SELECT count(*) FROM winners)`).Scan(&changes, &winners); err != nil {
		return 0, 0, errclass.Fatalf("plan: %w", err)
	}
	return changes, winners, nil
}

// winners pages through the winners table with q (its text and from are
// set here).
func (p *Plan) winners(ctx context.Context, q pageQuery, fn func(Planned) error) error {
	q.text, q.from = "rec", "winners"
	return p.page(ctx, q, func(text string, pkg int) error {
		var r source.Record
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			return errclass.Fatalf("plan: %w", err)
		}
		return fn(Planned{Pkg: pkg, Rec: &r})
	})
}

// pageQuery is a query page runs: the JSON column text and the package
// index of the rows of table from that match where (with args), in the
// order of keys, which together must be unique.
type pageQuery struct {
	text, from, where string
	args              []any
	keys              []string
}

// page runs q a page at a time, so that fn may take its time without
// holding the plan's single connection. Each page starts after the last
// row's keys (keyset paging), so that reading n rows costs O(n log n)
// whatever n, where OFFSET paging costs O(n²).
func (p *Plan) page(ctx context.Context, q pageQuery, fn func(text string, pkg int) error) error {
	size := cmp.Or(p.PageSize, 1000)
	keys := strings.Join(q.keys, ", ")
	where := cmp.Or(q.where, "1")
	first := fmt.Sprintf(`SELECT %s, pkg, %s FROM %s WHERE (%s) ORDER BY %s LIMIT ?`, q.text, keys, q.from, where, keys)
	next := fmt.Sprintf(`SELECT %s, pkg, %s FROM %s WHERE (%s) AND (%s) > (%s) ORDER BY %s LIMIT ?`,
		q.text, keys, q.from, where, keys, strings.TrimSuffix(strings.Repeat("?,", len(q.keys)), ","), keys)
	type row struct {
		text string
		n    int
	}
	var last []any
	for {
		query, args := first, slices.Concat(q.args, []any{size})
		if last != nil {
			query, args = next, slices.Concat(q.args, last, []any{size})
		}
		rows, err := p.db.QueryContext(ctx, query, args...)
		if err != nil {
			return errclass.Fatalf("plan: %w", err)
		}
		var batch []row
		for rows.Next() {
			var r row
			key := make([]any, len(q.keys))
			dest := []any{&r.text, &r.n}
			for i := range key {
				dest = append(dest, &key[i])
			}
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return errclass.Fatalf("plan: %w", err)
			}
			batch, last = append(batch, r), key
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return errclass.Fatalf("plan: %w", err)
		}
		for _, r := range batch {
			if err := fn(r.text, r.n); err != nil {
				return err
			}
		}
		if len(batch) < size {
			return nil
		}
	}
}

// Close closes the plan and removes its file.
func (p *Plan) Close() error {
	var err error
	if p.db != nil {
		err = p.db.Close()
	}
	if rmErr := os.Remove(p.path); rmErr != nil && !os.IsNotExist(rmErr) && err == nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("plan: close: %w", err)
	}
	return nil
}

// Has reports whether the plan holds a change of uri (after Decide).
func (p *Plan) Has(ctx context.Context, uri string) (bool, error) {
	var n int
	if err := p.db.QueryRowContext(ctx, "SELECT count(*) FROM winners WHERE uri = ?", uri).Scan(&n); err != nil {
		return false, errclass.Fatalf("plan: %w", err)
	}
	return n > 0, nil
}
