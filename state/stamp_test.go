package state

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestStampsClockSetBack: change stamps are whole microseconds, unique and
// strictly increasing in commit order when the clock stands still, goes
// back, or ticks by less than a microsecond.
func TestStampsClockSetBack(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	base := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	clocks := []time.Time{
		base,
		base,                            // the same instant
		base.Add(300 * time.Nanosecond), // the same microsecond
		base.Add(-time.Hour),            // set back
		base.Add(-time.Hour),
		base.Add(time.Hour), // forward again: the clock wins
		base.Add(time.Hour).Add(time.Microsecond),
	}
	i := 0
	s.clock = func() time.Time { return clocks[i] }
	var got []time.Time
	for i = range clocks {
		b := Batch{Changes: []ChangeRecord{
			{URI: fmt.Sprintf("u%d", i), Change: ChangeCreated, Source: "S", Length: -1},
			{URI: fmt.Sprintf("v%d", i), Change: ChangeCreated, Source: "S", Length: -1},
		}}
		if err := s.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
		for _, c := range b.Changes {
			got = append(got, c.Recorded)
		}
	}
	micro := func(t time.Time) time.Time { return t.Truncate(time.Microsecond) }
	want := []time.Time{
		micro(base), micro(base).Add(1 * time.Microsecond),
		micro(base).Add(2 * time.Microsecond), micro(base).Add(3 * time.Microsecond),
		micro(base).Add(4 * time.Microsecond), micro(base).Add(5 * time.Microsecond),
		micro(base).Add(6 * time.Microsecond), micro(base).Add(7 * time.Microsecond),
		micro(base).Add(8 * time.Microsecond), micro(base).Add(9 * time.Microsecond),
		micro(base.Add(time.Hour)), micro(base.Add(time.Hour)).Add(time.Microsecond),
		micro(base.Add(time.Hour)).Add(2 * time.Microsecond), micro(base.Add(time.Hour)).Add(3 * time.Microsecond),
	}
	var walked []time.Time
	err := s.View(ctx, func(v *Snapshot) error {
		last, err := v.LastRecorded(ctx)
		if err != nil {
			return err
		}
		if !last.Equal(want[len(want)-1]) {
			t.Errorf("LastRecorded = %v, want %v", last, want[len(want)-1])
		}
		return v.WalkChanges(ctx, ChangeQuery{Source: "S"}, func(c ChangeRecord) error {
			walked = append(walked, c.Recorded)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if i >= len(got) || !got[i].Equal(want[i]) || got[i].Location() != time.UTC {
			t.Fatalf("stamps given back by Commit = %v, want %v (UTC)", got, want)
		}
		if i >= len(walked) || !walked[i].Equal(want[i]) {
			t.Fatalf("stamps walked = %v, want %v", walked, want)
		}
	}

	// The column holds integers.
	var typ string
	if err := s.r.QueryRowContext(ctx, "SELECT DISTINCT typeof(recorded) FROM changes").Scan(&typ); err != nil || typ != "integer" {
		t.Errorf("typeof(recorded) = %q, %v; want integer", typ, err)
	}
}

// TestMigrateStampsToMicroseconds: migration 16 turns text stamps into
// integer microseconds, rounding down, and keeps them unique and strictly
// increasing in their old order (stamp, then id) where rounding, or the
// shared stamps migration 13 gave a run's changes, made them collide.
func TestMigrateStampsToMicroseconds(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v15.db")
	const t0 = "2025-03-04T05:06:07.000001"
	rows := []struct {
		id       int
		recorded any // text, or nil
		want     int64
	}{
		// Old order: 3, 1, 2 (stamp), 4, 5, 6 (same stamp: by id), 7, 8 …
		{1, t0 + "500Z", 1},
		{2, t0 + "999Z", 2}, // the same microsecond as 1
		{3, t0 + "000Z", 0},
		{4, "2025-03-04T05:06:07.000002000Z", 3}, // taken by 2: moved up
		{5, "2025-03-04T05:06:07.000002000Z", 4},
		{6, "2025-03-04T05:06:07.000002000Z", 5},
		{7, "2025-03-04T05:06:07.000009000Z", 8}, // free: kept
		{8, "2025-03-04T05:06:08.000000000Z", 1_000_000 - 1},
		{9, nil, -1},           // no stamp: none
		{10, "not a time", -1}, // not a stamp: none
		{11, "2025-03-04T05:06:09Z", 2_000_000 - 1}, // no fraction
	}
	var stmts []string
	for _, r := range rows {
		rec := "NULL"
		if r.recorded != nil {
			rec = fmt.Sprintf("'%s'", r.recorded)
		}
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO changes (id, uri, change, source, recorded, package) VALUES (%d, 'u%d', 'created', 'S', %s, '')`, r.id, r.id, rec))
	}
	createAtVersion(t, path, 15, stmts...)

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := time.Date(2025, 3, 4, 5, 6, 7, 1000, time.UTC).UnixMicro()
	for _, r := range rows {
		var got sql.NullInt64
		if err := s.r.QueryRowContext(ctx, "SELECT recorded FROM changes WHERE id = ?", r.id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.want < 0 && got.Valid:
			t.Errorf("change %d (%v): stamp %d, want NULL", r.id, r.recorded, got.Int64)
		case r.want >= 0 && (!got.Valid || got.Int64 != base+r.want):
			t.Errorf("change %d (%v): stamp %v, want %d", r.id, r.recorded, got, base+r.want)
		}
	}
	// The next commit's stamps follow the migrated ones.
	b := Batch{Changes: []ChangeRecord{{URI: "new", Change: ChangeCreated, Source: "S", Length: -1}}}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if rec := b.Changes[0].Recorded.UnixMicro(); rec <= base+2_000_000-1 {
		t.Errorf("stamp after the migration = %d, want after %d", rec, base+2_000_000-1)
	}
}

// createAtVersion creates at path a state file whose schema is at version
// v (migrations()[:v], as Open would have left it), then runs stmts in it.
func createAtVersion(t *testing.T, path string, v int, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all := []string{
		fmt.Sprintf("PRAGMA application_id = %d", applicationID),
		"CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)",
	}
	for i, m := range migrations()[:v] {
		all = append(all, m, fmt.Sprintf("INSERT INTO schema_version VALUES (%d, '2026-01-01T00:00:00.000000000Z')", i+1))
	}
	for _, q := range append(all, stmts...) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Older versions made state files others could read; this one opens
	// a file made private.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateHolders: the sinks that hold a source's resources are, at
// the migration, those its baselines (ok or partial) wrote to, as their
// reports name them; an incremental run's sinks, a failed baseline's, and
// a report that is not JSON are passed over.
func TestMigrateHolders(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v22.db")
	createAtVersion(t, path, 22,
		`INSERT INTO runs (id, mode, source, status, report) VALUES (1, 'baseline', 'http://a/', 'ok', '{"sinks":["fs:/a","es:http://x/i"]}')`,
		`INSERT INTO runs (id, mode, source, status, report) VALUES (2, 'incremental', 'http://a/', 'ok', '{"sinks":["fs:/b"]}')`,
		`INSERT INTO runs (id, mode, source, status, report) VALUES (3, 'baseline', 'http://a/', 'failed', '{"sinks":["fs:/c"]}')`,
		`INSERT INTO runs (id, mode, source, status, report) VALUES (4, 'baseline', 'http://b/', 'partial', '{"sinks":["fs:/b"]}')`,
		`INSERT INTO runs (id, mode, source, status, report) VALUES (5, 'baseline', 'http://c/', 'ok', 'not json')`,
		`INSERT INTO runs (id, mode, source, status, report) VALUES (6, 'baseline', 'http://c/', 'running', NULL)`,
	)
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for src, want := range map[string][]string{"http://a/": {"es:http://x/i", "fs:/a"}, "http://b/": {"fs:/b"}, "http://c/": nil} {
		got, err := s.Holders(ctx, src)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Holders(%s) = %q, %v; want %q", src, got, err, want)
		}
	}
}
