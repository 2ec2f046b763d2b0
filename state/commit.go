package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
)

// Failure is one entry of a run's detail log: an item that failed.
type Failure struct {
	// RunID is the run the failure belongs to; it must exist.
	RunID int64
	// URI is the resource that failed, or "" when the failure is about a
	// whole package or document.
	URI string
	// Package is the URL of the package involved, or "".
	Package string
	// Stage is the pipeline stage where it failed ("fetch", "verify", …).
	Stage string
	// Error is the error message.
	Error string
	// Permanent is set for failures that retrying will not fix; temporary
	// failures hold a checkpoint back at their ChangeTime.
	Permanent bool
	// ChangeTime is the datetime of the change that failed, or zero.
	ChangeTime time.Time
	// At is when it failed; Commit fills a zero value with the current time.
	At time.Time
}

// The change types a ChangeRecord records (ResourceSync's rs:md change).
const (
	ChangeCreated = "created"
	ChangeUpdated = "updated"
	ChangeDeleted = "deleted"
)

// ChangeRecord is one entry of the append-only change log: a change the
// destination applied.
type ChangeRecord struct {
	// URI is the changed resource; it must not be empty.
	URI string
	// Change is one of the Change constants.
	Change string
	// Datetime is when the change happened at the source, or zero if unknown.
	Datetime time.Time
	// RunID is the run that applied it (0 for none; otherwise it must exist).
	RunID int64
	// Package is the URL of the package it came from, or "".
	Package string
	// Source is the source the resource belongs to (as Resource.Source).
	Source string
	// Length (-1 when unknown), Hashes and Type describe the version the
	// change produced (none for a deletion).
	Length int64
	Hashes fixity.Hashes
	Type   string
	// Lastmod is the last modification of the version the change produced,
	// as its source gave it, else when it was fetched; zero for a deletion
	// and for changes recorded before it was kept.
	Lastmod time.Time
	// Recorded is when the destination recorded the change. Commit sets
	// it, whatever the caller gave: a stamp of whole microseconds, unique
	// within the store and strictly increasing in commit order (across
	// goroutines and processes, whatever the clock does), so that every
	// change a reader's snapshot lacks is recorded after every change it
	// holds (see Snapshot). It is stored as an integer count of
	// microseconds since the Unix epoch.
	Recorded time.Time
	// Links are the resource's links that stay with a change: its
	// rel="via" link to the original, when it came from an aggregator.
	Links []Link
	// Superseded is set by Snapshot.WalkChanges when a later change of the
	// same resource is recorded: the version this change produced is no
	// longer the one held. It is not stored.
	Superseded bool
}

// Checkpoint records, per source and capability list (resource set), where
// the next incremental run starts.
type Checkpoint struct {
	// Source is the source's key; it must not be empty.
	Source string
	// ResourceSet names the resource set, as its protocol names it (a
	// ResourceSync Capability List's URL, an OAI-PMH format and set, a
	// harvest list), or "" for the whole source.
	ResourceSet string
	// Next is where the next incremental run starts.
	Next time.Time
	// Baseline is the Resource Dump's at datetime, or zero.
	Baseline time.Time
	// Open is set when the last change document seen was open (no until).
	Open bool
	// RunID is the run that set it (0 for none; otherwise it must exist).
	RunID int64
	// Updated is when it was set; Commit fills a zero value with the
	// current time.
	Updated time.Time
	// DescribedBy is the source's own description the set was found from
	// (source.Checkpoint.DescribedBy), or "".
	DescribedBy string
	// KeepProgress, when set, leaves the set's progress marks where
	// setting the checkpoint clears them otherwise: the set is not done
	// (its checkpoint held), and the next task resumes from its marks. It
	// is not stored.
	KeepProgress bool
}

// Batch is what the pipeline's commit stage records at once.
type Batch struct {
	// Resources are upserted by URI, in order (a later entry for the same
	// URI wins).
	Resources []Resource
	// Failures are appended to the detail log.
	Failures []Failure
	// Changes are appended to the change log.
	Changes []ChangeRecord
	// Deliveries are upserted by (source, URI, sink): sinks that took a
	// version of a resource that some other sink did not.
	Deliveries []Delivery
	// Delivered lists resources every sink now holds: their deliveries are
	// cleared (after Deliveries are applied).
	Delivered []Key
	// Documents are change documents as read (see RecordChangeDocument).
	Documents []ChangeDocument
	// Progress marks are upserted by (source, resource set, key).
	Progress []Progress
	// Retries are upserted by (source, URI): records whose own permanent
	// failure the next run asks for again. A resource of Resources that
	// is not failed clears its retry when its ChangeTime is not older than
	// the retry's; a key of Resolved may clear it (after Retries are
	// applied).
	Retries []Retry
	// Resolved are resources whose retry is cleared although the batch
	// records nothing else of them (a change superseded by a newer one
	// held), when the version held is at least as new as the change that
	// failed (its ChangeTime not older than the retry's).
	Resolved []Key
	// Checkpoint, if not nil, is set last, and clears the progress marks
	// of its source and resource set (unless Checkpoint.KeepProgress).
	Checkpoint *Checkpoint
	// Fence, if not nil, is the lease (Store.Lease, of this store) the
	// batch's harvest holds: the batch commits only while it is still
	// that harvest's — a lease another harvest has taken since (its
	// holder's connection cut for longer than the server kept its
	// session) refuses the whole batch with an error wrapping
	// ErrLeaseLost, and nothing is stored.
	Fence *Lease
	// Part, if not nil, records a part of a spread task done (see
	// CreateTask), with the rest of the batch.
	Part *PartDone
	// Task, when not 0, is the spread task the batch's unit belongs to:
	// the batch commits only while the task is open (CloseTask), else the
	// whole batch is refused with an error wrapping ErrTaskClosed — a
	// unit of a task abandoned for a whole harvest commits nothing after.
	Task int64
}

