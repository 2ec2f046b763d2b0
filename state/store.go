// Package state is rsharvest's state store: a single SQLite file, or a
// PostgreSQL database several machines share, that records what the
// destination holds and how it got there.
//
// It keeps
//   - runs: one row per harvest run (the harvest log), with its final status
//     and a JSON report;
//   - resources: the current state of every resource, keyed by its source
//     and URI (fixity, type, lastmod, the datetime of the change that
//     produced it, a tombstone when it was deleted at the source, HTTP
//     validators), and the per-sink deliveries of those not every sink has;
//   - failures: the detail log of per-item failures of a run, temporary or
//     permanent;
//   - checkpoints: per source and capability list, where the next incremental
//     run starts;
//   - changes: an append-only log of the changes the destination applied.
//
// Writes go through one connection and are transactions: Commit (and every
// method built on it) is atomic, so a process killed mid-commit leaves either
// the whole batch or none of it. Reads use a separate pool of read-only
// connections and, thanks to SQLite's WAL mode, neither block nor are
// blocked by the writer. A Store is safe for concurrent use.
//
// Kept in PostgreSQL (Open of a postgres:// URL), the store is the same:
// the same queries (written once, their ? placeholders numbered for
// PostgreSQL), its own migrations, write transactions serialised by an
// advisory lock taken when they begin, snapshots in REPEATABLE READ
// transactions.
//
// Every error this package returns is classified fatal (errclass): a state
// store that cannot read or write stops the run. (A store kept in
// PostgreSQL whose connection to the server is lost gives retryable
// errors instead: the run stops, and may be tried again once the server
// answers.) The exceptions are the
// errors of the functions given to View and to the walks (WalkResources,
// Snapshot.WalkResources, Snapshot.WalkChanges), passed through as they
// are, and the site registry's errors wrapping ErrNoSite, which are not
// classified.
//
// Times are stored as fixed-width UTC RFC 3339 text with nanoseconds
// ("2006-01-02T15:04:05.000000000Z"), which sorts chronologically; the zero
// time is stored as NULL. Times come back in UTC, equal (time.Time.Equal) to
// what was stored. Times outside the years 0000–9999 are rejected. The one
// exception is the change log's stamps (ChangeRecord.Recorded), which
// Commit makes: integers, microseconds since the Unix epoch, unique and
// strictly increasing in commit order.
package state

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/retry"
	"github.com/rsharvest/rsharvest/internal/sqlitefile"
)

// ErrNotFound is wrapped by the error of a lookup that names a row that does
// not exist (Run, FinishRun).
var ErrNotFound = errors.New("not found")

// ErrNotStateFile is wrapped by Open's error when the file is not an
// rsharvest state store: not an SQLite database, a damaged one, or an SQLite
// database of another application.
var ErrNotStateFile = errors.New("not an rsharvest state store")

// ErrSchemaNewer is wrapped by Open's error when the file was written by a
// newer rsharvest whose schema this version does not know.
var ErrSchemaNewer = errors.New("state store schema is newer than this program")

// applicationID marks an SQLite file as an rsharvest state store ("rshv").
const applicationID = 0x72736876

// Store is an open state store. Its methods are safe for concurrent use.
// No method may be called after Close.
type Store struct {
	path    string // the file, or the database's URL without its password
	dialect dialect
	// pgConfig is the PostgreSQL database's configuration, nil for a file.
	pgConfig *pgx.ConnConfig
	w        *sql.DB // one connection: every write, serialised
	r        *sql.DB // read-only connections: lookups, lists, walks
	// allowReadable: a file other users may read is opened (Open's
	// AllowReadable).
	allowReadable bool

	getResource      *sql.Stmt   // on r
	upsertResource   multiInsert // on w
	insertFailure    *sql.Stmt   // on w
	insertChange     multiInsert // on w
	upsertCheckpoint *sql.Stmt   // on w

	lock *FileLock // held by OpenExclusive's store until Close

	leaseDB  *sql.DB // the connections holding leases, nil for a file (see Lease)
	leaseMu  sync.Mutex
	leases   map[string]*Lease // a file's leases, held in this process
	pgLeases map[*Lease]bool   // PostgreSQL's leases held, released by Close

	clock func() time.Time // time.Now; tests set it back
}

