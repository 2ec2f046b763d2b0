package state

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

// oldRows are representative rows of a state file at schema version v,
// written with SQL valid at that version: each table from the version
// that made it, with the columns it had then.
func oldRows(v int) []string {
	const (
		t1 = "2024-01-02T03:04:05.000000001Z"
		t2 = "2024-01-02T03:04:06.000000002Z"
	)
	var out []string
	add := func(from int, stmts ...string) {
		if v >= from {
			out = append(out, stmts...)
		}
	}
	add(1,
		`INSERT INTO runs (id, mode, source, status, started, finished, report) VALUES (1, 'baseline', 'http://a/', 'ok', '`+t1+`', '`+t2+`', '{"n":1}')`,
		`INSERT INTO resources (uri, source, resource_set, length, md5, sha1, sha256, hash_other, type, lastmod, change_time, package, outcome, deleted, run_id, updated, etag, last_modified)
			VALUES ('http://a/1', 'http://a/', 'http://a/cl', 5, '1e0d5cb8ef6ba40c99b14c0237be735e', NULL, NULL, NULL, 'text/plain', '`+t1+`', '`+t1+`', 'http://a/p.zip', 'written', 0, 1, '`+t2+`', '"e"', '')`,
		`INSERT INTO failures (run_id, uri, package, stage, error, permanent, change_time, at) VALUES (1, 'http://a/2', 'http://a/p.zip', 'verify', 'bad md5', 1, '`+t1+`', '`+t2+`')`,
	)
	// The checkpoint's resource set, a capability list's until 24.
	setColumn := "capability_list"
	if v >= 24 {
		setColumn = "resource_set"
	}
	add(1, `INSERT INTO checkpoints (source, `+setColumn+`, next, baseline, open, run_id, updated) VALUES ('http://a/', 'http://a/cl', '`+t1+`', NULL, 1, 1, '`+t2+`')`)
	// Changes before stamps were kept (13 gives them their run's end,
	// the same for both), then with a stamp of their own.
	if v < 13 {
		add(1,
			`INSERT INTO changes (id, uri, change, datetime, run_id, package) VALUES (1, 'http://a/1', 'created', '`+t1+`', 1, 'http://a/p.zip')`,
			`INSERT INTO changes (id, uri, change, datetime, run_id, package) VALUES (2, 'http://a/3', 'deleted', '`+t1+`', 1, 'http://a/p.zip')`,
		)
	} else {
		// Text stamps until 16, the same for both; then integers.
		rec1, rec2 := "'"+t2+"'", "'"+t2+"'"
		if v >= 16 {
			us := time.Date(2024, 1, 2, 3, 4, 6, 2, time.UTC).UnixMicro()
			rec1, rec2 = fmt.Sprint(us), fmt.Sprint(us+1)
		}
		add(13,
			`INSERT INTO changes (id, uri, change, datetime, run_id, package, source, recorded, length, md5, type)
				VALUES (1, 'http://a/1', 'created', '`+t1+`', 1, 'http://a/p.zip', 'http://a/', `+rec1+`, 5, '1e0d5cb8ef6ba40c99b14c0237be735e', 'text/plain')`,
			`INSERT INTO changes (id, uri, change, datetime, run_id, package, source, recorded)
				VALUES (2, 'http://a/3', 'deleted', '`+t1+`', 1, 'http://a/p.zip', 'http://a/', `+rec2+`)`,
		)
	}
	if v < 8 {
		add(2, `INSERT INTO deliveries (uri, sink, length, md5, change_time) VALUES ('http://a/1', 'sink1', 5, '1e0d5cb8ef6ba40c99b14c0237be735e', '`+t1+`')`)
	} else {
		add(8, `INSERT INTO deliveries (source, uri, sink, length, md5, change_time) VALUES ('http://a/', 'http://a/1', 'sink1', 5, '1e0d5cb8ef6ba40c99b14c0237be735e', '`+t1+`')`)
	}
	add(3, `UPDATE resources SET links = '[{"rel":"describedby","href":"http://a/m"}]'`)
	add(4, `INSERT INTO change_documents (url, source, resource_set, capability, from_time, until_time, open, run_id, seen)
		VALUES ('http://a/cl1.xml', 'http://a/', 'http://a/cl', 'changelist', '`+t1+`', NULL, 1, 1, '`+t2+`')`)
	add(5, `INSERT INTO packages (url, sinks, fingerprint, resources, run_id, updated) VALUES ('http://a/p.zip', 'sink1', 'fp', 1, 1, '2024-01-02T03:04:06.000000002Z')`)
	add(6, `UPDATE resources SET verified = 'hash'`)
	add(7, `INSERT INTO documents (url, etag, last_modified, encoding, body, updated) VALUES ('http://a/rl.xml', '"d"', '', '', X'3c75726c7365742f3e', '2024-01-02T03:04:06.000000002Z')`)
	add(9, `INSERT INTO progress (source, resource_set, key, value, run_id, updated) VALUES ('http://a/', 'http://a/cl2', 'page', '2', 1, '`+t2+`')`)
	add(10, `INSERT INTO sites (name, definition, next, last, last_status, last_run_id, updated) VALUES ('a', 'url: http://a/', NULL, '`+t1+`', 'ok', 1, '`+t2+`')`)
	add(11,
		`UPDATE runs SET site = 'a'`,
		`INSERT INTO events (at, operation, site, message) VALUES ('`+t1+`', 'started', '', 'hello')`,
	)
	add(12, `INSERT INTO reports_sent (key, state, updated) VALUES ('r1', 'sent', '`+t2+`')`)
	add(14, `INSERT INTO retries (source, uri, resource_set, record, change_time, run_id, failed) VALUES ('http://a/', 'http://a/2', 'http://a/cl', 'rec', '`+t1+`', 1, '`+t2+`')`)
	add(15, `UPDATE resources SET version = '7'`)
	return out
}