// Retry is a record whose own permanent failure (bad fixity, a record not
// well-formed after every repair, a refused address) is outstanding: the
// checkpoint moved past it, so the next run asks for it again, until a
// run delivers it (or a newer version of it).
type Retry struct {
	Source, URI, ResourceSet string
	// Record is the planner's own description of the record (it alone
	// reads it), enough to ask for it again.
	Record string
	// ChangeTime is the time of the change that failed (zero: unknown):
	// a retry of an older change does not replace an outstanding one.
	ChangeTime time.Time
	// RunID is the run that failed it (0: none; otherwise it must exist).
	RunID int64
}

// Progress is a planner's mark of how far a task got in one resource set
// of a source, kept until the set's checkpoint is next set: what a task
// resuming an unfinished one reads back.
type Progress struct {
	Source, ResourceSet string
	// Key names the mark within the set; Value is the planner's own.
	Key, Value string
	// RunID is the run that made it (0: none; otherwise it must exist).
	RunID int64
}

// Empty reports whether the batch records nothing.
func (b *Batch) Empty() bool {
	return len(b.Resources) == 0 && len(b.Failures) == 0 && len(b.Changes) == 0 && b.Checkpoint == nil &&
		len(b.Deliveries) == 0 && len(b.Delivered) == 0 && len(b.Documents) == 0 && len(b.Progress) == 0 &&
		len(b.Retries) == 0 && len(b.Resolved) == 0 && b.Part == nil
}

// Delivery records that one sink holds a version of a resource while
// another sink has not taken it yet, so a later run re-delivers only to the
// sinks that lack it.
type Delivery struct {
	Source     string
	URI        string
	Sink       string
	Length     int64
	Hashes     fixity.Hashes
	ChangeTime time.Time
}

// Key identifies a resource: the source it belongs to and its URI.
type Key struct {
	Source, URI string
}

