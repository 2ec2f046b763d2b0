package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT ? , ?", "SELECT $1 , $2"},
		{"INSERT INTO t VALUES (?, '?', \"a?\", ?)", "INSERT INTO t VALUES ($1, '?', \"a?\", $2)"},
		{"WHERE a = 'it''s' AND b = ?", "WHERE a = 'it''s' AND b = $1"},
		{"VALUES (?1, ?2, '?2', ?, ?), (?1, ?2, ?, ?)", "VALUES ($1, $2, '?2', $3, $4), ($1, $2, $5, $6)"},
		{"SELECT ?3, ?, ?1, ?", "SELECT $3, $4, $1, $5"},
		{"SELECT '?'?, ??", "SELECT '?'$1, $2$3"},
	} {
		if got := rebind(c.in); got != c.want {
			t.Errorf("rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestIsPostgres(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://u@h/db": true, "postgresql://h/db?sslmode=disable": true,
		"state.db": false, "/var/lib/postgres/x.db": false, "": false,
	} {
		if got := IsPostgres(in); got != want {
			t.Errorf("IsPostgres(%q) = %v", in, got)
		}
	}
	if got := Redacted("postgres://u:secret@h/db"); strings.Contains(got, "secret") {
		t.Errorf("redact kept the password: %s", got)
	}
}

// TestPostgresOpen: a store kept in PostgreSQL refuses a schema of
// another application.
func TestPostgresOpen(t *testing.T) {
	ctx := t.Context()
	server, stop, err := testbin.Postgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	other, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "CREATE TABLE invoices (id INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, server); !errors.Is(err, ErrNotStateFile) {
		t.Errorf("open another application's database: %v, want ErrNotStateFile", err)
	}
}

