package sqlitefile

import (
	"net/url"
	"path/filepath"
	"testing"
)

func TestOpen(t *testing.T) {
	tests := []struct {
		name   string
		params url.Values
		pragma string
		want   int64
	}{
		{"busy timeout", url.Values{"_pragma": {"busy_timeout(1234)"}}, "busy_timeout", 1234},
		{"synchronous", url.Values{"_pragma": {"synchronous(FULL)"}}, "synchronous", 2},
		{"two pragmas", url.Values{"_pragma": {"busy_timeout(7)", "foreign_keys(1)"}}, "foreign_keys", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a b%.db") // a space and a percent sign, escaped in the URI
			db, err := Open(path, tt.params, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var got int64
			if err := db.QueryRowContext(t.Context(), "PRAGMA "+tt.pragma).Scan(&got); err != nil || got != tt.want {
				t.Errorf("PRAGMA %s = %d, %v; want %d", tt.pragma, got, err, tt.want)
			}
			if s := db.Stats(); s.MaxOpenConnections != 2 {
				t.Errorf("at most %d connections, want 2", s.MaxOpenConnections)
			}
			var file string
			if err := db.QueryRowContext(t.Context(), "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil || file != path {
				t.Errorf("the database file is %q (%v), want %q", file, err, path)
			}
		})
	}
}

// TestBusy: a write refused because another connection holds the lock is
// Busy; other errors are not.
func TestBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	holder, err := Open(path, url.Values{"_txlock": {"immediate"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(t.Context(), "CREATE TABLE t (x)"); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other, err := Open(path, url.Values{"_pragma": {"busy_timeout(0)"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.ExecContext(t.Context(), "INSERT INTO t VALUES (1)")
	if !Busy(err) {
		t.Errorf("a write while another holds the lock: %v, not Busy", err)
	}
	if _, err := other.ExecContext(t.Context(), "INSERT INTO nothing VALUES (1)"); err == nil || Busy(err) {
		t.Errorf("a write to no table: %v, want an error that is not Busy", err)
	}
}