// Open opens the state store at path, creating the file if it does not
// exist, and brings its schema up to date (migrations are applied in order,
// in one transaction). The database is put in WAL mode; connections use
// synchronous=NORMAL, a 10 s busy timeout and foreign keys, and write
// transactions take SQLite's write lock when they begin (BEGIN IMMEDIATE),
// so that writers from several processes are serialised.
//
// A file that is not an SQLite database, is damaged, or belongs to another
// application gives an error wrapping ErrNotStateFile; a file with a newer
// schema gives one wrapping ErrSchemaNewer. Such files are not modified. All
// errors are fatal and name the file. The directory must exist; in-memory
// databases are not supported.
//
// A path that is a PostgreSQL URL (IsPostgres: postgres://user@host/db?…,
// pgx's syntax; the password may come from $PGPASSWORD or ~/.pgpass) opens
// the store kept in that database, in the connection's current schema: a
// schema holding another application's tables gives an error wrapping
// ErrNotStateFile.
//
// The file is private to its owner: a new one is made with mode 0600, and
// one other users may read is refused (ErrReadable) unless opts include
// AllowReadable.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, errclass.Fatalf("state: open %q: a file path is required", path)
	}
	if IsPostgres(path) {
		s := &Store{path: Redacted(path), clock: time.Now}
		if err := s.openPostgres(ctx, path); err != nil {
			s.closeAll()
			return nil, errclass.Fatalf("state: open %s: %w", s.path, redactError(err, path))
		}
		return s, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errclass.Fatalf("state: open %s: %w", path, err)
	}
	if err := privateFile(abs, optionsOf(opts).allowReadable); err != nil {
		return nil, err
	}
	if err := sqliteHeader(abs); err != nil {
		return nil, errclass.Fatalf("state: open %s: %w", path, err)
	}
	s := &Store{path: path, clock: time.Now, dialect: sqliteDialect(), allowReadable: optionsOf(opts).allowReadable}
	if err := s.open(ctx, abs); err != nil {
		s.closeAll()
		return nil, errclass.Fatalf("state: open %s: %w", path, err)
	}
	return s, nil
}

// OpenExclusive takes the state file's lock for one run (see Lock: at once,
// or waiting up to wait) and then opens it as Open does; Close releases the
// lock. command says what the run is, for a run that finds the file in use.
// A store kept in PostgreSQL is shared by several processes and machines
// at once and takes no such lock: OpenExclusive opens it as Open does, and
// its harvests keep apart by their leases (Lease).
func OpenExclusive(ctx context.Context, path, command string, wait time.Duration, opts ...Option) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, errclass.Fatalf("state: open %q: a file path is required", path)
	}
	if IsPostgres(path) {
		return Open(ctx, path, opts...)
	}
	if err := sqliteHeader(path); err != nil {
		// Before the lock: no lock file beside what is not a state file.
		return nil, errclass.Fatalf("state: open %s: %w", path, err)
	}
	_, statErr := os.Stat(LockPath(path))
	lock, err := Lock(ctx, path, command, wait)
	if err != nil {
		return nil, err
	}
	// The write-ahead log is beside the file SQLite opens: the one a
	// symbolic link names.
	abs, _ := filepath.Abs(path)
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	_, walErr := os.Stat(abs + "-wal")
	s, err := Open(ctx, path, opts...)
	if err != nil {
		if errors.Is(err, ErrNotStateFile) && errors.Is(statErr, fs.ErrNotExist) {
			os.Remove(LockPath(path)) // made for nothing: not left beside it
		}
		lock.Unlock()
		return nil, err
	}
	s.lock = lock
	if walErr == nil {
		// Its last user did not close it (this run holds the lock, and
		// the write-ahead log is still there): killed, or a machine that
		// lost power. A quick check, before anything is trusted.
		problems, err := s.Check(ctx, true)
		if err == nil {
			err = damaged(path, problems)
		}
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// dialect is what differs between a store kept in SQLite and one kept in
// PostgreSQL; the queries do not.
type dialect struct {
	// migrations are the schema's migrations (see migrations).
	migrations func() []string
	// claim marks the database as the store's, in migrate's transaction.
	claim func(ctx context.Context, tx *sql.Tx) error
	// writeLock, when not "", is the statement every write transaction
	// runs first, taking the lock that serialises writers (SQLite's
	// writers take it with BEGIN IMMEDIATE).
	writeLock string
	// sharedLock and sourceLock, when not "" (PostgreSQL), begin a
	// write transaction of some sources' rows alone (beginSources): the
	// first takes the write lock shared, the second each source's own lock
	// (its one argument the source). Commits of different sources then
	// run at once, and change stamps increase in commit order per source
	// (see stampChanges).
	sharedLock, sourceLock string
	// snapshot are the options of View's transaction.
	snapshot sql.TxOptions
}

// sqliteDialect is the store kept in an SQLite file.
func sqliteDialect() dialect {
	return dialect{migrations: migrations, claim: claimSQLite, snapshot: sql.TxOptions{ReadOnly: true}}
}

// beginWrite begins a write transaction, holding the lock that serialises
// the store's writers, across processes, until it ends.
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil || s.dialect.writeLock == "" {
		return tx, err
	}
	if _, err := tx.ExecContext(ctx, s.dialect.writeLock); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return tx, nil
}

