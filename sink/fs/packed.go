package fs

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/sqlitefile"
	"github.com/rsharvest/rsharvest/sink"
)

var (
	_ sink.Sink      = (*Packed)(nil)
	_ sink.Inventory = (*Packed)(nil)
	_ sink.Batcher   = (*Packed)(nil)
	_ sink.Limiter   = (*Packed)(nil)
	_ sink.Local     = (*Packed)(nil)
)

// Layout is how an fs sink lays its resources out in its directory.
type Layout string

const (
	// LayoutFiles, the default, holds each resource as a file of its own
	// (see the package documentation).
	LayoutFiles Layout = "files"
	// LayoutPacked holds every resource as a row of one SQLite database,
	// PackedFile in the directory (see Packed).
	LayoutPacked Layout = "packed"
)

// PackedFile is the name of the packed layout's database in its directory.
const PackedFile = "records.sqlite"

const (
	// DefaultMaxPacked bounds one body of the packed layout (see
	// Options.MaxPacked), and MaxMaxPacked bounds that bound: SQLite
	// refuses a blob past 1,000,000,000 bytes, and the body is held in
	// memory.
	DefaultMaxPacked = 16 << 20
	MaxMaxPacked     = 512 << 20
	// packedFlushBytes and packedFlushOps bound what Put queues before it
	// writes the queue itself, without waiting for a Flush.
	packedFlushBytes = 8 << 20
	packedFlushOps   = 4096
	// packedWalkPage is how many URIs Walk reads at a time.
	packedWalkPage = 1000
	// packedAppID marks a packed mirror's database (PRAGMA application_id:
	// "rshp").
	packedAppID = 0x72736870
)

// packedSchema is the packed layout's table: one row a resource, with the
// Capability List (or OAI-PMH set) it was harvested in and the UTC day of
// its last modification, by which the index keeps a set's records of one
// day together.
const packedSchema = `
CREATE TABLE IF NOT EXISTS records (
	uri          TEXT PRIMARY KEY,
	resource_set TEXT NOT NULL,
	day          TEXT NOT NULL,
	lastmod      TEXT NOT NULL,
	type         TEXT NOT NULL,
	length       INTEGER NOT NULL,
	body         BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_day ON records (resource_set, day);
`

// Packed is the fs sink's packed layout, "--sink fs:DIR?layout=packed":
// every resource is a row of one SQLite database, DIR/records.sqlite (see
// PackedFile), instead of a file of its own. It is meant for sources of
// many small records (OAI-PMH, lists of small documents), where a file a
// record costs the disk an inode, a directory entry and a block each: the
// records of a batch are written together, in one transaction. The
// database is read with the sqlite3 command-line tool or any SQLite
// library, for example
//
//	sqlite3 DIR/records.sqlite "SELECT body FROM records WHERE uri = 'oai:x:1'"
//	sqlite3 DIR/records.sqlite "SELECT uri FROM records WHERE resource_set = '' AND day = '2024-05-01'"
//
// Put reads the body to its end into memory (at most Options.MaxPacked
// bytes; a larger body is a permanent failure) and queues the row; Delete
// queues the removal. Flush writes what is queued in one transaction, so
// that a batch's rows appear together or not at all; Put writes the queue
// itself past a few MiB. Get and Walk write the queue first. Close writes
// what is left. Packed is safe for concurrent use; more than one process
// on one directory is not supported, nor a directory several machines
// share (Options.Shared).
type Packed struct {
	dir  string
	w, r *sql.DB // the writer (one connection) and the readers
	opts Options
	log  *slog.Logger

	flushing sync.Mutex // held while a queue is written, so queues land in order
	mu       sync.Mutex // guards queue, queued and failed
	queue    []packedOp
	queued   int64
	failed   []sink.Failed
	closed   atomic.Bool
}

// packedOp is a queued write: a row to store, or (del) a URI to remove.
type packedOp struct {
	uri, set, day, lastmod, typ string
	body                        []byte
	del                         bool
}