// TestMigrateEveryVersion: a state file at every schema version this
// package ever wrote (0, none, to the newest), holding representative
// rows, opens; its rows come back through the current API, and the
// current schema takes a commit.
func TestMigrateEveryVersion(t *testing.T) {
	t1 := time.Date(2024, 1, 2, 3, 4, 5, 1, time.UTC)
	t2 := time.Date(2024, 1, 2, 3, 4, 6, 2, time.UTC)
	for v := 0; v <= len(migrations()); v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "old.db")
			createAtVersion(t, path, v, oldRows(v)...)
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatalf("open a version-%d file: %v", v, err)
			}
			defer s.Close()

			var have int
			if err := s.r.QueryRowContext(ctx, "SELECT max(version) FROM schema_version").Scan(&have); err != nil || have != len(migrations()) {
				t.Errorf("schema version %d, %v; want %d", have, err, len(migrations()))
			}
			if v >= 1 {
				checkOldRows(t, s, v, t1, t2)
			}

			// The current schema works.
			run, err := s.BeginRun(ctx, Run{Mode: "incremental", Source: "http://a/"})
			if err != nil {
				t.Fatal(err)
			}
			b := Batch{
				Resources: []Resource{{URI: "http://a/9", Source: "http://a/", Length: 1, Outcome: OutcomeWritten, RunID: run, Version: "1", Verified: VerifiedLength}},
				Changes:   []ChangeRecord{{URI: "http://a/9", Change: ChangeCreated, Source: "http://a/", RunID: run, Length: 1}},
				Failures:  []Failure{{RunID: run, URI: "http://a/8", Stage: "fetch", Error: "e"}},
			}
			if err := s.Commit(ctx, b); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if r, ok, err := s.Resource(ctx, "http://a/", "http://a/9"); err != nil || !ok || r.Version != "1" || r.RunID != run {
				t.Errorf("new resource = %+v, %v, %v", r, ok, err)
			}
			var stamps []time.Time
			if err := s.View(ctx, func(v *Snapshot) error {
				return v.WalkChanges(ctx, ChangeQuery{Source: "http://a/"}, func(c ChangeRecord) error {
					stamps = append(stamps, c.Recorded)
					return nil
				})
			}); err != nil {
				t.Fatal(err)
			}
			want := 1
			if v >= 1 {
				want = 3
			}
			if len(stamps) != want {
				t.Errorf("%d changes walked, want %d", len(stamps), want)
			}
			for i := 1; i < len(stamps); i++ {
				if !stamps[i].After(stamps[i-1]) {
					t.Errorf("stamps %v: not strictly increasing", stamps)
				}
			}
		})
	}
}