// beginSources begins a write transaction of the rows of the sources
// that sources returns alone, sorted (see Batch.sources); it is asked only
// on PostgreSQL. There it holds the write lock shared and each source's
// own lock, in order, until it ends: commits of different sources run at
// once, while every other writer (beginWrite) still waits for them all,
// and they for it. Without sources, or on SQLite, it is beginWrite.
func (s *Store) beginSources(ctx context.Context, sources func() []string) (*sql.Tx, error) {
	if s.dialect.sourceLock == "" {
		return s.beginWrite(ctx)
	}
	srcs := sources()
	if len(srcs) == 0 {
		return s.beginWrite(ctx)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, s.dialect.sharedLock); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	for _, src := range srcs {
		if _, err := tx.ExecContext(ctx, s.dialect.sourceLock, src); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
	}
	return tx, nil
}

func (s *Store) open(ctx context.Context, abs string) error {
	// journal_mode is deliberately not a DSN parameter: it is persistent, and
	// a foreign or damaged file must be rejected before anything changes it.
	// wal_autocheckpoint: the commit that takes the write-ahead log past
	// this many pages (4 KiB each) copies them into the file. At SQLite's
	// default, 1000, a baseline's commits checkpoint every few batches,
	// copying the same index pages again each time; 8192 (32 MiB of log)
	// copies each about once in eight, at the same durability.
	wp := url.Values{
		"_pragma": {"busy_timeout(10000)", "synchronous(NORMAL)", "foreign_keys(1)", "wal_autocheckpoint(8192)"},
		"_txlock": {"immediate"},
	}
	w, err := sqlitefile.Open(abs, wp, 1)
	if err != nil {
		return err
	}
	s.w = w

	id, err := s.checkIdentity(ctx)
	if err != nil {
		return notStateFile(err)
	}
	if err := s.checkPrivate(abs, id); err != nil {
		return err
	}
	if err := s.setWAL(ctx); err != nil {
		return err
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	// A commit's multi-row inserts keep a statement journal, which SQLite
	// writes to a temporary file (in /var/tmp, on the disk) once past
	// 64 KiB: about 1.4 pages a record. The writer's statements are a
	// batch each, so their journals are kept in memory; migrations, which
	// may sort whole tables, ran before, with temporary files.
	if _, err := s.w.ExecContext(ctx, "PRAGMA temp_store = MEMORY"); err != nil {
		return err
	}

	n := max(4, runtime.GOMAXPROCS(0))
	rp := url.Values{"_pragma": {"busy_timeout(10000)", "query_only(1)"}}
	r, err := sqlitefile.Open(abs, rp, n)
	if err != nil {
		return err
	}
	s.r = r
	if err := r.PingContext(ctx); err != nil {
		return fmt.Errorf("open readers: %w", err)
	}
	return s.prepare(ctx)
}

// checkIdentity rejects files that are not SQLite databases or that belong
// to another application, reading only.
func (s *Store) checkIdentity(ctx context.Context) (int64, error) {
	// One statement, so both figures come from one snapshot: another
	// process may be creating the schema meanwhile.
	var id, objects int64
	if err := s.w.QueryRowContext(ctx, "SELECT (SELECT application_id FROM pragma_application_id()), (SELECT count(*) FROM sqlite_schema)").Scan(&id, &objects); err != nil {
		return 0, err
	}
	if id == applicationID || (id == 0 && objects == 0) {
		return id, nil
	}
	return 0, fmt.Errorf("%w (application id %#x, %d schema objects)", ErrNotStateFile, id, objects)
}

// checkPrivate applies the rule of privateFile with the application id the
// database itself gives (id, from checkIdentity), which the file's header
// may not hold yet (in WAL mode it is in the log until a checkpoint): a
// state store other users may read is refused, and an empty database
// about to be made one is made private first.
func (s *Store) checkPrivate(abs string, id int64) error {
	fi, err := os.Stat(abs)
	if err != nil || fi.Mode().Perm()&0o077 == 0 || s.allowReadable {
		return nil
	}
	if id == applicationID {
		if fi.Mode().Perm()&0o044 == 0 {
			return nil
		}
		return readableError(abs, fi.Mode().Perm())
	}
	for _, p := range []string{abs, abs + "-wal", abs + "-shm", abs + "-journal"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fileError(p, err)
		}
	}
	return nil
}