// NewPacked opens the packed layout in dir, creating dir and its database
// when they do not exist. A directory that holds a mirror in the file
// layout, a database that is not a packed mirror's, or a shared directory
// is refused. Every failure is a fatal error.
func NewPacked(ctx context.Context, dir string, opts Options) (*Packed, error) {
	if dir == "" {
		return nil, errclass.Fatalf("fs sink: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, errclass.Fatalf("fs sink %q: %w", dir, err)
	}
	switch {
	case opts.Shared:
		return nil, errclass.Fatalf("fs sink %s: the packed layout cannot be shared by several machines (SQLite over a network file system)", abs)
	case opts.Concurrency < 0:
		return nil, errclass.Fatalf("fs sink %q: negative concurrency %d", dir, opts.Concurrency)
	case opts.Concurrency == 0:
		opts.Concurrency = 2 * runtime.GOMAXPROCS(0)
	}
	switch {
	case opts.MaxPacked <= 0:
		opts.MaxPacked = DefaultMaxPacked
	case opts.MaxPacked > MaxMaxPacked:
		return nil, errclass.Fatalf("fs sink %q: a packed body of at most %d bytes, more than the packed layout takes (%d)", dir, opts.MaxPacked, int64(MaxMaxPacked))
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, errclass.Fatalf("fs sink: %w", err)
	}
	if err := onlyPacked(abs); err != nil {
		return nil, errclass.Fatalf("fs sink %s: %w", abs, err)
	}
	s := &Packed{dir: abs, opts: opts, log: logger.With("sink", "fs:"+abs+"?layout=packed")}
	if err := s.open(ctx, filepath.Join(abs, PackedFile)); err != nil {
		_ = s.closeDBs()
		return nil, errclass.Fatalf("fs sink %s: %w", abs, err)
	}
	return s, nil
}

// onlyPacked fails when dir holds anything but the packed layout's files
// and hidden ones (the file layout's temporary directory, say): a mirror in
// the file layout, which the packed layout would not see; and when one of
// the packed layout's files is a symbolic link (or not a regular file).
func onlyPacked(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, PackedFile) && e.Type()&(iofs.ModeSymlink|iofs.ModeType) != 0 {
			// A link planted there would have the database written
			// wherever it points, outside the sink.
			return fmt.Errorf("%s is a symbolic link or not a regular file: refused, as the file layout refuses links", n)
		}
		if n := e.Name(); !strings.HasPrefix(n, PackedFile) && !strings.HasPrefix(n, ".") && n != "lost+found" {
			return fmt.Errorf("the directory holds %q, a mirror in the file layout: open it without layout=packed, or give the packed layout a directory of its own", n)
		}
	}
	return nil
}

// open opens the database at file, checks that it is a packed mirror's
// (or new) and creates its table.
func (s *Packed) open(ctx context.Context, file string) error {
	durability := "synchronous(NORMAL)"
	if s.opts.Fsync {
		durability = "synchronous(FULL)"
	}
	w, err := sqlitefile.Open(file, url.Values{"_pragma": {"busy_timeout(10000)", durability}, "_txlock": {"immediate"}}, 1)
	if err != nil {
		return err
	}
	s.w = w
	var id, objects int64
	if err := w.QueryRowContext(ctx, "SELECT (SELECT application_id FROM pragma_application_id()), (SELECT count(*) FROM sqlite_schema)").Scan(&id, &objects); err != nil {
		return fmt.Errorf("%s: %w", PackedFile, err)
	}
	if id != packedAppID && objects > 0 {
		return fmt.Errorf("%s is not a packed mirror (application id %#x)", PackedFile, id)
	}
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("%s: %w", PackedFile, err)
	}
	if id != packedAppID {
		// A new database: its table and its id in one transaction. (Not
		// every time: setting the id takes the write lock even when it
		// is set already, and a database in use is not made to wait.)
		if err := s.create(ctx); err != nil {
			return fmt.Errorf("%s: %w", PackedFile, err)
		}
	}
	r, err := sqlitefile.Open(file, url.Values{"_pragma": {"busy_timeout(10000)", "query_only(1)"}}, max(4, runtime.GOMAXPROCS(0)))
	if err != nil {
		return err
	}
	s.r = r
	return r.PingContext(ctx)
}

// create makes the table of a new database and marks the database a
// packed mirror's, in one transaction.
func (s *Packed) create(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, packedSchema+fmt.Sprintf("PRAGMA application_id = %d;", packedAppID)); err != nil {
		return err
	}
	return tx.Commit()
}

// Dir returns the sink's directory as an absolute path.
func (s *Packed) Dir() string { return s.dir }