// Deliveries returns the partial deliveries recorded for uri from source.
func (s *Store) Deliveries(ctx context.Context, source, uri string) ([]Delivery, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT sink, length, md5, sha1, sha256, change_time FROM deliveries WHERE source = ? AND uri = ?", source, uri)
	if err != nil {
		return nil, fatal("deliveries", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d := Delivery{Source: source, URI: uri}
		var md5, sha1, sha256, ct sql.NullString
		if err := rows.Scan(&d.Sink, &d.Length, &md5, &sha1, &sha256, &ct); err != nil {
			return nil, fatal("deliveries", err)
		}
		if d.Hashes, err = decodeHashes(md5, sha1, sha256, sql.NullString{}); err != nil {
			return nil, fatal("deliveries", err)
		}
		if d.ChangeTime, err = decodeTime("change_time", ct); err != nil {
			return nil, fatal("deliveries", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("deliveries", err)
	}
	return out, nil
}

// Commit records a batch in one SQLite transaction: resources are upserted
// (as PutResources), failures and changes appended, and the checkpoint, if
// any, set (as SetCheckpoint). It is atomic: on any error — an invalid item,
// a constraint violation such as an unknown run id, a cancelled ctx — none
// of the batch is stored, and a process killed during Commit leaves the file
// consistent, with none of the batch. Once Commit returns nil the batch
// survives a crash of the process (with synchronous=NORMAL, not necessarily
// a power loss). An empty batch is a no-op. On PostgreSQL, commits of
// different sources run at once (beginSources); those of one source, and
// every other writer, take turns.
func (s *Store) Commit(ctx context.Context, b Batch) (err error) {
	if b.Empty() {
		return nil
	}
	for _, m := range []*multiInsert{&s.upsertResource, &s.insertChange} {
		if err := m.prepareWanted(ctx, s.w); err != nil {
			return fatal("commit", err)
		}
	}
	tx, err := s.beginSources(ctx, b.sources)
	if err != nil {
		return fatal("commit", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if b.Fence != nil {
		// Under the write lock (shared, on PostgreSQL): a lease taken by
		// another harvest after this check waits for this commit to end.
		held, err := s.held(ctx, tx, b.Fence)
		if err != nil {
			return fatal("commit", err)
		}
		if !held {
			return fatal("commit", fmt.Errorf("%s: %w", b.Fence.key, ErrLeaseLost))
		}
	}
	if b.Task != 0 {
		var closed int
		err := tx.QueryRowContext(ctx, "SELECT closed FROM tasks WHERE id = ?", b.Task).Scan(&closed)
		if errors.Is(err, sql.ErrNoRows) || err == nil && closed != 0 {
			return fatal("commit", fmt.Errorf("task %d: %w", b.Task, ErrTaskClosed))
		}
		if err != nil {
			return fatal("commit", err)
		}
	}
	// Read once the write lock is held (BEGIN IMMEDIATE; on PostgreSQL,
	// the sources' locks), so that the clock is read in commit order.
	now := s.clock()
	if err := s.commitTx(ctx, tx, &b, now); err != nil {
		return fatal("commit", err)
	}
	if err := tx.Commit(); err != nil {
		return fatal("commit", err)
	}
	return nil
}

// sources returns the sources whose rows b writes, as the locks of
// beginSources name them (a state key's source, without its alternate
// sinks after '#'), sorted; none when b writes a row of no source (a
// part's end, failures alone), which then takes the whole store's lock.
func (b *Batch) sources() []string {
	seen := map[string]bool{}
	add := func(src string) {
		base, _, _ := strings.Cut(src, "#")
		seen[base] = true
	}
	for i := range b.Resources {
		add(b.Resources[i].Source)
	}
	for i := range b.Changes {
		add(b.Changes[i].Source)
	}
	for i := range b.Deliveries {
		add(b.Deliveries[i].Source)
	}
	for _, k := range b.Delivered {
		add(k.Source)
	}
	for i := range b.Documents {
		add(b.Documents[i].Source)
	}
	for i := range b.Progress {
		add(b.Progress[i].Source)
	}
	for i := range b.Retries {
		add(b.Retries[i].Source)
	}
	for _, k := range b.Resolved {
		add(k.Source)
	}
	if b.Checkpoint != nil {
		add(b.Checkpoint.Source)
	}
	if len(seen) == 0 || seen[""] || b.Part != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(seen))
}

// rowsPerInsert is how many rows one statement of Commit inserts: the
// driver's work per statement (binding, stepping, resetting) is paid once
// for them all.
const rowsPerInsert = 50

// multiInsert is an insert statement of rows of the same columns, prepared
// for one row and for rowsPerInsert rows. The statement for rowsPerInsert
// rows also comes in shapes, one for each set of columns whose value every
// row of an insert shares (the source, the run, the commit's time, NULL
// digests…): a shape binds each such value once, not once a row, and
// binding is most of the driver's work on a row. A shape is prepared
// before the commit after the first that wanted it (a commit holds the
// store's one writing connection, which preparing needs too), at most
// maxShapes of them; until then a wider one, or the plain statement,
// serves.
type multiInsert struct {
	one, many *sql.Stmt
	// names are a row's columns, in order; query makes the statement
	// from its column list and its VALUES groups.
	names []string
	query func(cols, values string) string

	mu     sync.Mutex
	shapes map[uint64]*sql.Stmt     // prepared, by the columns (bits) shared, on the writing DB
	asked  map[uint64]shapeProgress // asked for and not prepared
}

// shapeProgress is how far a shape asked for got.
type shapeProgress int

const (
	shapeWanted    shapeProgress = iota // to prepare before the next commit
	shapePreparing                      // a commit is preparing it
	shapeRefused                        // preparing it failed: a wider shape, or the plain statement, serves
)

// maxShapes bounds the shapes of a multiInsert, prepared or asked for.
const maxShapes = 8

// prepare makes m the insert of rows of cols columns (a comma-separated
// list) that query makes from a column list and its VALUES groups,
// prepared on db for one row and for rowsPerInsert rows.
func (m *multiInsert) prepare(ctx context.Context, db *sql.DB, cols string, query func(cols, values string) string) error {
	m.names, m.query = strings.Split(strings.ReplaceAll(cols, " ", ""), ","), query
	var err error
	if m.one, err = db.PrepareContext(ctx, query(m.shaped(1, 0))); err != nil {
		return err
	}
	m.many, err = db.PrepareContext(ctx, query(m.shaped(rowsPerInsert, 0)))
	return err
}

// shape returns the statement for rowsPerInsert rows that share the
// columns shared (bits), binding once the columns it returns (a subset of
// shared), and asks for the shape of shared when it has none yet.
func (m *multiInsert) shape(shared uint64) (uint64, *sql.Stmt) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st, ok := m.shapes[shared]; ok {
		return shared, st
	}
	best, st := uint64(0), m.many
	for mask, s := range m.shapes {
		if mask&^shared == 0 && bits.OnesCount64(mask) > bits.OnesCount64(best) {
			best, st = mask, s
		}
	}
	if _, ok := m.asked[shared]; !ok && shared != 0 && len(m.shapes)+len(m.asked) < maxShapes {
		if m.asked == nil {
			m.asked = map[uint64]shapeProgress{}
		}
		m.asked[shared] = shapeWanted
	}
	return best, st
}

// prepareWanted prepares on db the shapes asked for that no other call is
// preparing; it must not be called within a transaction on db's only
// connection. A shape that cannot be prepared is not asked for again (a
// shape only saves work); the error is ctx's only.
func (m *multiInsert) prepareWanted(ctx context.Context, db *sql.DB) error {
	m.mu.Lock()
	var todo []uint64
	for mask, p := range m.asked {
		if p == shapeWanted {
			m.asked[mask] = shapePreparing
			todo = append(todo, mask)
		}
	}
	m.mu.Unlock()
	for i, mask := range todo {
		cols, values := m.shaped(rowsPerInsert, mask)
		st, err := db.PrepareContext(ctx, m.query(cols, values))
		m.mu.Lock()
		switch {
		case err != nil && ctx.Err() != nil:
			for _, k := range todo[i:] {
				m.asked[k] = shapeWanted
			}
			m.mu.Unlock()
			return fmt.Errorf("prepare an insert's shape: %w", err)
		case err != nil:
			m.asked[mask] = shapeRefused
		default:
			delete(m.asked, mask)
			if m.shapes == nil {
				m.shapes = map[uint64]*sql.Stmt{}
			}
			m.shapes[mask] = st
		}
		m.mu.Unlock()
	}
	return nil
}

// statements returns every statement m prepared.
func (m *multiInsert) statements() []*sql.Stmt {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*sql.Stmt
	for _, st := range []*sql.Stmt{m.one, m.many} {
		if st != nil {
			out = append(out, st)
		}
	}
	for _, st := range m.shapes {
		out = append(out, st)
	}
	return out
}

// shaped returns the column list and the VALUES groups of n rows of
// m's shape for the columns shared (bits): the shared columns first,
// each a numbered parameter (?1, ?2, …) that every row repeats, then the
// others, each a parameter of its own (?), numbered on from the shared
// ones in the order they come — as sharedArgs lays out the arguments.
// Only the shared parameters are named, so that the driver finds every
// parameter's name in a short list.
func (m *multiInsert) shaped(n int, shared uint64) (cols, values string) {
	var first, rest []string
	for c, name := range m.names {
		if shared&(1<<c) != 0 {
			first = append(first, name)
		} else {
			rest = append(rest, name)
		}
	}
	var row strings.Builder
	row.WriteByte('(')
	for i := range first {
		row.WriteString("?" + strconv.Itoa(i+1) + ", ")
	}
	row.WriteString(strings.Repeat("?, ", len(rest)))
	group := strings.TrimSuffix(row.String(), ", ") + ")"
	return strings.Join(append(first, rest...), ", "), strings.Repeat(group+", ", n-1) + group
}

// sharedColumns returns the columns (bits) whose value is the same in
// every one of the n rows of cols values in args, each a value the
// database's driver takes (see bindsAsIs).
func sharedColumns(args []any, cols, n int) uint64 {
	var shared uint64
	for c := range min(cols, 64) {
		v := args[c]
		if !bindsAsIs(v) {
			continue
		}
		same := true
		for r := 1; r < n && same; r++ {
			w := args[r*cols+c]
			same = bindsAsIs(w) && w == v
		}
		if same {
			shared |= 1 << c
		}
	}
	return shared
}

// bindsAsIs reports whether v is a value whose equality to another can be
// told by ==: a row's column value of this package's own types.
func bindsAsIs(v any) bool {
	switch v.(type) {
	case nil, string, int64, int, bool:
		return true
	}
	return false
}

// sharedArgs appends to dst the arguments of a shape sharing the columns
// shared (bits) for the n rows of cols values in args: the shared values
// once, then each row's others (see shaped).
func sharedArgs(dst, args []any, cols, n int, shared uint64) []any {
	for c := range cols {
		if shared&(1<<c) != 0 {
			dst = append(dst, args[c])
		}
	}
	for r := range n {
		for c := range cols {
			if shared&(1<<c) == 0 {
				dst = append(dst, args[r*cols+c])
			}
		}
	}
	return dst
}

// insertRows inserts n rows through st within tx, rowsPerInsert at a time
// (in st's shape for what they share) and the rest one by one; args
// appends row i's arguments to dst, or returns an error that stops the
// insert. A failure of the database names the rows it was inserting.
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, st *multiInsert, n int, args func(dst []any, i int) ([]any, error)) error {
	if n == 0 {
		return nil
	}
	stmts := map[*sql.Stmt]*sql.Stmt{}
	defer func() {
		for _, t := range stmts {
			t.Close()
		}
	}()
	within := func(db *sql.Stmt) *sql.Stmt {
		t, ok := stmts[db]
		if !ok {
			t = tx.StmtContext(ctx, db)
			stmts[db] = t
		}
		return t
	}
	var batch, shaped []any
	for i := 0; i < n; {
		k := 1
		if n-i >= rowsPerInsert {
			k = rowsPerInsert
		}
		batch = batch[:0]
		for j := i; j < i+k; j++ {
			var err error
			if batch, err = args(batch, j); err != nil {
				return err
			}
		}
		stmt, bound := st.one, batch
		if k > 1 {
			var shared uint64
			shared, stmt = st.shape(sharedColumns(batch, len(st.names), k))
			shaped = sharedArgs(shaped[:0], batch, len(st.names), k, shared)
			bound = shaped
		}
		if _, err := within(stmt).ExecContext(ctx, bound...); err != nil {
			return fmt.Errorf("rows %d to %d: %w", i, i+k-1, err)
		}
		i += k
	}
	return nil
}

// clearDeliveries clears the deliveries of the resources every sink now
// holds. Deliveries are rare (a sink failed while another took a
// version), so it first asks whether there are any.
func clearDeliveries(ctx context.Context, tx *sql.Tx, keys []Key) error {
	if len(keys) == 0 {
		return nil
	}
	var some bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM deliveries)").Scan(&some); err != nil || !some {
		return err
	}
	return execEach(ctx, tx, "DELETE FROM deliveries WHERE source = ? AND uri = ?", len(keys), func(i int) ([]any, error) {
		return []any{keys[i].Source, keys[i].URI}, nil
	}, func(i int, err error) error { return fmt.Errorf("delivered %q: %w", keys[i].URI, err) })
}

