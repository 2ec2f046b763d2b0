package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
)

// TestAuditRepairDryRun: audit --repair --dry-run prints what the repair
// would fetch and changes nothing; --dry-run alone is refused.
func TestAuditRepairDryRun(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 20, Packages: 1, Seed: 6, MeanSize: 256, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	mirror, db := filepath.Join(dir, "m"), filepath.Join(dir, "s.db")
	args := []string{"--source", srv.URL, "--sink", "fs:" + mirror, "--state", db}
	if code, out, stderr := run(t, append([]string{"baseline"}, args...)...); code != ExitOK {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	var victim string
	filepath.WalkDir(mirror, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && victim == "" && !strings.HasPrefix(d.Name(), ".") {
			victim = p
		}
		return err
	})
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, append([]string{"audit", "--repair", "--dry-run"}, args...)...)
	if code != ExitPartial || !strings.Contains(out, "would fetch") || !strings.Contains(out, "1 missing") || !strings.Contains(out, "nothing changed") {
		t.Fatalf("audit --repair --dry-run: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(victim); err == nil {
		t.Fatal("the dry run fetched the missing resource")
	}
	if code, out, stderr := run(t, append([]string{"audit", "--dry-run"}, args...)...); code != ExitUsage {
		t.Errorf("audit --dry-run without --repair: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, append([]string{"audit", "--repair"}, args...)...); code != ExitOK {
		t.Fatalf("audit --repair: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the repair did not fetch it: %v", err)
	}
}