// checkOldRows checks that oldRows(v) came through the migrations.
func checkOldRows(t *testing.T, s *Store, v int, t1, t2 time.Time) {
	t.Helper()
	ctx := context.Background()
	const src = "http://a/"
	r, err := s.Run(ctx, 1)
	if err != nil || r.Mode != "baseline" || r.Status != "ok" || !r.Started.Equal(t1) || !r.Finished.Equal(t2) || string(r.Report) != `{"n":1}` ||
		(v >= 11) != (r.Site == "a") {
		t.Errorf("run = %+v, %v", r, err)
	}
	res, ok, err := s.Resource(ctx, src, "http://a/1")
	if err != nil || !ok || res.Length != 5 || res.Hashes.MD5 == nil || res.Package != "http://a/p.zip" || res.RunID != 1 ||
		!res.ChangeTime.Equal(t1) || !res.Updated.Equal(t2) || res.ETag != `"e"` ||
		(v >= 3) != (len(res.Links) == 1) || (v >= 6) != (res.Verified == VerifiedHash) || (v >= 15) != (res.Version == "7") {
		t.Errorf("resource = %+v, %v, %v", res, ok, err)
	}
	if fs, _, err := s.Failures(ctx, 1, 1000); err != nil || len(fs) != 1 || fs[0].Error != "bad md5" || !fs[0].Permanent || !fs[0].At.Equal(t2) {
		t.Errorf("failures = %+v, %v", fs, err)
	}
	if c, ok, err := s.Checkpoint(ctx, src, "http://a/cl"); err != nil || !ok || !c.Next.Equal(t1) || !c.Open || c.RunID != 1 {
		t.Errorf("checkpoint = %+v, %v, %v", c, ok, err)
	}
	cs, err := s.Changes(ctx, 1)
	if err != nil || len(cs) != 2 || cs[0].URI != "http://a/1" || cs[1].Change != ChangeDeleted || cs[0].Source != src ||
		!cs[0].Recorded.Equal(t2.Truncate(time.Microsecond)) || !cs[1].Recorded.After(cs[0].Recorded) {
		t.Errorf("changes = %+v, %v; want two, of %s, stamped from %v, increasing", cs, err, src, t2.Truncate(time.Microsecond))
	}
	if v >= 2 {
		if ds, err := s.Deliveries(ctx, src, "http://a/1"); err != nil || len(ds) != 1 || ds[0].Sink != "sink1" || !ds[0].ChangeTime.Equal(t1) {
			t.Errorf("deliveries = %+v, %v", ds, err)
		}
	}
	if v >= 4 {
		if ds, err := s.ChangeDocuments(ctx, src); err != nil || len(ds) != 1 || !ds[0].Open || !ds[0].From.Equal(t1) {
			t.Errorf("change documents = %+v, %v", ds, err)
		}
	}
	if v >= 5 {
		if p, ok, err := s.PackageDone(ctx, "http://a/p.zip", "sink1"); err != nil || !ok || p.Fingerprint != "fp" || !p.Updated.Equal(t2) {
			t.Errorf("package = %+v, %v, %v", p, ok, err)
		}
	}
	if v >= 7 {
		if d, ok, err := s.Document(ctx, "http://a/rl.xml"); err != nil || !ok || string(d.Body) != "<urlset/>" || d.ETag != `"d"` {
			t.Errorf("document = %+v, %v, %v", d, ok, err)
		}
	}
	if v >= 9 {
		if p, err := s.Progress(ctx, src, "http://a/cl2"); err != nil || p["page"] != "2" {
			t.Errorf("progress = %v, %v", p, err)
		}
	}
	if v >= 10 {
		if st, err := s.Site(ctx, "a"); err != nil || st.Definition != "url: http://a/" || !st.Last.Equal(t1) || st.LastRunID != 1 {
			t.Errorf("site = %+v, %v", st, err)
		}
	}
	if v >= 11 {
		if es, err := s.Events(ctx, time.Time{}, ""); err != nil || len(es) != 1 || es[0].Message != "hello" || !es[0].At.Equal(t1) {
			t.Errorf("events = %+v, %v", es, err)
		}
	}
	if v >= 12 {
		if ok, err := s.ClaimReport(ctx, "r1"); err != nil || ok {
			t.Errorf("ClaimReport(sent before) = %v, %v; want false", ok, err)
		}
	}
	if v >= 14 {
		if rs, err := s.Retries(ctx, src, "http://a/cl"); err != nil || len(rs) != 1 || rs[0].Record != "rec" || !rs[0].ChangeTime.Equal(t1) {
			t.Errorf("retries = %+v, %v", rs, err)
		}
	}
}