// execEach executes query for each of n rows within tx, the statement
// prepared once for them all (preparing is most of a small statement's
// cost): args gives row i's arguments (nil: row i is left out), and fail
// names row i in an error, args' or the database's.
func execEach(ctx context.Context, tx *sql.Tx, query string, n int, args func(i int) ([]any, error), fail func(i int, err error) error) error {
	if n == 0 {
		return nil
	}
	st, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range n {
		a, err := args(i)
		if err == nil && a != nil {
			_, err = st.ExecContext(ctx, a...)
		}
		if err != nil {
			return fail(i, err)
		}
	}
	return nil
}

func (s *Store) commitTx(ctx context.Context, tx *sql.Tx, b *Batch, now time.Time) error {
	var tt timeTexts
	err := s.insertRows(ctx, tx, &s.upsertResource, len(b.Resources), func(dst []any, i int) ([]any, error) {
		r := &b.Resources[i]
		args, err := resourceArgs(dst, r, now, &tt)
		if err != nil {
			return nil, fmt.Errorf("resource %d (%q): %w", i, r.URI, err)
		}
		return args, nil
	})
	if err != nil {
		return err
	}
	if len(b.Failures) > 0 {
		st := tx.StmtContext(ctx, s.insertFailure)
		defer st.Close()
		for i := range b.Failures {
			f := &b.Failures[i]
			args, err := failureArgs(f, now)
			if err == nil {
				_, err = st.ExecContext(ctx, args...)
			}
			if err != nil {
				return fmt.Errorf("failure %d (run %d, %q): %w", i, f.RunID, f.URI, err)
			}
		}
	}
	if len(b.Changes) > 0 {
		if err := s.stampChanges(ctx, tx, b.Changes, now); err != nil {
			return err
		}
		err := s.insertRows(ctx, tx, &s.insertChange, len(b.Changes), func(dst []any, i int) ([]any, error) {
			c := &b.Changes[i]
			args, err := changeArgs(dst, c, &tt)
			if err != nil {
				return nil, fmt.Errorf("change %d (%q): %w", i, c.URI, err)
			}
			return args, nil
		})
		if err != nil {
			return err
		}
	}
	for i := range b.Deliveries {
		d := &b.Deliveries[i]
		ct, err := encodeTime(d.ChangeTime)
		if err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO deliveries (source, uri, sink, length, md5, sha1, sha256, change_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (source, uri, sink) DO UPDATE SET length = excluded.length, md5 = excluded.md5, sha1 = excluded.sha1,
				sha256 = excluded.sha256, change_time = excluded.change_time`,
				d.Source, d.URI, d.Sink, d.Length, encodeDigest(d.Hashes.MD5), encodeDigest(d.Hashes.SHA1), encodeDigest(d.Hashes.SHA256), ct)
		}
		if err != nil {
			return fmt.Errorf("delivery %d (%q, %q): %w", i, d.URI, d.Sink, err)
		}
	}
	if err := clearDeliveries(ctx, tx, b.Delivered); err != nil {
		return err
	}
	for i := range b.Documents {
		if err := recordChangeDocument(ctx, tx, b.Documents[i], now); err != nil {
			return fmt.Errorf("change document %q: %w", b.Documents[i].URL, err)
		}
	}
	for i := range b.Progress {
		p := &b.Progress[i]
		if p.Source == "" || p.Key == "" {
			return fmt.Errorf("progress %d: a mark needs a source and a key", i)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO progress (source, resource_set, key, value, run_id, updated) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (source, resource_set, key) DO UPDATE SET value = excluded.value, run_id = excluded.run_id, updated = excluded.updated`,
			p.Source, p.ResourceSet, p.Key, p.Value, nullID(p.RunID), now.UTC().Format(timeLayout))
		if err != nil {
			return fmt.Errorf("progress %d (%q, %q): %w", i, p.ResourceSet, p.Key, err)
		}
	}
	if err := commitRetries(ctx, tx, b, now); err != nil {
		return err
	}
	if b.Part != nil {
		if err := commitPart(ctx, tx, b.Part); err != nil {
			return err
		}
	}
	if c := b.Checkpoint; c != nil {
		args, err := checkpointArgs(c, now)
		if err == nil {
			_, err = tx.StmtContext(ctx, s.upsertCheckpoint).ExecContext(ctx, args...)
		}
		if err == nil && !c.KeepProgress {
			_, err = tx.ExecContext(ctx, "DELETE FROM progress WHERE source = ? AND resource_set = ?", c.Source, c.ResourceSet)
		}
		if err != nil {
			return fmt.Errorf("checkpoint (%q, %q): %w", c.Source, c.ResourceSet, err)
		}
	}
	return nil
}

