package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestStateCheck: state check says ok of a sound state file, and a
// missing one is a usage error naming where it looked.
func TestStateCheck(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	if code, out, stderr := run(t, "state", "check", "--state", db); code != ExitUsage || !strings.Contains(stderr, db) {
		t.Errorf("state check of no file: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "sites", "add", "a", "--source", "http://127.0.0.1:1/", "--sink", "fs:"+filepath.Join(t.TempDir(), "m"), "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "state", "check", "--state", db); code != ExitOK || strings.TrimSpace(out) != "ok" {
		t.Errorf("state check: exit %d\n%s%s", code, out, stderr)
	}
}

// TestStateCheckPostgres: state check of a state kept in PostgreSQL says
// it checked nothing, rather than ok.
func TestStateCheckPostgres(t *testing.T) {
	url := startPostgres(t)
	if code, out, stderr := run(t, "sites", "list", "--state", url); code != ExitOK {
		t.Fatalf("sites list: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "state", "check", "--state", url)
	if code != ExitOK || strings.TrimSpace(out) == "ok" || !strings.Contains(out, "not checked") {
		t.Errorf("state check of a PostgreSQL state: exit %d\n%s%s", code, out, stderr)
	}
}
