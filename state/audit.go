package state

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/internal/sqlitefile"
)

// Inventory is a scratch database listing what a source publishes, so that
// an audit can compare it with what the destination holds without keeping
// either side in memory. It lives in its own file, removed by Close.
type Inventory struct {
	path string
	db   *sql.DB
}

// Listed is one resource a source lists, with its published fixity.
type Listed struct {
	URI    string
	Length int64
	Hashes fixity.Hashes
	Where  string // the document or package listing it
}

// NewInventory creates an empty inventory in a new file under dir.
func NewInventory(ctx context.Context, dir string) (*Inventory, error) {
	f, err := os.CreateTemp(dir, "rsharvest-audit-*.db")
	if err != nil {
		return nil, errclass.Fatalf("inventory: %w", err)
	}
	f.Close()
	abs, _ := filepath.Abs(f.Name())
	db, err := sqlitefile.Open(abs, url.Values{"_pragma": {"journal_mode(OFF)", "synchronous(OFF)"}}, 1)
	if err != nil {
		os.Remove(abs)
		return nil, errclass.Fatalf("inventory: %w", err)
	}
	inv := &Inventory{path: abs, db: db}
	if _, err := db.ExecContext(ctx, `CREATE TABLE listed (uri TEXT PRIMARY KEY, length INTEGER NOT NULL, md5 TEXT, sha1 TEXT, sha256 TEXT, place TEXT NOT NULL) WITHOUT ROWID;
		CREATE TABLE held (uri TEXT NOT NULL, sink TEXT NOT NULL, PRIMARY KEY (uri, sink)) WITHOUT ROWID;`); err != nil {
		inv.Close()
		return nil, errclass.Fatalf("inventory: %w", err)
	}
	return inv, nil
}

// AddListed records resources the source lists (a later entry for the same
// URI replaces an earlier one).
func (inv *Inventory) AddListed(ctx context.Context, ls []Listed) error {
	tx, err := inv.db.BeginTx(ctx, nil)
	if err != nil {
		return errclass.Fatalf("inventory: %w", err)
	}
	defer tx.Rollback()
	for _, l := range ls {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO listed VALUES (?, ?, ?, ?, ?, ?)`, l.URI, l.Length,
			encodeDigest(l.Hashes.MD5), encodeDigest(l.Hashes.SHA1), encodeDigest(l.Hashes.SHA256), l.Where); err != nil {
			return errclass.Fatalf("inventory: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return errclass.Fatalf("inventory: %w", err)
	}
	return nil
}

// Lookup returns what the source lists for uri.
func (inv *Inventory) Lookup(ctx context.Context, uri string) (Listed, bool, error) {
	l := Listed{URI: uri}
	var md5, sha1, sha256 sql.NullString
	err := inv.db.QueryRowContext(ctx, `SELECT length, md5, sha1, sha256, place FROM listed WHERE uri = ?`, uri).Scan(&l.Length, &md5, &sha1, &sha256, &l.Where)
	if err == sql.ErrNoRows {
		return Listed{}, false, nil
	}
	if err != nil {
		return Listed{}, false, errclass.Fatalf("inventory: %w", err)
	}
	if l.Hashes, err = decodeHashes(md5, sha1, sha256, sql.NullString{}); err != nil {
		return Listed{}, false, errclass.Fatalf("inventory: %w", err)
	}
	return l, true, nil
}

// MarkHeld records that sink holds uri.
func (inv *Inventory) MarkHeld(ctx context.Context, uri, sink string) error {
	if _, err := inv.db.ExecContext(ctx, `INSERT OR IGNORE INTO held VALUES (?, ?)`, uri, sink); err != nil {
		return errclass.Fatalf("inventory: %w", err)
	}
	return nil
}

// Held reports whether sink holds uri (MarkHeld).
func (inv *Inventory) Held(ctx context.Context, uri, sink string) (bool, error) {
	var one int
	err := inv.db.QueryRowContext(ctx, `SELECT 1 FROM held WHERE uri = ? AND sink = ?`, uri, sink).Scan(&one)
	if err == sql.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, errclass.Fatalf("inventory: %w", err)
	}
	return true, nil
}

// Missing calls fn with every listed resource that sink does not hold, in
// URI order.
func (inv *Inventory) Missing(ctx context.Context, sink string, fn func(Listed) error) error {
	const page = 1000
	for offset := 0; ; offset += page {
		rows, err := inv.db.QueryContext(ctx, `SELECT uri, place FROM listed WHERE uri NOT IN (SELECT uri FROM held WHERE sink = ?) ORDER BY uri LIMIT ? OFFSET ?`, sink, page, offset)
		if err != nil {
			return errclass.Fatalf("inventory: %w", err)
		}
		var batch []Listed
		for rows.Next() {
			var l Listed
			if err := rows.Scan(&l.URI, &l.Where); err != nil {
				rows.Close()
				return errclass.Fatalf("inventory: %w", err)
			}
			batch = append(batch, l)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return errclass.Fatalf("inventory: %w", err)
		}
		for _, l := range batch {
			if err := fn(l); err != nil {
				return err
			}
		}
		if len(batch) < page {
			return nil
		}
	}
}

// Count returns the number of listed resources.
func (inv *Inventory) Count(ctx context.Context) (int64, error) {
	var n int64
	if err := inv.db.QueryRowContext(ctx, `SELECT count(*) FROM listed`).Scan(&n); err != nil {
		return 0, errclass.Fatalf("inventory: %w", err)
	}
	return n, nil
}

// Close closes the inventory and removes its file.
func (inv *Inventory) Close() error {
	err := inv.db.Close()
	os.Remove(inv.path)
	return err
}

// ForgetResources removes the records of uris from source, so that the
// next sync fetches them again (audit repair), and every package record
// with them. fence, when not nil, is the source's lease the caller holds
// (see MarkInterrupted): one another harvest has taken since refuses it.
func (s *Store) ForgetResources(ctx context.Context, source string, uris []string, fence *Lease) error {
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return fatal("forget", err)
	}
	defer tx.Rollback()
	if err := s.fenced(ctx, tx, fence); err != nil {
		return fatal("forget", err)
	}
	if len(uris) > 0 {
		// A package record stands for its resources' records.
		if _, err := tx.ExecContext(ctx, "DELETE FROM packages"); err != nil {
			return fatal("forget", err)
		}
	}
	for _, u := range uris {
		if _, err := tx.ExecContext(ctx, "DELETE FROM resources WHERE source = ? AND uri = ?", source, u); err != nil {
			return fatal("forget", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM deliveries WHERE source = ? AND uri = ?", source, u); err != nil {
			return fatal("forget", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fatal("forget", err)
	}
	return nil
}
