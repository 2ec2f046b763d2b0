package state

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// Plan is the scratch database of one incremental run: every change in the
// run's range, as read from the Change Dump manifests, so that the latest
// change of each resource (its "winner") is found on disk rather than in
// memory, and independently of the order in which packages were read. A Plan
// lives in its own file, removed by Close; it is not part of the state.
type Plan struct {
	path string
	db   *sql.DB
	ins  *sql.Stmt
}

// PlannedChange is one change entry of a Change Dump manifest.
type PlannedChange struct {
	URI    string
	Time   time.Time // the change's datetime (rs:md datetime, else lastmod)
	Change string    // created, updated or deleted
	// Package is the package's URL; PackageFrom its rs:md from, used with
	// Seq (the entry's position in its manifest) to order changes of equal
	// Time deterministically.
	Package     string
	PackageFrom time.Time
	Seq         int64
	Path        string
	Hashes      fixity.Hashes
	Length      int64
	Type        string
	Lastmod     time.Time
}

// NewPlan creates an empty plan in a new file under dir.
func NewPlan(ctx context.Context, dir string) (*Plan, error) {
	f, err := os.CreateTemp(dir, "rsharvest-plan-*.db")
	if err != nil {
		return nil, errclass.Fatalf("plan: %w", err)
	}
	f.Close()
	abs, _ := filepath.Abs(f.Name())
	p := &Plan{path: abs}
	db, err := sql.Open("sqlite", dsn(abs, url.Values{"_pragma": {"journal_mode(OFF)", "synchronous(OFF)", "temp_store(FILE)"}}))
	if err != nil {
		os.Remove(abs)
		return nil, errclass.Fatalf("plan: %w", err)
	}
	db.SetMaxOpenConns(1)
	p.db = db
	const schema = `CREATE TABLE changes (
		uri TEXT NOT NULL, time INTEGER NOT NULL, change TEXT NOT NULL,
		package TEXT NOT NULL, package_from INTEGER NOT NULL, seq INTEGER NOT NULL,
		path TEXT, md5 TEXT, sha1 TEXT, sha256 TEXT, hash_other TEXT, length INTEGER NOT NULL,
		type TEXT, lastmod INTEGER)`
	if _, err := db.ExecContext(ctx, schema); err != nil {
		p.Close()
		return nil, errclass.Fatalf("plan: %w", err)
	}
	p.ins, err = db.PrepareContext(ctx, `INSERT INTO changes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
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

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Add records changes, in one transaction.
func (p *Plan) Add(ctx context.Context, cs []PlannedChange) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	defer tx.Rollback()
	st := tx.StmtContext(ctx, p.ins)
	for i := range cs {
		c := &cs[i]
		if _, err := st.ExecContext(ctx, c.URI, nanos(c.Time), c.Change, c.Package, nanos(c.PackageFrom), c.Seq,
			c.Path, encodeDigest(c.Hashes.MD5), encodeDigest(c.Hashes.SHA1), encodeDigest(c.Hashes.SHA256), encodeOther(c.Hashes),
			c.Length, c.Type, nanos(c.Lastmod)); err != nil {
			return errclass.Fatalf("plan: add %s: %w", c.URI, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	return nil
}

// Decide computes the winner of every resource: its latest change by
// (Time, PackageFrom, Package, Seq). Call it once, after every Add.
func (p *Plan) Decide(ctx context.Context) error {
	const q = `CREATE TABLE winners AS SELECT * FROM (
		SELECT *, ROW_NUMBER() OVER (PARTITION BY uri ORDER BY time DESC, package_from DESC, package DESC, seq DESC) AS rn,
			0 AS held
		FROM changes) WHERE rn = 1;
		CREATE INDEX winners_package ON winners (package, seq);
		CREATE INDEX winners_uri ON winners (uri);`
	if _, err := p.db.ExecContext(ctx, q); err != nil {
		return errclass.Fatalf("plan: decide: %w", err)
	}
	return nil
}

// WinnerPackages returns the packages holding at least one winning
// created/updated change, that is the packages worth downloading.
func (p *Plan) WinnerPackages(ctx context.Context) ([]string, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT DISTINCT package FROM winners WHERE change <> 'deleted' AND held = 0 ORDER BY package_from, package`)
	if err != nil {
		return nil, errclass.Fatalf("plan: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, errclass.Fatalf("plan: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, errclass.Fatalf("plan: %w", err)
	}
	return out, nil
}

// Deletes calls fn with every winning delete, in URI order.
func (p *Plan) Deletes(ctx context.Context, fn func(PlannedChange) error) error {
	return p.each(ctx, fn, `WHERE change = 'deleted' ORDER BY uri`)
}

// WinnersIn calls fn with every winning created/updated change of one
// package that is not marked held, in manifest order.
func (p *Plan) WinnersIn(ctx context.Context, pkg string, fn func(PlannedChange) error) error {
	return p.each(ctx, fn, `WHERE package = ? AND change <> 'deleted' AND held = 0 ORDER BY seq`, pkg)
}

// Puts calls fn with every winning created/updated change, in URI order.
func (p *Plan) Puts(ctx context.Context, fn func(PlannedChange) error) error {
	return p.each(ctx, fn, `WHERE change <> 'deleted' ORDER BY uri`)
}

// MarkHeld marks the winners of uris as already held by the destination:
// WinnerPackages and WinnersIn leave them out.
func (p *Plan) MarkHeld(ctx context.Context, uris []string) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	defer tx.Rollback()
	for _, u := range uris {
		if _, err := tx.ExecContext(ctx, `UPDATE winners SET held = 1 WHERE uri = ?`, u); err != nil {
			return errclass.Fatalf("plan: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	return nil
}

// Counts returns how many changes were planned and how many won.
func (p *Plan) Counts(ctx context.Context) (changes, winners int64, err error) {
	if err := p.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM changes), (SELECT count(*) FROM winners)`).Scan(&changes, &winners); err != nil {
		return 0, 0, errclass.Fatalf("plan: %w", err)
	}
	return changes, winners, nil
}

func (p *Plan) each(ctx context.Context, fn func(PlannedChange) error, where string, args ...any) error {
	// Read a page at a time, so that fn may take its time without holding
	// the plan's single connection.
	const page = 1000
	q := `SELECT uri, time, change, package, package_from, seq, path, md5, sha1, sha256, hash_other, length, type, lastmod FROM winners ` +
		where + ` LIMIT ? OFFSET ?`
	for offset := int64(0); ; {
		rows, err := p.db.QueryContext(ctx, q, append(append([]any{}, args...), page, offset)...)
		if err != nil {
			return errclass.Fatalf("plan: %w", err)
		}
		var batch []PlannedChange
		for rows.Next() {
			var c PlannedChange
			var t, pf, lm int64
			var path, typ sql.NullString
			var md5, sha1, sha256, other sql.NullString
			if err := rows.Scan(&c.URI, &t, &c.Change, &c.Package, &pf, &c.Seq, &path, &md5, &sha1, &sha256, &other, &c.Length, &typ, &lm); err != nil {
				rows.Close()
				return errclass.Fatalf("plan: %w", err)
			}
			c.Time, c.PackageFrom, c.Lastmod = fromNanos(t), fromNanos(pf), fromNanos(lm)
			c.Path, c.Type = path.String, typ.String
			h, err := decodeHashes(md5, sha1, sha256, other)
			if err != nil {
				rows.Close()
				return errclass.Fatalf("plan: %w", err)
			}
			c.Hashes = h
			batch = append(batch, c)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return errclass.Fatalf("plan: %w", err)
		}
		for _, c := range batch {
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(batch) < page {
			return nil
		}
		offset += int64(len(batch))
	}
}

// Close closes the plan and removes its file.
func (p *Plan) Close() error {
	var err error
	if p.ins != nil {
		p.ins.Close()
	}
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
