package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPausedSiteStaysPaused: editing a paused site (its next harvest
// now) says that it stays paused, and how to resume it or harvest it once.
func TestPausedSiteStaysPaused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	for _, args := range [][]string{
		{"sites", "add", "one", "--source", "http://127.0.0.1:1/", "--sink", "fs:" + filepath.Join(t.TempDir(), "m"), "--every", "1d"},
		{"sites", "pause", "one"},
	} {
		if code, out, stderr := run(t, append(args, "--state", db)...); code != ExitOK {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
	}
	code, out, stderr := run(t, "sites", "edit", "one", "--next", "now", "--state", db)
	if code != ExitOK || !strings.Contains(out, "site one stays paused") || !strings.Contains(out, "rsharvest sites resume one") || !strings.Contains(out, "rsharvest run one") {
		t.Errorf("sites edit --next now of a paused site: exit %d\n%s%s", code, out, stderr)
	}
	if _, out, _ := run(t, "sites", "list", "--state", db); !strings.Contains(out, "paused") {
		t.Errorf("the site is no longer paused:\n%s", out)
	}
}

// TestPostgresRegistryRefusesLocalSinks: against a registry kept in
// PostgreSQL (which any machine harvests), "sites add" and "sites apply"
// refuse a site whose sink is one machine's directory at once, with the
// message its harvest would give, and the registry stays without it.
func TestPostgresRegistryRefusesLocalSinks(t *testing.T) {
	pg := startPostgres(t)
	dir := t.TempDir()
	const why = "the registry is in PostgreSQL and any machine may harvest the site, but this directory is one machine's"
	code, out, stderr := run(t, "sites", "add", "local", "--source", "http://127.0.0.1:1/", "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1d", "--state", pg)
	if code != ExitUsage || !strings.Contains(stderr, why) || !strings.Contains(stderr, "fs:DIR?shared=1") {
		t.Errorf("sites add with an fs sink: exit %d\n%s%s", code, out, stderr)
	}
	file := filepath.Join(dir, "sites.yaml")
	if err := os.WriteFile(file, []byte("sites:\n  - {name: local, source: http://127.0.0.1:1/, sinks: [fs:"+filepath.Join(dir, "m")+"], schedule: every 1d}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, "sites", "apply", file, "--state", pg); code != ExitUsage || !strings.Contains(stderr, why) {
		t.Errorf("sites apply with an fs sink: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "sites", "add", "shared", "--source", "http://127.0.0.1:1/", "--sink", "fs:"+filepath.Join(dir, "m")+"?shared=1", "--every", "1d", "--state", pg); code != ExitOK {
		t.Errorf("sites add with a shared fs sink: exit %d\n%s%s", code, out, stderr)
	}
	if _, out, _ := run(t, "sites", "list", "--state", pg); strings.Contains(out, "local") || !strings.Contains(out, "shared") {
		t.Errorf("the registry:\n%s", out)
	}
}
