package pipeline

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMakeSpool: spool directories of processes that are gone (killed with
// -9) are removed; those of live processes are kept.
func TestMakeSpool(t *testing.T) {
	base := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(base, fmt.Sprintf("%s%d-abc", spoolPrefix, dead.Process.Pid))
	live := filepath.Join(base, fmt.Sprintf("%s%d-def", spoolPrefix, os.Getppid()))
	other := filepath.Join(base, "someone-elses")
	for _, d := range []string{stale, live, other} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "rsharvest-pkg-1.zip"), []byte("x"), 0o644)
	}
	dir, cleanup, err := makeSpool(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale spool of a dead process kept")
	}
	for _, d := range []string{live, other, dir} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed", d)
		}
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("own spool kept after cleanup")
	}
}
