package state

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT ? , ?", "SELECT $1 , $2"},
		{"INSERT INTO t VALUES (?, '?', \"a?\", ?)", "INSERT INTO t VALUES ($1, '?', \"a?\", $2)"},
		{"WHERE a = 'it''s' AND b = ?", "WHERE a = 'it''s' AND b = $1"},
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
// another application, and OpenExclusive lets one run at a time hold it,
// naming the holder to the next (the lock is freed when its store
// closes).
func TestPostgresOpen(t *testing.T) {
	ctx := t.Context()
	server, stop, err := testbin.Postgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	admin, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, db := range []string{"foreign_app", "ours"} {
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+db); err != nil {
			t.Fatal(err)
		}
	}
	url := func(db string) string { return strings.Replace(server, "/postgres?", "/"+db+"?", 1) }

	other, err := sql.Open("pgx", url("foreign_app"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "CREATE TABLE invoices (id INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, url("foreign_app")); !errors.Is(err, ErrNotStateFile) {
		t.Errorf("open another application's database: %v, want ErrNotStateFile", err)
	}

	first, err := OpenExclusive(ctx, url("ours"), "rsharvest sync (first)", 0)
	if err != nil {
		t.Fatal(err)
	}
	if first.PostgresURL() == "" {
		t.Error("PostgresURL of a store kept in PostgreSQL is empty")
	}
	_, err = OpenExclusive(ctx, url("ours"), "rsharvest sync (second)", 0)
	var le *LockedError
	if !errors.As(err, &le) || le.Holder.PID != os.Getpid() || le.Holder.Command != "rsharvest sync (first)" {
		t.Fatalf("second run: %v, want a LockedError naming the first", err)
	}
	if shared, err := Open(ctx, url("ours")); err != nil { // Open takes no lock
		t.Error(err)
	} else {
		shared.Close()
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := OpenExclusive(context.Background(), url("ours"), "rsharvest sync (second)", 0)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	second.Close()
}
