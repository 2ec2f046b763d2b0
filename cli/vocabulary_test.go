package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
)

// TestOneVocabulary: the flags and messages every command shares — -v is
// verbose (--version the version), -P shows progress bars, a misspelt
// flag is suggested as a misspelt command is; a file that is not a state
// store is said so in one wording by every command, without SQLite's
// codes; an empty file stays empty under a command that only reads; a
// YAML error names the line that is wrong.
func TestOneVocabulary(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 5, Packages: 1, Seed: 2, MeanSize: 256}, bench.ServeOptions{})
	dir := t.TempDir()
	db, mirror := filepath.Join(dir, "s.db"), "fs:"+filepath.Join(dir, "m")

	if code, out, stderr := run(t, "-v", "sync", "--source", srv.URL, "--sink", mirror, "--state", db, "-P"); code != ExitOK || !strings.Contains(stderr, "level=DEBUG") {
		t.Errorf("-v sync -P: exit %d, want debug records\n%s%s", code, out, stderr)
	}
	if code, out, _ := run(t, "--version"); code != ExitOK || !strings.HasPrefix(out, "rsharvest version ") {
		t.Errorf("--version: exit %d\n%s", code, out)
	}
	for args, want := range map[string]string{
		"sync --sorce x":     "unknown flag: --sorce: did you mean --source?",
		"run --sites-concur": "did you mean --sites-concurrency?",
		"serve --lsten x":    "did you mean --listen?",
		"sync --zzzzzz":      "unknown flag: --zzzzzz (see rsharvest sync --help)",
	} {
		if code, _, stderr := run(t, strings.Fields(args)...); code != ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, want %q\n%s", args, code, want, stderr)
		}
	}

	junk, empty := filepath.Join(dir, "junk.db"), filepath.Join(dir, "empty.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"ls", "--source", srv.URL}, {"log"}, {"sites", "list"}, {"state", "check"},
		{"sync", "--source", srv.URL, "--sink", mirror}, {"audit", "--source", srv.URL, "--sink", mirror}, {"run", "--due"},
	} {
		name := strings.Join(args[:min(2, len(args))], " ")
		code, _, stderr := run(t, append(args, "--state", junk)...)
		if code == ExitOK || !strings.Contains(stderr, "state: open "+junk+": not an rsharvest state store (not an SQLite database)") || strings.Contains(stderr, "(26)") {
			t.Errorf("%s on a file that is not a state store: exit %d\n%s", name, code, stderr)
		}
		if args[0] == "sync" || args[0] == "run" {
			continue // these write: an empty file is where their store is made
		}
		code, _, stderr = run(t, append(args, "--state", empty)...)
		if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
			t.Errorf("%s made the empty file a state store (%v)\n%s", name, err, stderr)
		}
		if args[0] != "audit" && (code != ExitUsage || !strings.Contains(stderr, "is empty: nothing was harvested with it")) {
			t.Errorf("%s on an empty file: exit %d\n%s", name, code, stderr)
		}
	}

	registry := filepath.Join(dir, "sites.yaml")
	if err := os.WriteFile(registry, []byte("sites:\n  - name: a\n    source: http://a/\n    sinks: [fs:/a]\n    schedule: every 1d\n"+
		"  - name: b\n    source: http://b/\n   sinks: [fs:/b]\n    schedule: every 1d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "sites", "apply", registry, "--state", db); code != ExitUsage || !strings.Contains(stderr, "sites.yaml:8: ") {
		t.Errorf("sites apply of a file wrong at line 8: exit %d\n%s", code, stderr)
	}
}