// AddFailures appends fs to the detail log in one transaction (all or
// none). Each failure's RunID must name an existing run; a zero At is
// recorded as the current time.
func (s *Store) AddFailures(ctx context.Context, fs []Failure) error {
	return s.Commit(ctx, Batch{Failures: fs})
}

// AddChanges appends cs to the change log in one transaction (all or
// none). Each record needs a URI and a valid Change.
func (s *Store) AddChanges(ctx context.Context, cs []ChangeRecord) error {
	return s.Commit(ctx, Batch{Changes: cs})
}

// SetCheckpoint inserts or overwrites the checkpoint of (c.Source,
// c.ResourceSet). A zero Updated is recorded as the current time.
func (s *Store) SetCheckpoint(ctx context.Context, c Checkpoint) error {
	return s.Commit(ctx, Batch{Checkpoint: &c})
}

const insertFailureSQL = "INSERT INTO failures (" + failureCols + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)"

func failureArgs(f *Failure, now time.Time) ([]any, error) {
	if f.RunID <= 0 {
		return nil, fmt.Errorf("run id %d (a failure belongs to an existing run)", f.RunID)
	}
	at := f.At
	if at.IsZero() {
		at = now
	}
	ts, err := timeCols(nil, []string{"change time", "at"}, f.ChangeTime, at)
	if err != nil {
		return nil, err
	}
	return []any{f.RunID, f.URI, f.Package, f.Stage, f.Error, boolInt(f.Permanent), ts[0], ts[1]}, nil
}

// Failures returns the first limit failures of run runID in the order
// they were recorded (none, not an error, for an unknown run), and how
// many more the run recorded: a run's failures may be as many as its
// resources, so none of them is read whole. A limit below 1 reads one.
func (s *Store) Failures(ctx context.Context, runID int64, limit int) ([]Failure, int64, error) {
	limit = max(limit, 1)
	var out []Failure
	err := s.eachFailure(ctx, "SELECT "+failureCols+" FROM failures WHERE run_id = ? ORDER BY id LIMIT ?",
		[]any{runID, limit}, func(f Failure) error {
			out = append(out, f)
			return nil
		})
	if err != nil || len(out) < limit {
		return out, 0, err
	}
	var n int64
	if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM failures WHERE run_id = ?", runID).Scan(&n); err != nil {
		return nil, 0, fatal("failures", err)
	}
	return out, max(n-int64(limit), 0), nil
}