// Local reports true: the packed layout is never shared (see NewPacked).
func (s *Packed) Local() bool { return true }

// Concurrency returns Options.Concurrency (by default 2*GOMAXPROCS).
func (s *Packed) Concurrency() int { return s.opts.Concurrency }

// Put reads body to io.EOF and queues it as the row of r.URI, replacing any
// earlier one when the queue is written (see Packed). A body error is
// returned wrapped and queues nothing; a ctx that ends is retryable; a body
// longer than Options.MaxPacked is a permanent failure.
func (s *Packed) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if r == nil {
		return errclass.Permanentf("fs: put: nil resource")
	}
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("fs: put %s: %w", short(r.URI), err)
	}
	var buf bytes.Buffer
	if r.Length > 0 && r.Length <= s.opts.MaxPacked {
		buf.Grow(int(r.Length) + bytes.MinRead) // ReadFrom wants MinRead free to read without growing
	}
	src := &sink.ContextReader{Ctx: ctx, R: body}
	n, err := buf.ReadFrom(io.LimitReader(src, s.opts.MaxPacked+1))
	if berr := src.BodyError(err, "fs: put "+short(r.URI)); berr != nil {
		return berr
	}
	switch {
	case err != nil:
		return errclass.Retryablef("fs: put %s: %w", short(r.URI), err)
	case n > s.opts.MaxPacked:
		return errclass.Permanentf("fs: put %s: the body is longer than the packed layout's %d bytes (layout=packed&maxpacked=N, or the file layout)", short(r.URI), s.opts.MaxPacked)
	}
	op := packedOp{uri: r.URI, set: r.ResourceSet, typ: r.Type, body: buf.Bytes()}
	if !r.Lastmod.IsZero() {
		t := r.Lastmod.UTC()
		op.lastmod, op.day = t.Format(time.RFC3339Nano), t.Format(time.DateOnly)
	}
	s.enqueue(ctx, op)
	return nil
}

// Delete queues the removal of uri's row. Deleting a URI the sink does not
// hold is not an error.
func (s *Packed) Delete(ctx context.Context, uri string) error {
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("fs: delete %s: %w", short(uri), err)
	}
	s.enqueue(ctx, packedOp{uri: uri, del: true})
	return nil
}

// enqueue queues op, and writes the queue when it has grown past its
// bounds; what fails then is reported by the next Flush.
func (s *Packed) enqueue(ctx context.Context, op packedOp) {
	s.mu.Lock()
	s.queue = append(s.queue, op)
	s.queued += int64(len(op.body))
	full := s.queued >= packedFlushBytes || len(s.queue) >= packedFlushOps
	s.mu.Unlock()
	if full {
		s.write(context.WithoutCancel(ctx))
	}
}