// TestLease: a lease is held by one harvest at a time — in a file's store
// within its process, in PostgreSQL across stores (machines) — naming its
// holder to the next; a wait ends when it is released; a store closed
// without releasing (its process gone) leaves nothing held.
func TestLease(t *testing.T) {
	server, stop, err := testbin.Postgres(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, tc := range []struct {
		name  string
		where func(t *testing.T) string // the store: a file, or the database
		// other opens a second store on it, as another machine would
		// (PostgreSQL); a file's second harvest is in the same store.
		other bool
	}{
		{"file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "state.db") }, false},
		{"postgres", func(*testing.T) string { return server }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			where := tc.where(t)
			a, err := Open(ctx, where)
			if err != nil {
				t.Fatal(err)
			}
			b := a
			if tc.other {
				if b, err = Open(ctx, where); err != nil {
					t.Fatal(err)
				}
				defer b.Close()
			}
			first, err := a.Lease(ctx, SiteLease("oai"), "rsharvest daemon", 0)
			if err != nil {
				t.Fatal(err)
			}
			if held, err := b.Leases(ctx); err != nil || len(held) != 1 || held[0].Key != "site oai" || held[0].Holder.Command != "rsharvest daemon" {
				t.Errorf("Leases = %+v, %v; want site oai's, held by the daemon", held, err)
			}
			_, err = b.Lease(ctx, SiteLease("oai"), "rsharvest run", 0)
			var le *LeasedError
			if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || le.Holder.PID != os.Getpid() || le.Holder.Command != "rsharvest daemon" ||
				!strings.Contains(err.Error(), "site oai is being harvested by pid") {
				t.Fatalf("second lease: %v, want a LeasedError naming the first", err)
			}
			other, err := b.Lease(ctx, SiteLease("other"), "rsharvest run", 0)
			if err != nil {
				t.Fatalf("another site's lease: %v", err)
			}
			must(t, other.Release())
			go func() {
				time.Sleep(300 * time.Millisecond)
				_ = first.Release()
			}()
			waited, err := b.Lease(ctx, SiteLease("oai"), "rsharvest run", time.Minute)
			if err != nil {
				t.Fatalf("waiting for the lease: %v", err)
			}
			must(t, waited.Release())
			must(t, first.Release()) // again: a no-op
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			held, err := a.Lease(ctx, SourceLease("s"), "x", 0)
			must(t, err)
			if _, err := b.Lease(short, SourceLease("s"), "y", time.Minute); err == nil || errors.Is(err, ErrLocked) {
				t.Errorf("a wait its context ended: %v, want the context's error", err)
			}
			cancel()
			if !tc.other {
				must(t, held.Release())
				must(t, a.Close())
				return
			}
			must(t, a.Close()) // without Release: its session ends
			deadline := time.Now().Add(10 * time.Second)
			for {
				held, err := b.Leases(ctx)
				must(t, err)
				if len(held) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Leases after their holder closed: %+v", held)
				}
				time.Sleep(50 * time.Millisecond)
			}
			again, err := b.Lease(ctx, SourceLease("s"), "y", 10*time.Second)
			if err != nil {
				t.Fatalf("the lease of a closed store: %v", err)
			}
			must(t, again.Release())
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFence: a harvest whose lease was lost — its connection cut, the
// lease taken by another harvest — has its late commits refused, nothing
// of them stored, while the new holder commits; in a file's store, a
// lease released no longer fences a commit.
func TestFence(t *testing.T) {
	ctx := t.Context()
	server, stop, err := testbin.Postgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	a, err := Open(ctx, server)
	must(t, err)
	defer a.Close()
	b, err := Open(ctx, server)
	must(t, err)
	defer b.Close()
	run, err := a.BeginRun(ctx, Run{Mode: "baseline", Source: "s"})
	must(t, err)
	res := func(uri string) []Resource {
		return []Resource{{URI: uri, Source: "s", Length: 1, Outcome: OutcomeWritten, RunID: run}}
	}
	first, err := a.Lease(ctx, SourceLease("s"), "first", 0)
	must(t, err)
	must(t, a.Commit(ctx, Batch{Resources: res("before"), Fence: first}))

	// The first holder's connection is cut: the server ends its session,
	// and the lease goes to another harvest.
	admin, err := sql.Open("pgx", server)
	must(t, err)
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted"); err != nil {
		t.Fatal(err)
	}
	second, err := b.Lease(ctx, SourceLease("s"), "second", 10*time.Second)
	must(t, err)
	defer second.Release()

	err = a.Commit(ctx, Batch{Resources: res("late"), Fence: first})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a late commit of the first holder: %v, want ErrLeaseLost", err)
	}
	if _, ok, err := b.Resource(ctx, "s", "late"); ok || err != nil {
		t.Errorf("the refused batch was stored (%v, %v)", ok, err)
	}
	must(t, b.Commit(ctx, Batch{Resources: res("after"), Fence: second}))
	_ = first.Release() // its connection is gone: nothing to release

	// A file's store: the lease released fences no more.
	f, _ := openTemp(t)
	frun := mustRun(t, f)
	l, err := f.Lease(ctx, SourceLease("s"), "x", 0)
	must(t, err)
	must(t, f.Commit(ctx, Batch{Resources: []Resource{{URI: "u", Source: "s", Length: 1, Outcome: OutcomeWritten, RunID: frun}}, Fence: l}))
	must(t, l.Release())
	if err := f.Commit(ctx, Batch{Resources: []Resource{{URI: "v", Source: "s", Length: 1, Outcome: OutcomeWritten, RunID: frun}}, Fence: l}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a commit fenced by a released lease: %v, want ErrLeaseLost", err)
	}
}

// TestPostgresMigratesOldReports: a store kept in PostgreSQL from before
// its version 3, whose run reports hold what JSON allows and PostgreSQL's
// jsonb does not (an escaped NUL), migrates to the newest version, and the
// sinks such a report names are the source's holders.
func TestPostgresMigratesOldReports(t *testing.T) {
	ctx := t.Context()
	server, stop, err := testbin.Postgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, v := range []int{1, 2} {
		db, err := sql.Open("pgx", server)
		if err != nil {
			t.Fatal(err)
		}
		stmts := []string{
			"DROP SCHEMA public CASCADE",
			"CREATE SCHEMA public",
			"CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)",
		}
		for i, m := range postgresMigrations()[:v] {
			stmts = append(stmts, m, fmt.Sprintf("INSERT INTO schema_version VALUES (%d, '2026-01-01T00:00:00.000000000Z')", i+1))
		}
		stmts = append(stmts,
			`INSERT INTO runs (mode, source, status, started, finished, report) VALUES ('baseline', 'http://a/', 'ok', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z', '{"sinks":["fs:/m"],"error":"name \u0000 in a title"}')`,
			`INSERT INTO runs (mode, source, status, started, finished, report) VALUES ('baseline', 'http://b/', 'partial', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z', '{"sinks":["fs:/n\u0000x"]}')`,
		)
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, server)
		if err != nil {
			t.Fatalf("open a version-%d store whose report holds an escaped NUL: %v", v, err)
		}
		for source, want := range map[string]string{"http://a/": "fs:/m", "http://b/": "fs:/n\ufffdx"} {
			if got, err := s.Holders(ctx, source); err != nil || len(got) != 1 || got[0] != want {
				t.Errorf("version %d: holders of %s = %q, %v; want [%q]", v, source, got, err, want)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
