package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// migrations returns the schema migrations in order; migration i (0-based)
// brings the schema to version i+1. Applied migrations are never edited:
// a change to the schema is a new migration appended here.
func migrations() []string {
	return []string{
		// 1: the initial schema.
		`
CREATE TABLE runs (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	mode     TEXT NOT NULL,
	source   TEXT NOT NULL,
	status   TEXT NOT NULL,
	started  TEXT,
	finished TEXT,
	report   TEXT
);

CREATE TABLE resources (
	uri           TEXT NOT NULL PRIMARY KEY CHECK (uri <> ''),
	source        TEXT NOT NULL,
	resource_set  TEXT NOT NULL,
	length        INTEGER NOT NULL CHECK (length >= -1),
	md5           TEXT,
	sha1          TEXT,
	sha256        TEXT,
	hash_other    TEXT,
	type          TEXT NOT NULL,
	lastmod       TEXT,
	change_time   TEXT,
	package       TEXT NOT NULL,
	outcome       TEXT NOT NULL CHECK (outcome IN ('written', 'unchanged', 'deleted', 'failed')),
	deleted       INTEGER NOT NULL CHECK (deleted IN (0, 1)),
	run_id        INTEGER REFERENCES runs (id),
	updated       TEXT,
	etag          TEXT NOT NULL,
	last_modified TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE failures (
	id          INTEGER PRIMARY KEY,
	run_id      INTEGER NOT NULL REFERENCES runs (id),
	uri         TEXT NOT NULL,
	package     TEXT NOT NULL,
	stage       TEXT NOT NULL,
	error       TEXT NOT NULL,
	permanent   INTEGER NOT NULL CHECK (permanent IN (0, 1)),
	change_time TEXT,
	at          TEXT
);
CREATE INDEX failures_run ON failures (run_id, id);

CREATE TABLE changes (
	id       INTEGER PRIMARY KEY,
	uri      TEXT NOT NULL CHECK (uri <> ''),
	change   TEXT NOT NULL CHECK (change IN ('created', 'updated', 'deleted')),
	datetime TEXT,
	run_id   INTEGER REFERENCES runs (id),
	package  TEXT NOT NULL
);
CREATE INDEX changes_uri ON changes (uri, datetime);
CREATE INDEX changes_run ON changes (run_id, id);

CREATE TABLE checkpoints (
	source          TEXT NOT NULL CHECK (source <> ''),
	capability_list TEXT NOT NULL,
	next            TEXT,
	baseline        TEXT,
	open            INTEGER NOT NULL CHECK (open IN (0, 1)),
	run_id          INTEGER REFERENCES runs (id),
	updated         TEXT,
	PRIMARY KEY (source, capability_list)
) WITHOUT ROWID;
`,
		// 2: per-sink deliveries of a resource's newest version, kept while
		// not every sink has it.
		`
CREATE TABLE deliveries (
	uri         TEXT NOT NULL CHECK (uri <> ''),
	sink        TEXT NOT NULL CHECK (sink <> ''),
	length      INTEGER NOT NULL CHECK (length >= -1),
	md5         TEXT,
	sha1        TEXT,
	sha256      TEXT,
	change_time TEXT,
	PRIMARY KEY (uri, sink)
) WITHOUT ROWID;
`,
		// 3: a resource's links (describedby, describes, …) as JSON.
		`ALTER TABLE resources ADD COLUMN links TEXT;`,
		// 4: the change documents read, open (no until) or closed.
		`
CREATE TABLE change_documents (
	url          TEXT NOT NULL PRIMARY KEY CHECK (url <> ''),
	source       TEXT NOT NULL,
	resource_set TEXT NOT NULL,
	capability   TEXT NOT NULL,
	from_time    TEXT,
	until_time   TEXT,
	open         INTEGER NOT NULL CHECK (open IN (0, 1)),
	run_id       INTEGER REFERENCES runs (id),
	seen         TEXT
) WITHOUT ROWID;
`,
		// 5: packages whose every resource a run delivered to a set of
		// sinks, by the package's fingerprint (its declared length and
		// hashes), so that a re-sync skips them without reading them.
		`
CREATE TABLE packages (
	url         TEXT NOT NULL CHECK (url <> ''),
	sinks       TEXT NOT NULL,
	fingerprint TEXT NOT NULL CHECK (fingerprint <> ''),
	resources   INTEGER NOT NULL,
	run_id      INTEGER REFERENCES runs (id),
	updated     TEXT NOT NULL,
	PRIMARY KEY (url, sinks)
) WITHOUT ROWID;
`,
		// 6: which check a resource's bytes passed (see the Verified
		// constants); '' for resources recorded before it was kept.
		`ALTER TABLE resources ADD COLUMN verified TEXT NOT NULL DEFAULT '';`,
		// 7: the last copy of each small ResourceSync document read, with
		// its validators, so that the next run asks the server whether it
		// changed (If-None-Match, If-Modified-Since) and reads the copy on
		// a 304.
		`
CREATE TABLE documents (
	url           TEXT NOT NULL UNIQUE CHECK (url <> ''),
	etag          TEXT NOT NULL,
	last_modified TEXT NOT NULL,
	encoding      TEXT NOT NULL,
	body          BLOB NOT NULL,
	updated       TEXT NOT NULL
);
`,
		// 8: records belong to a source: resources and deliveries are keyed
		// by (source, uri), so two sources may publish the same URI.
		// Existing rows keep the source they were recorded with.
		`
CREATE TABLE resources_by_source (
	source        TEXT NOT NULL,
	uri           TEXT NOT NULL CHECK (uri <> ''),
	resource_set  TEXT NOT NULL,
	length        INTEGER NOT NULL CHECK (length >= -1),
	md5           TEXT,
	sha1          TEXT,
	sha256        TEXT,
	hash_other    TEXT,
	type          TEXT NOT NULL,
	lastmod       TEXT,
	change_time   TEXT,
	package       TEXT NOT NULL,
	outcome       TEXT NOT NULL CHECK (outcome IN ('written', 'unchanged', 'deleted', 'failed')),
	deleted       INTEGER NOT NULL CHECK (deleted IN (0, 1)),
	run_id        INTEGER REFERENCES runs (id),
	updated       TEXT,
	etag          TEXT NOT NULL,
	last_modified TEXT NOT NULL,
	links         TEXT,
	verified      TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (source, uri)
) WITHOUT ROWID;
INSERT INTO resources_by_source (source, uri, resource_set, length, md5, sha1, sha256, hash_other, type,
	lastmod, change_time, package, outcome, deleted, run_id, updated, etag, last_modified, links, verified)
SELECT source, uri, resource_set, length, md5, sha1, sha256, hash_other, type,
	lastmod, change_time, package, outcome, deleted, run_id, updated, etag, last_modified, links, verified
FROM resources;
CREATE TABLE deliveries_by_source (
	source      TEXT NOT NULL,
	uri         TEXT NOT NULL CHECK (uri <> ''),
	sink        TEXT NOT NULL CHECK (sink <> ''),
	length      INTEGER NOT NULL CHECK (length >= -1),
	md5         TEXT,
	sha1        TEXT,
	sha256      TEXT,
	change_time TEXT,
	PRIMARY KEY (source, uri, sink)
) WITHOUT ROWID;
INSERT INTO deliveries_by_source (source, uri, sink, length, md5, sha1, sha256, change_time)
SELECT coalesce(r.source, ''), d.uri, d.sink, d.length, d.md5, d.sha1, d.sha256, d.change_time
FROM deliveries d LEFT JOIN resources r ON r.uri = d.uri;
DROP TABLE resources;
DROP TABLE deliveries;
ALTER TABLE resources_by_source RENAME TO resources;
ALTER TABLE deliveries_by_source RENAME TO deliveries;
`,
		// 9: a planner's marks of how far an unfinished task got, per
		// source and resource set (see Progress).
		`
CREATE TABLE progress (
	source       TEXT NOT NULL CHECK (source <> ''),
	resource_set TEXT NOT NULL,
	key          TEXT NOT NULL CHECK (key <> ''),
	value        TEXT NOT NULL,
	run_id       INTEGER REFERENCES runs (id),
	updated      TEXT NOT NULL,
	PRIMARY KEY (source, resource_set, key)
) WITHOUT ROWID;
`,
		// 10: the site registry (see Site).
		`
CREATE TABLE sites (
	name        TEXT PRIMARY KEY CHECK (name <> ''),
	definition  TEXT NOT NULL,
	next        TEXT,
	last        TEXT,
	last_status TEXT NOT NULL DEFAULT '',
	last_run_id INTEGER REFERENCES runs (id),
	updated     TEXT NOT NULL
) WITHOUT ROWID;
`,
		// 11: the harvest log (seed 004's HARVEST_LOG): a run's site, and
		// the operations that are not runs (the harvester started and
		// stopped).
		`
ALTER TABLE runs ADD COLUMN site TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_started ON runs (started);
CREATE TABLE events (
	id        INTEGER PRIMARY KEY,
	at        TEXT NOT NULL,
	operation TEXT NOT NULL CHECK (operation <> ''),
	site      TEXT NOT NULL DEFAULT '',
	message   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_at ON events (at);
`,
		// 12: the reports sent, so that none is sent twice.
		`
CREATE TABLE reports_sent (
	key     TEXT PRIMARY KEY CHECK (key <> ''),
	state   TEXT NOT NULL CHECK (state IN ('sending', 'sent')),
	updated TEXT NOT NULL
) WITHOUT ROWID;
`,
		// 13: the change log as a republished source needs it: each
		// change's source, when the destination recorded it (a stamp
		// unique and increasing in commit order, see Commit), and the
		// fixity and type of the version it produced. Existing rows take
		// their run's source and end (or start).
		`
ALTER TABLE changes ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE changes ADD COLUMN recorded TEXT;
ALTER TABLE changes ADD COLUMN length INTEGER NOT NULL DEFAULT -1;
ALTER TABLE changes ADD COLUMN md5 TEXT;
ALTER TABLE changes ADD COLUMN sha1 TEXT;
ALTER TABLE changes ADD COLUMN sha256 TEXT;
ALTER TABLE changes ADD COLUMN hash_other TEXT;
ALTER TABLE changes ADD COLUMN type TEXT NOT NULL DEFAULT '';
UPDATE changes SET
	source = coalesce((SELECT source FROM runs WHERE runs.id = changes.run_id), ''),
	recorded = (SELECT coalesce(finished, started) FROM runs WHERE runs.id = changes.run_id);
CREATE INDEX changes_recorded ON changes (recorded);
CREATE INDEX changes_source ON changes (source, recorded);
CREATE INDEX changes_source_uri ON changes (source, uri, recorded);
`,
		// 14: the records whose own permanent failure is outstanding,
		// asked for again by the next run (see Retry).
		`
CREATE TABLE retries (
	source       TEXT NOT NULL,
	uri          TEXT NOT NULL CHECK (uri <> ''),
	resource_set TEXT NOT NULL,
	record       TEXT NOT NULL,
	change_time  TEXT,
	run_id       INTEGER REFERENCES runs (id),
	failed       TEXT NOT NULL,
	PRIMARY KEY (source, uri)
) WITHOUT ROWID;
CREATE INDEX retries_set ON retries (source, resource_set);
`,
		// 15: the version of a resource held, as its protocol names it
		// (see Resource.Version).
		`ALTER TABLE resources ADD COLUMN version TEXT;`,
		// 16: change stamps (changes.recorded) become integers,
		// microseconds since the Unix epoch. A text stamp is rounded down
		// to its microsecond; stamps that then collide, and the old stamps
		// migration 13 gave every change of one run, are made unique by
		// moving each up, in the old order (stamp, then id), to one
		// microsecond past the one before it when it is not already
		// later. A stamp that is not this package's text (SQLite cannot
		// read it as a time) becomes NULL, as a change recorded before
		// stamps were kept.
		`
ALTER TABLE changes ADD COLUMN recorded_us INTEGER;
UPDATE changes SET recorded_us = w.stamp FROM (
	SELECT id, CASE WHEN us IS NOT NULL THEN max(us - k) OVER (ORDER BY recorded, id ROWS UNBOUNDED PRECEDING) + k END AS stamp
	FROM (
		SELECT id, recorded, row_number() OVER (ORDER BY recorded, id) AS k,
			CASE WHEN length(recorded) = 30 AND substr(recorded, 20, 1) = '.' AND substr(recorded, 30, 1) = 'Z'
				THEN unixepoch(substr(recorded, 1, 19)) * 1000000 + CAST(substr(recorded, 21, 6) AS INTEGER)
				ELSE unixepoch(recorded) * 1000000
			END AS us
		FROM changes WHERE recorded IS NOT NULL
	)
) AS w WHERE w.id = changes.id;
DROP INDEX changes_recorded;
DROP INDEX changes_source;
DROP INDEX changes_source_uri;
ALTER TABLE changes DROP COLUMN recorded;
ALTER TABLE changes RENAME COLUMN recorded_us TO recorded;
CREATE INDEX changes_recorded ON changes (recorded);
CREATE INDEX changes_source ON changes (source, recorded);
CREATE INDEX changes_source_uri ON changes (source, uri, recorded);
`,
		// 17: no query reads the change log by URI alone (a resource's
		// changes are read by source and URI, changes_source_uri): the
		// index of migration 1 only cost every change's commit.
		`DROP INDEX changes_uri;`,
		// 18: the last modification of the version a change produced (see
		// ChangeRecord.Lastmod): a republished Change List's lastmod.
		`ALTER TABLE changes ADD COLUMN lastmod TEXT;`,
		// 19: the source's own description a resource set was found from
		// (see Checkpoint.DescribedBy): a republished Capability List's
		// describedby.
		`ALTER TABLE checkpoints ADD COLUMN described_by TEXT NOT NULL DEFAULT '';`,
		// 20: a source's runs, newest first, without reading every run
		// (Snapshot.SiteOf, once per source a publication names).
		`CREATE INDEX runs_source ON runs (source, id);`,
		// 21: sites paused (see SetSitePaused).
		`ALTER TABLE sites ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;`,
		// 22: tasks spread over workers, and their parts (see CreateTask).
		`
CREATE TABLE tasks (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	source      TEXT NOT NULL CHECK (source <> ''),
	site        TEXT NOT NULL DEFAULT '',
	mode        TEXT NOT NULL,
	run_id      INTEGER REFERENCES runs (id),
	checkpoints TEXT NOT NULL,
	created     TEXT NOT NULL,
	closed      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tasks_open ON tasks (source, closed, id);
CREATE TABLE task_parts (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	task_id INTEGER NOT NULL REFERENCES tasks (id),
	name    TEXT NOT NULL,
	done    INTEGER NOT NULL DEFAULT 0,
	run_id  INTEGER REFERENCES runs (id),
	holds   TEXT NOT NULL DEFAULT '',
	UNIQUE (task_id, name)
);
`,
		// 23: the sinks that hold what the state records of a source (see
		// Holders): those of its baselines until now.
		`
CREATE TABLE holders (
	source TEXT NOT NULL CHECK (source <> ''),
	sink   TEXT NOT NULL CHECK (sink <> ''),
	PRIMARY KEY (source, sink)
) WITHOUT ROWID;
INSERT OR IGNORE INTO holders (source, sink)
SELECT r.source, s.value FROM runs r, json_each(r.report, '$.sinks') s
WHERE r.mode = 'baseline' AND r.status IN ('ok', 'partial') AND json_valid(r.report) AND s.type = 'text' AND s.value <> '';
`,
		// 24: a checkpoint is a resource set's, whatever its protocol
		// calls it.
		`ALTER TABLE checkpoints RENAME COLUMN capability_list TO resource_set;`,
		// 25: one source, one key: the keys that normalise alike are folded
		// into one (see foldSourceKeys).
		foldSourceKeys,
		// 26: a change keeps its resource's link to the original (via).
		`ALTER TABLE changes ADD COLUMN links TEXT;`,
		// 27: ten thousand sites: each site's next harvest as the registry
		// computed it (see SetSitesDue), and the indexes the status page and
		// the due sites are read by.
		registryIndexes,
		// 28: the runs whose details the harvest log keeps (see PruneLog).
		runsPruned,
		// 29: each part of a spread task keeps the plan its planner gave it
		// (see CreateTask), until the task closes; a task says whether its
		// source held nothing when it was divided.
		`ALTER TABLE task_parts ADD COLUMN plan BLOB; ALTER TABLE tasks ADD COLUMN fresh INTEGER NOT NULL DEFAULT 0;`,
		// 30: a task keeps the slots its units share (see Task.Slots).
		taskSlots,
	}
}