// EachFailure calls fn with each failure of the runs begun at since or
// later (zero: all), of site only when site is not "", in the order of
// their times (then as recorded; a failure without a time first). The
// failures are read as a stream, never held: the store sorts them. An
// error of fn stops the reading and is returned as it is.
func (s *Store) EachFailure(ctx context.Context, since time.Time, site string, fn func(Failure) error) error {
	return s.eachFailure(ctx, "SELECT "+failureColsOf("f")+` FROM failures f JOIN runs r ON r.id = f.run_id
WHERE r.started >= ? AND (? = '' OR r.site = ?) ORDER BY COALESCE(f.at, ''), f.id`,
		[]any{sinceArg(since), site, site}, fn)
}

// The columns of a failure, in the order eachFailure scans them.
const failureCols = "run_id, uri, package, stage, error, permanent, change_time, at"

// failureColsOf is failureCols qualified by table alias t.
func failureColsOf(t string) string {
	return t + "." + strings.ReplaceAll(failureCols, ", ", ", "+t+".")
}

// eachFailure calls fn with each failure query (with args) selects
// (failureCols).
func (s *Store) eachFailure(ctx context.Context, query string, args []any, fn func(Failure) error) error {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return fatal("failures", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			f             Failure
			permanent     int
			changeTime, a sql.NullString
		)
		if err := rows.Scan(&f.RunID, &f.URI, &f.Package, &f.Stage, &f.Error, &permanent, &changeTime, &a); err != nil {
			return fatal("failures", err)
		}
		f.Permanent = permanent != 0
		if f.ChangeTime, err = decodeTime("change_time", changeTime); err != nil {
			return fatal("failures", err)
		}
		if f.At, err = decodeTime("at", a); err != nil {
			return fatal("failures", err)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fatal("failures", err)
	}
	return nil
}

// insertChangesWith returns the insert of the change records values gives
// (its parenthesised groups of the columns cols lists, changeCols in some
// order).
func insertChangesWith(cols, values string) string {
	return "INSERT INTO changes (" + cols + ") VALUES " + values
}

// The columns of a change record, in the order scanChange reads them.
const changeCols = `uri, change, datetime, run_id, package, source, recorded, length, md5, sha1, sha256, hash_other, type, lastmod, links`

// changeArgs validates c and appends its insert's arguments to dst, its
// times encoded through tt.
func changeArgs(dst []any, c *ChangeRecord, tt *timeTexts) ([]any, error) {
	switch {
	case c.URI == "":
		return nil, errors.New("empty URI")
	case c.Change != ChangeCreated && c.Change != ChangeUpdated && c.Change != ChangeDeleted:
		return nil, fmt.Errorf("change %q (want created, updated or deleted)", c.Change)
	case c.Length < -1:
		return nil, fmt.Errorf("length %d (want >= 0, or -1 for unknown)", c.Length)
	}
	dt, err := tt.encode(c.Datetime)
	if err != nil {
		return nil, fmt.Errorf("datetime: %w", err)
	}
	lm, err := tt.encode(c.Lastmod)
	if err != nil {
		return nil, fmt.Errorf("lastmod: %w", err)
	}
	links, err := linksArg(c.Links)
	if err != nil {
		return nil, err
	}
	return append(dst, c.URI, c.Change, dt, nullID(c.RunID), c.Package, c.Source, stamp(c.Recorded), c.Length,
		encodeDigest(c.Hashes.MD5), encodeDigest(c.Hashes.SHA1), encodeDigest(c.Hashes.SHA256), encodeOther(c.Hashes), c.Type, lm, links), nil
}

// stampChanges sets the stamp (ChangeRecord.Recorded) of a commit's
// changes. On SQLite, whose writers take the one write lock (BEGIN
// IMMEDIATE, see Open), the first change is stamped now, or one
// microsecond past the newest stamp recorded if now is not later (the same
// microsecond, or a clock set back), and the others take the microseconds
// that follow: stamps are unique and increase in commit order across the
// store, and across processes. On PostgreSQL, where commits of different
// sources run at once (beginSources), the same holds per source: each
// source's changes follow its own newest stamp, read under its lock.
func (s *Store) stampChanges(ctx context.Context, tx *sql.Tx, cs []ChangeRecord, now time.Time) error {
	if s.dialect.sourceLock == "" {
		base, err := nextStamp(ctx, tx, now, "SELECT max(recorded) FROM changes")
		if err != nil {
			return err
		}
		for i := range cs {
			cs[i].Recorded = time.UnixMicro(base + int64(i)).UTC()
		}
		return nil
	}
	next := map[string]int64{}
	for i := range cs {
		c := &cs[i]
		us, ok := next[c.Source]
		if !ok {
			var err error
			if us, err = nextStamp(ctx, tx, now, "SELECT max(recorded) FROM changes WHERE source = ?", c.Source); err != nil {
				return err
			}
		}
		c.Recorded = time.UnixMicro(us).UTC()
		next[c.Source] = us + 1
	}
	return nil
}

// nextStamp returns the stamp (microseconds since the Unix epoch) that
// follows the newest one query (with args) reads: now, or one microsecond
// past it if now is not later.
func nextStamp(ctx context.Context, tx *sql.Tx, now time.Time, query string, args ...any) (int64, error) {
	var last sql.NullInt64
	if err := tx.QueryRowContext(ctx, query, args...).Scan(&last); err != nil {
		return 0, fmt.Errorf("change stamp: %w", err)
	}
	us := stamp(now)
	if last.Valid && us <= last.Int64 {
		us = last.Int64 + 1
	}
	return us, nil
}

