package state

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// IsPostgres reports whether where names a PostgreSQL database
// (postgres://… or postgresql://…) rather than a state file.
func IsPostgres(where string) bool {
	return strings.HasPrefix(where, "postgres://") || strings.HasPrefix(where, "postgresql://")
}

// Redacted is where without its passwords, for messages: a PostgreSQL
// URL's password, and those of its query parameters (password,
// sslpassword), replaced by "xxxxx"; a file's path as it is.
func Redacted(where string) string {
	if !IsPostgres(where) {
		return where
	}
	u, err := url.Parse(where)
	if err != nil {
		return "postgres://…"
	}
	q := u.Query()
	for _, k := range secretParams {
		if q.Has(k) {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// secretParams are the query parameters of a PostgreSQL URL that hold
// secrets.
var secretParams = [...]string{"password", "sslpassword"}

// secrets returns the passwords where holds, longest first.
func secrets(where string) []string {
	u, err := url.Parse(where)
	if err != nil {
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok && p != "" {
		out = append(out, p, url.QueryEscape(p), url.PathEscape(p))
	}
	q := u.Query()
	for _, k := range secretParams {
		if v := q.Get(k); v != "" {
			out = append(out, v, url.QueryEscape(v))
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// redactedError is an error whose message hides the passwords of the
// PostgreSQL URL it was met opening, whatever the driver put in it; it
// unwraps to the error itself.
type redactedError struct {
	err     error
	secrets []string
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// redactError hides where's passwords in err's message.
func redactError(err error, where string) error {
	if err == nil {
		return nil
	}
	if s := secrets(where); len(s) > 0 {
		return &redactedError{err: err, secrets: s}
	}
	return err
}

// pgWriteKey is the key of the PostgreSQL advisory lock every write
// transaction takes first (the analogue of SQLite's BEGIN IMMEDIATE, so
// that commits are serialised and change stamps increase in commit order).
// It is scoped to the database: stores in two databases of one server
// never wait for each other.
const pgWriteKey = applicationID<<8 | 1

// pgSourceSpace is the first of the two keys of a source's own advisory
// lock (the second: the hash of its name), which a commit of that source
// takes after pgWriteKey shared. (PostgreSQL's two-key locks are a key
// space apart from the one-key ones.)
const pgSourceSpace = 0x72736876 // "rshv"

// postgresDialect is the store kept in PostgreSQL: its own migrations,
// a write transaction that takes the advisory lock first, and snapshots
// in REPEATABLE READ transactions.
func postgresDialect() dialect {
	return dialect{
		migrations: postgresMigrations,
		writeLock:  fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", pgWriteKey),
		sharedLock: fmt.Sprintf("SELECT pg_advisory_xact_lock_shared(%d)", pgWriteKey),
		sourceLock: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, hashtext(?))", pgSourceSpace),
		snapshot:   sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
		claim:      func(context.Context, *sql.Tx) error { return nil },
	}
}

// openPostgres opens the store kept in the PostgreSQL database at where,
// in the connection's current schema (search_path): a pool of writers,
// whose transactions serialise on an advisory lock, a pool of readers, and
// one of the connections that hold leases (see Store.Lease).
func (s *Store) openPostgres(ctx context.Context, where string) error {
	cfg, err := pgx.ParseConfig(where)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotStateFile, err)
	}
	s.dialect = postgresDialect()
	s.pgConfig = cfg
	n := max(4, runtime.GOMAXPROCS(0))
	s.w = sql.OpenDB(rebinding{stdlib.GetConnector(*cfg)})
	s.w.SetMaxOpenConns(n)
	s.w.SetMaxIdleConns(n)
	s.r = sql.OpenDB(rebinding{stdlib.GetConnector(*cfg)})
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	s.leaseDB = sql.OpenDB(rebinding{stdlib.GetConnector(*cfg)})
	s.leaseDB.SetMaxIdleConns(0) // a lease's connection closed when given back: its session, and lock, end
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := s.pgIdentity(ctx); err != nil {
		return err
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	return s.prepare(ctx)
}

// pgIdentity refuses a schema that holds tables but not the store's
// schema_version: another application's.
func (s *Store) pgIdentity(ctx context.Context) error {
	var tables int
	var ours bool
	err := s.w.QueryRowContext(ctx, `SELECT count(*), coalesce(bool_or(table_name = 'schema_version'), false)
		FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&tables, &ours)
	switch {
	case err != nil:
		return fmt.Errorf("identify: %w", err)
	case tables > 0 && !ours:
		return fmt.Errorf("%w (its schema holds %d tables of another application)", ErrNotStateFile, tables)
	}
	return nil
}

// PostgresURL is the URL of the PostgreSQL database the store is kept in,
// password included (for a job engine sharing the database), or "" for a
// state file.
func (s *Store) PostgresURL() string {
	if s.pgConfig == nil {
		return ""
	}
	return s.pgConfig.ConnString()
}

// rebinding is a connector of pgx's database/sql driver that takes the
// store's queries as they are written for both databases, with ?
// placeholders, and gives PostgreSQL $1, $2, ….
type rebinding struct{ driver.Connector }

func (c rebinding) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := conn.(pgConn)
	if !ok {
		conn.Close()
		return nil, errors.New("pgx's connection lacks a method the store needs")
	}
	return rebindConn{pc}, nil
}

// pgConn is what database/sql uses of pgx's connection.
type pgConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.NamedValueChecker
	driver.SessionResetter
}

type rebindConn struct{ pgConn }

func (c rebindConn) Prepare(query string) (driver.Stmt, error) {
	return c.pgConn.Prepare(rebind(query))
}

func (c rebindConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.pgConn.PrepareContext(ctx, rebind(query))
}

func (c rebindConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.pgConn.ExecContext(ctx, rebind(query), args)
}

func (c rebindConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.pgConn.QueryContext(ctx, rebind(query), args)
}

// rebind writes the placeholders of query as PostgreSQL's, numbered as
// SQLite numbers them: ?N is $N, and ? is the number after the highest
// one so far ($1, $2, … when query numbers none). Quoted strings and
// identifiers are left as they are.
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			k := n + 1
			if j > i+1 {
				k, _ = strconv.Atoi(query[i+1 : j])
			}
			n = max(n, k)
			fmt.Fprintf(&b, "$%d", k)
			i = j - 1
			continue
		}
		b.WriteByte(ch)
	}
	return b.String()
}

// postgresMigrations are the schema migrations of a store kept in
// PostgreSQL, as migrations are SQLite's: migration i brings the schema to
// version i+1, and applied ones are never edited in what they do to a store
// they migrated (3 was made to pass a row that stopped it). Version 1 is the schema
// SQLite's migrations reached at their version 21. Text sorts by its bytes
// (COLLATE "C"), as SQLite's does, whatever the database's locale.
func postgresMigrations() []string {
	return []string{
		// 1: the schema of SQLite's version 21, and the holders of the
		// leases held (see Store.Lease).
		`
CREATE TABLE runs (
	id       BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	mode     TEXT COLLATE "C" NOT NULL,
	source   TEXT COLLATE "C" NOT NULL,
	status   TEXT COLLATE "C" NOT NULL,
	started  TEXT COLLATE "C",
	finished TEXT COLLATE "C",
	report   TEXT,
	site     TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX runs_started ON runs (started);
CREATE INDEX runs_source ON runs (source, id);

CREATE TABLE failures (
	id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	run_id      BIGINT NOT NULL REFERENCES runs (id),
	uri         TEXT COLLATE "C" NOT NULL,
	package     TEXT COLLATE "C" NOT NULL,
	stage       TEXT COLLATE "C" NOT NULL,
	error       TEXT NOT NULL,
	permanent   BIGINT NOT NULL CHECK (permanent IN (0, 1)),
	change_time TEXT COLLATE "C",
	at          TEXT COLLATE "C"
);
CREATE INDEX failures_run ON failures (run_id, id);

CREATE TABLE changes (
	id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	uri        TEXT COLLATE "C" NOT NULL CHECK (uri <> ''),
	change     TEXT COLLATE "C" NOT NULL CHECK (change IN ('created', 'updated', 'deleted')),
	datetime   TEXT COLLATE "C",
	run_id     BIGINT REFERENCES runs (id),
	package    TEXT COLLATE "C" NOT NULL,
	source     TEXT COLLATE "C" NOT NULL DEFAULT '',
	length     BIGINT NOT NULL DEFAULT -1,
	md5        TEXT COLLATE "C",
	sha1       TEXT COLLATE "C",
	sha256     TEXT COLLATE "C",
	hash_other TEXT COLLATE "C",
	type       TEXT COLLATE "C" NOT NULL DEFAULT '',
	recorded   BIGINT,
	lastmod    TEXT COLLATE "C"
);
CREATE INDEX changes_run ON changes (run_id, id);
CREATE INDEX changes_recorded ON changes (recorded);
CREATE INDEX changes_source ON changes (source, recorded);
CREATE INDEX changes_source_uri ON changes (source, uri, recorded);

CREATE TABLE checkpoints (
	source          TEXT COLLATE "C" NOT NULL CHECK (source <> ''),
	capability_list TEXT COLLATE "C" NOT NULL,
	next            TEXT COLLATE "C",
	baseline        TEXT COLLATE "C",
	open            BIGINT NOT NULL CHECK (open IN (0, 1)),
	run_id          BIGINT REFERENCES runs (id),
	updated         TEXT COLLATE "C",
	described_by    TEXT COLLATE "C" NOT NULL DEFAULT '',
	PRIMARY KEY (source, capability_list)
);

CREATE TABLE change_documents (
	url          TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (url <> ''),
	source       TEXT COLLATE "C" NOT NULL,
	resource_set TEXT COLLATE "C" NOT NULL,
	capability   TEXT COLLATE "C" NOT NULL,
	from_time    TEXT COLLATE "C",
	until_time   TEXT COLLATE "C",
	open         BIGINT NOT NULL CHECK (open IN (0, 1)),
	run_id       BIGINT REFERENCES runs (id),
	seen         TEXT COLLATE "C"
);

CREATE TABLE packages (
	url         TEXT COLLATE "C" NOT NULL CHECK (url <> ''),
	sinks       TEXT COLLATE "C" NOT NULL,
	fingerprint TEXT COLLATE "C" NOT NULL CHECK (fingerprint <> ''),
	resources   BIGINT NOT NULL,
	run_id      BIGINT REFERENCES runs (id),
	updated     TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (url, sinks)
);

CREATE TABLE documents (
	url           TEXT COLLATE "C" NOT NULL UNIQUE CHECK (url <> ''),
	etag          TEXT COLLATE "C" NOT NULL,
	last_modified TEXT COLLATE "C" NOT NULL,
	encoding      TEXT COLLATE "C" NOT NULL,
	body          BYTEA NOT NULL,
	updated       TEXT COLLATE "C" NOT NULL
);

CREATE TABLE resources (
	source        TEXT COLLATE "C" NOT NULL,
	uri           TEXT COLLATE "C" NOT NULL CHECK (uri <> ''),
	resource_set  TEXT COLLATE "C" NOT NULL,
	length        BIGINT NOT NULL CHECK (length >= -1),
	md5           TEXT COLLATE "C",
	sha1          TEXT COLLATE "C",
	sha256        TEXT COLLATE "C",
	hash_other    TEXT COLLATE "C",
	type          TEXT COLLATE "C" NOT NULL,
	lastmod       TEXT COLLATE "C",
	change_time   TEXT COLLATE "C",
	package       TEXT COLLATE "C" NOT NULL,
	outcome       TEXT COLLATE "C" NOT NULL CHECK (outcome IN ('written', 'unchanged', 'deleted', 'failed')),
	deleted       BIGINT NOT NULL CHECK (deleted IN (0, 1)),
	run_id        BIGINT REFERENCES runs (id),
	updated       TEXT COLLATE "C",
	etag          TEXT COLLATE "C" NOT NULL,
	last_modified TEXT COLLATE "C" NOT NULL,
	links         TEXT,
	verified      TEXT COLLATE "C" NOT NULL DEFAULT '',
	version       TEXT COLLATE "C",
	PRIMARY KEY (source, uri)
);

CREATE TABLE deliveries (
	source      TEXT COLLATE "C" NOT NULL,
	uri         TEXT COLLATE "C" NOT NULL CHECK (uri <> ''),
	sink        TEXT COLLATE "C" NOT NULL CHECK (sink <> ''),
	length      BIGINT NOT NULL CHECK (length >= -1),
	md5         TEXT COLLATE "C",
	sha1        TEXT COLLATE "C",
	sha256      TEXT COLLATE "C",
	change_time TEXT COLLATE "C",
	PRIMARY KEY (source, uri, sink)
);

CREATE TABLE progress (
	source       TEXT COLLATE "C" NOT NULL CHECK (source <> ''),
	resource_set TEXT COLLATE "C" NOT NULL,
	key          TEXT COLLATE "C" NOT NULL CHECK (key <> ''),
	value        TEXT NOT NULL,
	run_id       BIGINT REFERENCES runs (id),
	updated      TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (source, resource_set, key)
);

CREATE TABLE sites (
	name        TEXT COLLATE "C" PRIMARY KEY CHECK (name <> ''),
	definition  TEXT NOT NULL,
	next        TEXT COLLATE "C",
	last        TEXT COLLATE "C",
	last_status TEXT COLLATE "C" NOT NULL DEFAULT '',
	last_run_id BIGINT REFERENCES runs (id),
	updated     TEXT COLLATE "C" NOT NULL,
	paused      BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE events (
	id        BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	at        TEXT COLLATE "C" NOT NULL,
	operation TEXT COLLATE "C" NOT NULL CHECK (operation <> ''),
	site      TEXT COLLATE "C" NOT NULL DEFAULT '',
	message   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_at ON events (at);

CREATE TABLE reports_sent (
	key     TEXT COLLATE "C" PRIMARY KEY CHECK (key <> ''),
	state   TEXT COLLATE "C" NOT NULL CHECK (state IN ('sending', 'sent')),
	updated TEXT COLLATE "C" NOT NULL
);

CREATE TABLE retries (
	source       TEXT COLLATE "C" NOT NULL,
	uri          TEXT COLLATE "C" NOT NULL CHECK (uri <> ''),
	resource_set TEXT COLLATE "C" NOT NULL,
	record       TEXT NOT NULL,
	change_time  TEXT COLLATE "C",
	run_id       BIGINT REFERENCES runs (id),
	failed       TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (source, uri)
);
CREATE INDEX retries_set ON retries (source, resource_set);

CREATE SEQUENCE lease_epochs;
CREATE TABLE leases (
	key    TEXT COLLATE "C" PRIMARY KEY CHECK (key <> ''),
	holder TEXT NOT NULL,
	since  TEXT COLLATE "C" NOT NULL,
	epoch  BIGINT NOT NULL
);
`,
		// 2: SQLite's version 22: tasks spread over workers, and their
		// parts (see CreateTask).
		`
CREATE TABLE tasks (
	id          BIGSERIAL PRIMARY KEY,
	source      TEXT COLLATE "C" NOT NULL CHECK (source <> ''),
	site        TEXT COLLATE "C" NOT NULL DEFAULT '',
	mode        TEXT NOT NULL,
	run_id      BIGINT REFERENCES runs (id),
	checkpoints TEXT NOT NULL,
	created     TEXT COLLATE "C" NOT NULL,
	closed      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tasks_open ON tasks (source, closed, id);
CREATE TABLE task_parts (
	seq     BIGSERIAL PRIMARY KEY,
	task_id BIGINT NOT NULL REFERENCES tasks (id),
	name    TEXT COLLATE "C" NOT NULL,
	done    INTEGER NOT NULL DEFAULT 0,
	run_id  BIGINT REFERENCES runs (id),
	holds   TEXT NOT NULL DEFAULT '',
	UNIQUE (task_id, name)
);
`,
		// 3: SQLite's version 23: the sinks that hold what the state
		// records of a source (see Holders). A report may hold an escaped
		// NUL, which JSON allows and jsonb refuses: it is read as U+FFFD
		// (a store that migrated without one migrated alike).
		`
CREATE TABLE holders (
	source TEXT COLLATE "C" NOT NULL CHECK (source <> ''),
	sink   TEXT COLLATE "C" NOT NULL CHECK (sink <> ''),
	PRIMARY KEY (source, sink)
);
INSERT INTO holders (source, sink)
SELECT DISTINCT r.source, s.value FROM runs r
CROSS JOIN LATERAL jsonb_array_elements_text(
	CASE WHEN r.report LIKE '{%' AND jsonb_typeof(replace(r.report, '\u0000', '\ufffd')::jsonb -> 'sinks') = 'array'
	THEN replace(r.report, '\u0000', '\ufffd')::jsonb -> 'sinks' ELSE '[]'::jsonb END) AS s(value)
WHERE r.mode = 'baseline' AND r.status IN ('ok', 'partial') AND s.value <> ''
ON CONFLICT DO NOTHING;
`,
		// 4: SQLite's version 24: a checkpoint is a resource set's.
		`ALTER TABLE checkpoints RENAME COLUMN capability_list TO resource_set;`,
		// 5: SQLite's version 25: one source, one key (see foldKeys).
		foldSourceKeys,
		// 6: SQLite's version 26: a change keeps its link to the original.
		`ALTER TABLE changes ADD COLUMN links TEXT COLLATE "C";`,
		// 7: SQLite's version 27: the registry's due times and indexes.
		strings.Replace(registryIndexes, "due TEXT", `due TEXT COLLATE "C"`, 1),
		// 8: SQLite's version 28: the runs the harvest log thinned.
		runsPruned,
		// 9: SQLite's version 29: each part of a spread task keeps its plan,
		// and a task says whether its source held nothing.
		`ALTER TABLE task_parts ADD COLUMN plan BYTEA; ALTER TABLE tasks ADD COLUMN fresh INTEGER NOT NULL DEFAULT 0;`,
		// 10: SQLite's version 30: a task keeps its units' slots.
		taskSlots,
	}
}