// taskSlots is the migration of both stores that keeps a spread task's
// slots, so that a unit queued again shares the slots its task was
// divided with.
const taskSlots = `ALTER TABLE tasks ADD COLUMN slots INTEGER NOT NULL DEFAULT 0;`

// runsPruned is the migration of both stores that marks the runs PruneLog
// thinned, and indexes those it has not by their start.
const runsPruned = `
ALTER TABLE runs ADD COLUMN pruned INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_unpruned ON runs (started) WHERE pruned = 0;
`

// registryIndexes is the migration of both stores that keeps each site's
// next harvest (due: NULL when it must be computed again) and indexes the
// registry's reads: the due sites, a site's runs and log, the runs under
// way.
const registryIndexes = `
ALTER TABLE sites ADD COLUMN due TEXT;
CREATE INDEX sites_due ON sites (due) WHERE paused = 0;
CREATE INDEX runs_site ON runs (site, id);
CREATE INDEX runs_running ON runs (site) WHERE status = 'running';
CREATE INDEX runs_status ON runs (status);
CREATE INDEX events_site ON events (site, id);
`

// claimSQLite marks the file as an rsharvest state store (its application
// id), in migrate's transaction.
func claimSQLite(ctx context.Context, tx *sql.Tx) error {
	var id int64
	if err := tx.QueryRowContext(ctx, "PRAGMA application_id").Scan(&id); err != nil {
		return notStateFile(err)
	}
	if id == 0 {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
			return fmt.Errorf("set application id: %w", err)
		}
	}
	return nil
}