// scanChange reads a row of changeCols, and then into more.
func scanChange(sc scanner, more ...any) (ChangeRecord, error) {
	var (
		c                        ChangeRecord
		dt, lastmod, links       sql.NullString
		rec, runID               sql.NullInt64
		md5, sha1, sha256, other sql.NullString
	)
	if err := sc.Scan(append([]any{&c.URI, &c.Change, &dt, &runID, &c.Package, &c.Source, &rec, &c.Length, &md5, &sha1, &sha256, &other, &c.Type, &lastmod, &links}, more...)...); err != nil {
		return ChangeRecord{}, err
	}
	if links.Valid && links.String != "" {
		if err := json.Unmarshal([]byte(links.String), &c.Links); err != nil {
			return ChangeRecord{}, fmt.Errorf("change of %q: links: %w", c.URI, err)
		}
	}
	c.RunID = runID.Int64
	var err error
	if c.Datetime, err = decodeTime("datetime", dt); err != nil {
		return ChangeRecord{}, err
	}
	if c.Lastmod, err = decodeTime("lastmod", lastmod); err != nil {
		return ChangeRecord{}, err
	}
	c.Recorded = decodeStamp(rec)
	if c.Hashes, err = decodeHashes(md5, sha1, sha256, other); err != nil {
		return ChangeRecord{}, fmt.Errorf("change of %q: %w", c.URI, err)
	}
	return c, nil
}

