package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/config"
)

// TestSitesEditHeaderKeepsOthers: sites edit changes only what the flags
// give: a --header replaces the site's header of that name, and keeps the
// others (its Authorization, here a ${NAME} reference), as a config file's
// headers and the flags' merge.
func TestSitesEditHeaderKeepsOthers(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "c", "--source", "http://127.0.0.1:1/c", "--sink", "fs:"+filepath.Join(dir, "c"),
		"--every", "2w", "--header", "Authorization: Bearer ${RSH_REVIEW_TOKEN}", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "sites", "edit", "c", "--header", "X-B: 2", "--state", db); code != ExitOK {
		t.Fatalf("sites edit: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "sites", "show", "c", "--state", db)
	if code != ExitOK {
		t.Fatalf("sites show: exit %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(out, "X-B: …") {
		t.Errorf("the header the edit gives is not there:\n%s", out)
	}
	if !strings.Contains(out, "Authorization: …") {
		t.Errorf("sites edit --header X-B dropped the site's Authorization header, which no flag named:\n%s", out)
	}
}

// TestSitesAddErrorHasNoPosition: the sinks' check of a site defined by
// flags names no line and column of the text sites add made of them.
func TestSitesAddErrorHasNoPosition(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	code, out, stderr := run(t, "sites", "add", "z", "--source", "http://127.0.0.1:1/z", "--sink", "zz:nowhere", "--every", "1d", "--state", db)
	if code != ExitUsage {
		t.Fatalf("sites add with an unknown sink kind: exit %d, want %d\n%s%s", code, ExitUsage, out, stderr)
	}
	if strings.Contains(stderr, "sites add:") && strings.Contains(stderr, "sites add:4") {
		t.Errorf("the error names a position in a text the user never wrote:\n%s", stderr)
	}
}

// TestProcessKeysKnown: every setting of the process (the command's own)
// is among config.ProcessKeys, which a site is told it does not take.
func TestProcessKeysKnown(t *testing.T) {
	for _, s := range processSettings() {
		if s.Where&config.InFile != 0 && !slices.Contains(config.ProcessKeys(), s.FileKey()) {
			t.Errorf("process setting %s (key %s) is not in config.ProcessKeys", s.Name, s.FileKey())
		}
	}
}