// Flush writes what is queued in one transaction and returns the writes
// that failed since the previous Flush. A failure is fatal (the database
// cannot be written) or, when ctx ended or another process held the
// database longer than busy_timeout, retryable.
func (s *Packed) Flush(ctx context.Context) []sink.Failed {
	s.write(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := s.failed
	s.failed = nil
	return failed
}

// write writes the queue, in the order of its writes, in one transaction;
// when that fails, every write of it is recorded as failed.
func (s *Packed) write(ctx context.Context) {
	s.flushing.Lock()
	defer s.flushing.Unlock()
	s.mu.Lock()
	ops := s.queue
	s.queue, s.queued = nil, 0
	s.mu.Unlock()
	if len(ops) == 0 {
		return
	}
	err := s.apply(ctx, ops)
	if err == nil {
		return
	}
	if ctx.Err() != nil || sqlitefile.Busy(err) {
		// Cancelled, or the database held by another process longer
		// than busy_timeout: the writes are tried again.
		err = errclass.Retryablef("fs sink %s: %w", s.dir, err)
	} else {
		err = errclass.Fatalf("fs sink %s: %w", s.dir, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range ops {
		s.failed = append(s.failed, sink.Failed{URI: op.uri, Delete: op.del, Err: err})
	}
}

// apply writes ops in one transaction.
func (s *Packed) apply(ctx context.Context, ops []packedOp) (err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	put, err := tx.PrepareContext(ctx, `INSERT INTO records (uri, resource_set, day, lastmod, type, length, body) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (uri) DO UPDATE SET resource_set = excluded.resource_set, day = excluded.day, lastmod = excluded.lastmod,
		type = excluded.type, length = excluded.length, body = excluded.body`)
	if err != nil {
		return err
	}
	del, err := tx.PrepareContext(ctx, `DELETE FROM records WHERE uri = ?`)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.del {
			_, err = del.ExecContext(ctx, op.uri)
		} else {
			_, err = put.ExecContext(ctx, op.uri, op.set, op.day, op.lastmod, op.typ, len(op.body), op.body)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", short(op.uri), err)
		}
	}
	return tx.Commit()
}

// Get returns the held body of uri, after writing the queue. When the sink
// does not hold uri the error satisfies errors.Is(err, fs.ErrNotExist).
func (s *Packed) Get(ctx context.Context, uri string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, errclass.Retryablef("fs: get %s: %w", short(uri), err)
	}
	s.write(context.WithoutCancel(ctx))
	var body []byte
	err := s.r.QueryRowContext(ctx, `SELECT body FROM records WHERE uri = ?`, uri).Scan(&body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("fs: get %s: %w", short(uri), iofs.ErrNotExist)
	case err != nil:
		return nil, s.dbError(ctx, "get", uri, err)
	}
	return io.NopCloser(bytes.NewReader(body)), nil
}

// Walk calls fn with every held URI, in order of their bytes, after writing
// the queue. It reads packedWalkPage URIs at a time and holds no
// transaction while fn runs, so fn may write to the sink. An error from fn
// stops the walk and is returned as it is.
func (s *Packed) Walk(ctx context.Context, fn func(uri string) error) error {
	s.write(context.WithoutCancel(ctx))
	after, first := "", true
	for {
		if err := ctx.Err(); err != nil {
			return errclass.Retryablef("fs: walk: %w", err)
		}
		// The first page from the start, the others after the last URI
		// read: each a search of the primary key's index, not a scan.
		query, args := `SELECT uri FROM records ORDER BY uri LIMIT ?`, []any{packedWalkPage}
		if !first {
			query, args = `SELECT uri FROM records WHERE uri > ? ORDER BY uri LIMIT ?`, []any{after, packedWalkPage}
		}
		rows, err := s.r.QueryContext(ctx, query, args...)
		if err != nil {
			return s.dbError(ctx, "walk", after, err)
		}
		page := make([]string, 0, packedWalkPage)
		for rows.Next() {
			var uri string
			if err := rows.Scan(&uri); err != nil {
				_ = rows.Close()
				return s.dbError(ctx, "walk", after, err)
			}
			page = append(page, uri)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return s.dbError(ctx, "walk", after, err)
		}
		for _, uri := range page {
			if err := fn(uri); err != nil {
				return err
			}
		}
		if len(page) < packedWalkPage {
			return nil
		}
		after, first = page[len(page)-1], false
	}
}

// dbError classifies a database error: retryable when ctx ended or the
// database was busy, fatal otherwise.
func (s *Packed) dbError(ctx context.Context, op, uri string, err error) error {
	if ctx.Err() != nil || sqlitefile.Busy(err) {
		return errclass.Retryablef("fs sink %s: %s %s: %w", s.dir, op, short(uri), err)
	}
	return errclass.Fatalf("fs sink %s: %s %s: %w", s.dir, op, short(uri), err)
}

// Close writes what is queued and closes the database. Writes that failed
// and no Flush reported make it fail. Calling it again is a no-op.
func (s *Packed) Close(ctx context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	s.write(context.WithoutCancel(ctx))
	s.mu.Lock()
	failed := s.failed
	s.failed = nil
	s.mu.Unlock()
	var errs []error
	for _, f := range failed {
		errs = append(errs, fmt.Errorf("%s: %w", short(f.URI), f.Err))
		if len(errs) == 10 {
			errs = append(errs, fmt.Errorf("and %d more", len(failed)-10))
			break
		}
	}
	if len(failed) > 0 {
		s.log.Error("writes lost at close", "count", len(failed))
	}
	errs = append(errs, s.closeDBs())
	if err := errors.Join(errs...); err != nil {
		return errclass.Fatalf("fs sink %s: close: %w", s.dir, err)
	}
	return nil
}

func (s *Packed) closeDBs() error {
	var errs []error
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	return errors.Join(errs...)
}