// Changes returns the change records of run runID in the order they were
// recorded (empty for an unknown run; records without a run are not
// returned).
func (s *Store) Changes(ctx context.Context, runID int64) ([]ChangeRecord, error) {
	rows, err := s.r.QueryContext(ctx,
		"SELECT "+changeCols+" FROM changes c WHERE run_id = ? ORDER BY id", runID)
	if err != nil {
		return nil, fatal("changes", err)
	}
	defer rows.Close()
	var out []ChangeRecord
	for rows.Next() {
		c, err := scanChange(rows)
		if err != nil {
			return nil, fatal("changes", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("changes", err)
	}
	return out, nil
}

const upsertCheckpointSQL = `INSERT INTO checkpoints (source, resource_set, next, baseline, open, run_id, updated, described_by)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, resource_set) DO UPDATE SET
	next = excluded.next, baseline = excluded.baseline, open = excluded.open,
	run_id = excluded.run_id, updated = excluded.updated, described_by = excluded.described_by`

func checkpointArgs(c *Checkpoint, now time.Time) ([]any, error) {
	if c.Source == "" {
		return nil, errors.New("empty source")
	}
	updated := c.Updated
	if updated.IsZero() {
		updated = now
	}
	ts, err := timeCols(nil, []string{"next", "baseline", "updated"}, c.Next, c.Baseline, updated)
	if err != nil {
		return nil, err
	}
	return []any{c.Source, c.ResourceSet, ts[0], ts[1], boolInt(c.Open), nullID(c.RunID), ts[2], c.DescribedBy}, nil
}

// Checkpoint returns the checkpoint of (source, capList), and false when
// none has been set.
func (s *Store) Checkpoint(ctx context.Context, source, capList string) (Checkpoint, bool, error) {
	var (
		c                   Checkpoint
		next, baseline, upd sql.NullString
		open                int
		runID               sql.NullInt64
	)
	err := s.r.QueryRowContext(ctx,
		"SELECT source, resource_set, next, baseline, open, run_id, updated, described_by FROM checkpoints WHERE source = ? AND resource_set = ?",
		source, capList).Scan(&c.Source, &c.ResourceSet, &next, &baseline, &open, &runID, &upd, &c.DescribedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fatal("checkpoint", err)
	}
	c.Open = open != 0
	c.RunID = runID.Int64
	for _, f := range []struct {
		col string
		v   sql.NullString
		dst *time.Time
	}{{"next", next, &c.Next}, {"baseline", baseline, &c.Baseline}, {"updated", upd, &c.Updated}} {
		if *f.dst, err = decodeTime(f.col, f.v); err != nil {
			return Checkpoint{}, false, fatal("checkpoint", err)
		}
	}
	return c, true, nil
}

// Progress returns the progress marks (value by key) of source's
// resource set set: none once its checkpoint has been set since.
func (s *Store) Progress(ctx context.Context, source, set string) (map[string]string, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT key, value FROM progress WHERE source = ? AND resource_set = ?", source, set)
	if err != nil {
		return nil, fatal("progress", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fatal("progress", err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("progress", err)
	}
	return out, nil
}

// HasCheckpoint reports whether any resource set of source has a checkpoint.
func (s *Store) HasCheckpoint(ctx context.Context, source string) (bool, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM checkpoints WHERE source = ?", source).Scan(&n); err != nil {
		return false, fatal("checkpoint", err)
	}
	return n > 0, nil
}

// ChangeDocument is a Change Dump or Change List document as last read:
// open (no until: the source will still add to it) or closed.
type ChangeDocument struct {
	URL, Source, ResourceSet, Capability string
	From, Until                          time.Time
	Open                                 bool
	RunID                                int64
	Seen                                 time.Time
}

// RecordChangeDocument records (or updates) a change document's state.
func (s *Store) RecordChangeDocument(ctx context.Context, d ChangeDocument) error {
	return s.Commit(ctx, Batch{Documents: []ChangeDocument{d}})
}

func recordChangeDocument(ctx context.Context, tx *sql.Tx, d ChangeDocument, now time.Time) error {
	if d.Seen.IsZero() {
		d.Seen = now
	}
	ts, err := timeCols(nil, []string{"from", "until", "seen"}, d.From, d.Until, d.Seen)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO change_documents (url, source, resource_set, capability, from_time, until_time, open, run_id, seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (url) DO UPDATE SET source = excluded.source, resource_set = excluded.resource_set, capability = excluded.capability,
		from_time = excluded.from_time, until_time = excluded.until_time, open = excluded.open, run_id = excluded.run_id, seen = excluded.seen`,
		d.URL, d.Source, d.ResourceSet, d.Capability, ts[0], ts[1], boolInt(d.Open), nullID(d.RunID), ts[2])
	return err
}

// ChangeDocuments returns the change documents recorded for source.
func (s *Store) ChangeDocuments(ctx context.Context, source string) ([]ChangeDocument, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT url, source, resource_set, capability, from_time, until_time, open, run_id, seen
		FROM change_documents WHERE source = ? ORDER BY from_time, url`, source)
	if err != nil {
		return nil, fatal("change documents", err)
	}
	defer rows.Close()
	var out []ChangeDocument
	for rows.Next() {
		var d ChangeDocument
		var from, until, seen sql.NullString
		var open int
		var runID sql.NullInt64
		if err := rows.Scan(&d.URL, &d.Source, &d.ResourceSet, &d.Capability, &from, &until, &open, &runID, &seen); err != nil {
			return nil, fatal("change documents", err)
		}
		d.Open, d.RunID = open != 0, runID.Int64
		for _, f := range []struct {
			col string
			v   sql.NullString
			dst *time.Time
		}{{"from_time", from, &d.From}, {"until_time", until, &d.Until}, {"seen", seen, &d.Seen}} {
			if *f.dst, err = decodeTime(f.col, f.v); err != nil {
				return nil, fatal("change documents", err)
			}
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("change documents", err)
	}
	return out, nil
}

// commitRetries upserts b's retries, then clears those of the resources
// the batch holds now and of its Resolved keys. The clearing costs a query
// per batch while no retry is outstanding.
func commitRetries(ctx context.Context, tx *sql.Tx, b *Batch, now time.Time) error {
	for i := range b.Retries {
		r := &b.Retries[i]
		if r.URI == "" {
			return fmt.Errorf("retry %d: a retry needs a URI", i)
		}
		ct, err := encodeTime(r.ChangeTime)
		if err != nil {
			return fmt.Errorf("retry %d (%q): %w", i, r.URI, err)
		}
		// A retry of an older change than the one outstanding does not
		// replace it (coalesce: an unknown time is the oldest).
		_, err = tx.ExecContext(ctx, `INSERT INTO retries (source, uri, resource_set, record, change_time, run_id, failed) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (source, uri) DO UPDATE SET resource_set = excluded.resource_set, record = excluded.record, change_time = excluded.change_time,
				run_id = excluded.run_id, failed = excluded.failed
			WHERE coalesce(excluded.change_time, '') >= coalesce(retries.change_time, '')`,
			r.Source, r.URI, r.ResourceSet, r.Record, ct, nullID(r.RunID), now.UTC().Format(timeLayout))
		if err != nil {
			return fmt.Errorf("retry %d (%q): %w", i, r.URI, err)
		}
	}
	if len(b.Resources) == 0 && len(b.Resolved) == 0 {
		return nil
	}
	var some bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM retries)").Scan(&some); err != nil || !some {
		return err
	}
	held := b.Resources
	err := execEach(ctx, tx, "DELETE FROM retries WHERE source = ? AND uri = ? AND coalesce(change_time, '') <= coalesce(?, '')", len(held), func(i int) ([]any, error) {
		r := &held[i]
		if r.Outcome == OutcomeFailed {
			return nil, nil
		}
		// A version as new as the change that failed, or newer, is held.
		ct, err := encodeTime(r.ChangeTime)
		return []any{r.Source, r.URI, ct}, err
	}, func(i int, err error) error { return fmt.Errorf("resolved %q: %w", held[i].URI, err) })
	if err != nil {
		return err
	}
	// Only when the version held is as new as the change that failed: a
	// run that finds an older change superseded resolves the older
	// retries, never one of a newer change.
	return execEach(ctx, tx, `DELETE FROM retries WHERE source = ? AND uri = ?
		AND EXISTS (SELECT 1 FROM resources r WHERE r.source = retries.source AND r.uri = retries.uri)
		AND coalesce(change_time, '') <= coalesce((SELECT change_time FROM resources r WHERE r.source = retries.source AND r.uri = retries.uri), '')`,
		len(b.Resolved), func(i int) ([]any, error) {
			return []any{b.Resolved[i].Source, b.Resolved[i].URI}, nil
		}, func(i int, err error) error { return fmt.Errorf("resolved %q: %w", b.Resolved[i].URI, err) })
}

// Retries returns the outstanding retries of source's resource set set,
// by URI.
func (s *Store) Retries(ctx context.Context, source, set string) ([]Retry, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT uri, record, change_time, coalesce(run_id, 0) FROM retries WHERE source = ? AND resource_set = ? ORDER BY uri", source, set)
	if err != nil {
		return nil, fatal("retries", err)
	}
	defer rows.Close()
	var out []Retry
	for rows.Next() {
		r := Retry{Source: source, ResourceSet: set}
		var ct sql.NullString
		if err := rows.Scan(&r.URI, &r.Record, &ct, &r.RunID); err != nil {
			return nil, fatal("retries", err)
		}
		if r.ChangeTime, err = decodeTime("change_time", ct); err != nil {
			return nil, fatal("retries", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("retries", err)
	}
	return out, nil
}