// migrate brings the schema up to date in one write transaction. Running it
// concurrently from two processes is safe: the second waits for the first
// and then finds nothing to do. A schema already up to date is found so by
// one read, without the write lock, which every commit of every process on
// the store takes: opening a store (a command, a status page) does not
// wait for, nor hold up, the harvests running on it.
func (s *Store) migrate(ctx context.Context) (err error) {
	var current int
	if err := s.w.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_version").Scan(&current); err == nil && current == len(s.dialect.migrations()) {
		return nil
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", notStateFile(err))
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := s.dialect.claim(ctx, tx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	version INTEGER PRIMARY KEY,
	applied TEXT NOT NULL
)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_version").Scan(&have); err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	migs := s.dialect.migrations()
	if have > len(migs) {
		return fmt.Errorf("%w: file has version %d, this program knows up to %d", ErrSchemaNewer, have, len(migs))
	}
	now := time.Now().UTC().Format(timeLayout)
	for v := have + 1; v <= len(migs); v++ {
		if migs[v-1] == foldSourceKeys {
			err = foldKeys(ctx, tx)
		} else {
			_, err = tx.ExecContext(ctx, migs[v-1])
		}
		if err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_version (version, applied) VALUES (?, ?)", v, now); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// foldSourceKeys is the migration that folds the keys of one source spelt
// several ways (http://host:8080 and http://host:8080/, HTTP://Host:80/ and
// http://host/) into its one key, SourceKey's: a step of Go, not of SQL.
const foldSourceKeys = "-- fold the source keys that normalise alike (see foldKeys)"

// keyedTable is a table that names a source, with the columns that, with
// the source, identify one of its rows (none: rows are never in conflict).
type keyedTable struct {
	name string
	key  []string
}

// keyedTables are the tables that named a source when the fold migration
// was written (SQLite's version 25, PostgreSQL's 5): a step of a migration,
// it is never extended, since a table added later does not exist yet when
// a store older than that migrates.
func keyedTables() []keyedTable {
	return []keyedTable{
		{"resources", []string{"uri"}},
		{"deliveries", []string{"uri", "sink"}},
		{"checkpoints", []string{"resource_set"}},
		{"progress", []string{"resource_set", "key"}},
		{"retries", []string{"uri"}},
		{"holders", []string{"sink"}},
		{"change_documents", nil},
		{"changes", nil},
		{"tasks", nil},
		{"runs", nil},
	}
}

// foldKeys renames every source key of the state to SourceKey's, in tx.
// Where two spellings of one source hold a row of the same identity (the
// same resource, the same checkpoint), the row already under the
// normalised key is kept, else the first spelling's in byte order.
func foldKeys(ctx context.Context, tx *sql.Tx) error {
	var keys []string
	for _, t := range keyedTables() {
		rows, err := tx.QueryContext(ctx, "SELECT DISTINCT source FROM "+t.name)
		if err != nil {
			return fmt.Errorf("fold source keys: %s: %w", t.name, err)
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				_ = rows.Close()
				return fmt.Errorf("fold source keys: %s: %w", t.name, err)
			}
			keys = append(keys, k)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("fold source keys: %s: %w", t.name, err)
		}
	}
	slices.Sort(keys)
	for _, old := range slices.Compact(keys) {
		key := SourceKey(old)
		if key == old {
			continue
		}
		for _, t := range keyedTables() {
			stmts := []string{"UPDATE " + t.name + " SET source = ? WHERE source = ?"}
			args := [][]any{{key, old}}
			if t.key != nil {
				same := ""
				for _, c := range t.key {
					same += " AND o." + c + " = " + t.name + "." + c
				}
				stmts[0] += " AND NOT EXISTS (SELECT 1 FROM " + t.name + " o WHERE o.source = ?" + same + ")"
				args[0] = append(args[0], key)
				stmts = append(stmts, "DELETE FROM "+t.name+" WHERE source = ?")
				args = append(args, []any{old})
			}
			for i, q := range stmts {
				if _, err := tx.ExecContext(ctx, q, args[i]...); err != nil {
					return fmt.Errorf("fold source keys: %s: %w", t.name, err)
				}
			}
		}
	}
	return nil
}