// setWAL puts the database in WAL mode. Processes opening a fresh file at
// once can deadlock on the lock upgrade this needs; SQLite then answers
// SQLITE_BUSY at once instead of waiting busy_timeout. That answer is
// retried with backoff for about 10 s; any other error is returned at once.
func (s *Store) setWAL(ctx context.Context) error {
	return retry.Do(ctx, retry.Policy{
		Retries:   60, // 5 ms growing to 200 ms: about 10 s in all
		Initial:   5 * time.Millisecond,
		Max:       200 * time.Millisecond,
		Retryable: sqlitefile.Busy,
	}, func() error {
		var mode string
		err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		switch {
		case err != nil:
			return fmt.Errorf("set WAL mode: %w", err)
		case mode != "wal":
			return fmt.Errorf("set WAL mode: journal mode is %q", mode)
		}
		return nil
	})
}

// sqliteHeader checks that the file at path, when it exists and is not
// empty, begins as an SQLite database does; its error wraps
// ErrNotStateFile.
func sqliteHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // missing (Open makes it) or unreadable (Open says why)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (not a regular file: %s)", ErrNotStateFile, fi.Mode().Type())
	}
	head := make([]byte, 16)
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0:
		return nil // empty: Open makes it a state store
	case err != nil || string(head) != "SQLite format 3\x00":
		return fmt.Errorf("%w (not an SQLite database)", ErrNotStateFile)
	}
	return nil
}

// notStateFile words the errors SQLite gives for a file that is not a
// database, or is damaged, as the store's own (wrapping ErrNotStateFile),
// without SQLite's codes.
func notStateFile(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 26: // SQLITE_NOTADB
			return fmt.Errorf("%w (not an SQLite database)", ErrNotStateFile)
		case 11: // SQLITE_CORRUPT
			return damagedFile{}
		}
	}
	return err
}

// damagedFile is the error of a file SQLite finds damaged as it opens:
// not a state store it can read (ErrNotStateFile), and damaged
// (ErrDamaged), which state check looks at as a plain database.
type damagedFile struct{}

func (damagedFile) Error() string {
	return ErrNotStateFile.Error() + " (the database is damaged: rsharvest state check says more)"
}

func (damagedFile) Unwrap() []error { return []error{ErrNotStateFile, ErrDamaged} }

func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		db    *sql.DB
		dst   **sql.Stmt
		query string
	}{
		{s.r, &s.getResource, selectResource + " WHERE source = ? AND uri = ?"},
		{s.w, &s.insertFailure, insertFailureSQL},
		{s.w, &s.upsertCheckpoint, upsertCheckpointSQL},
	} {
		st, err := p.db.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.dst = st
	}
	if err := s.upsertResource.prepare(ctx, s.w, resourceCols, upsertResourcesWith); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := s.insertChange.prepare(ctx, s.w, changeCols, insertChangesWith); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	return nil
}

// Close releases the store's connections. With WAL mode, closing the last
// connection checkpoints the log into the database file. Close must be
// called once, after every other call has returned.
func (s *Store) Close() error {
	err := s.closeAll()
	if s.lock != nil {
		err = errors.Join(err, s.lock.Unlock()) // after the last write
		s.lock = nil
	}
	if err != nil {
		return errclass.Fatalf("state: close %s: %w", s.path, err)
	}
	return nil
}

func (s *Store) closeAll() error {
	var errs []error
	s.leaseMu.Lock()
	held := slices.Collect(maps.Keys(s.pgLeases))
	s.leaseMu.Unlock()
	for _, l := range held {
		errs = append(errs, l.Release()) // the holder is leaving
	}
	stmts := append(s.upsertResource.statements(), s.insertChange.statements()...)
	for _, st := range append(stmts, s.getResource, s.insertFailure, s.upsertCheckpoint) {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.leaseDB != nil {
		errs = append(errs, s.leaseDB.Close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	return errors.Join(errs...)
}

// fatal wraps err from operation op as a fatal state store error — or, when
// the connection to a PostgreSQL server was lost (the server restarting,
// the network cut), a retryable one: what was being done did not happen,
// or happened whole (a commit whose answer was lost), and the harvest may
// be tried again once the server answers.
func fatal(op string, err error) error {
	if connectionLost(err) {
		return errclass.Retryablef("state: %s: %w", op, err)
	}
	return errclass.Fatalf("state: %s: %w", op, err)
}

// connectionLost reports whether err says that the connection to the
// PostgreSQL server was lost or could not be made: a network error, a
// connection cut in the middle of a reply, or the server's own connection
// exceptions (SQLSTATE class 08), want of resources (class 53: too many
// clients) and shutdowns (57P01–57P03).
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 08: connection; 53: insufficient resources (too many clients,
		// out of memory or disk: a passing state of the server); 57P0x:
		// the server shut down or not yet up.
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}