// TestMigrateFoldsSourceKeys: a state holding one source under several
// spellings (before sources were normalised) holds it, once migrated,
// under its one key: every row of each spelling, the row already under
// the normalised key kept where two are of one resource — in a file and
// in PostgreSQL.
func TestMigrateFoldsSourceKeys(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			where := filepath.Join(t.TempDir(), "state.db")
			if kind == "postgres" {
				server, stop, err := testbin.Postgres(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer stop()
				where = server
			}
			s, err := Open(ctx, where)
			if err != nil {
				t.Fatal(err)
			}
			const variant, key = "HTTP://Host:80", "http://host/"
			run, err := s.BeginRun(ctx, Run{Mode: "baseline", Source: variant})
			if err != nil {
				t.Fatal(err)
			}
			res := func(src, uri, version string) Resource {
				return Resource{Source: src, URI: uri, Length: 1, Outcome: OutcomeWritten, RunID: run, Version: version, Verified: VerifiedLength}
			}
			if err := s.Commit(ctx, Batch{Resources: []Resource{
				res(variant, "http://host/1", "variant's"), res(variant, "http://host/2", "variant's"), res(key, "http://host/1", "key's"),
			}}); err != nil {
				t.Fatal(err)
			}
			must(t, s.AddHolders(ctx, variant, []string{"fs:/a"}))
			must(t, s.AddHolders(ctx, key, []string{"fs:/a", "fs:/b"}))
			// The migration's step, on the rows as the previous version
			// left them.
			tx, err := s.beginWrite(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := foldKeys(ctx, tx); err != nil {
				t.Fatal(err)
			}
			must(t, tx.Commit())
			must(t, s.Close())

			s = openClosed(t, where)
			for uri, want := range map[string]string{"http://host/1": "key's", "http://host/2": "variant's"} {
				if r, ok, err := s.Resource(ctx, key, uri); err != nil || !ok || r.Version != want {
					t.Errorf("Resource(%s) = %+v, %v, %v; want version %s", uri, r, ok, err, want)
				}
				if _, ok, err := s.Resource(ctx, variant, uri); err != nil || ok {
					t.Errorf("Resource(%s, %s) still held: %v", variant, uri, err)
				}
			}
			if got, err := s.Holders(ctx, key); err != nil || !slices.Equal(got, []string{"fs:/a", "fs:/b"}) {
				t.Errorf("Holders = %q, %v", got, err)
			}
			if got, err := s.Holders(ctx, variant); err != nil || len(got) != 0 {
				t.Errorf("Holders(%s) = %q, %v; want none", variant, got, err)
			}
			var runs int
			if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM runs WHERE source = ?", key).Scan(&runs); err != nil || runs != 1 {
				t.Errorf("runs under %s: %d, %v; want 1", key, runs, err)
			}
		})
	}
}
