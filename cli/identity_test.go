package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
)

// TestOneSourceOneIdentity: every spelling of a source's URL that RFC 3986
// normalises alike (scheme case, empty path, dot segments, default port) is
// one source: what a sync of one spelling holds, a dry run, ls, audit and
// a site of another find.
func TestOneSourceOneIdentity(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 20, Packages: 2, Seed: 3, MeanSize: 512}, bench.ServeOptions{})
	dir := t.TempDir()
	db, mirror := filepath.Join(dir, "state.db"), "fs:"+filepath.Join(dir, "mirror")
	base := strings.TrimSuffix(srv.URL, "/")
	other := strings.Replace(base, "http://", "HTTP://", 1) + "/dumps/../"
	key := base + "/"

	if code, out, stderr := run(t, "sync", "--source", base, "--sink", mirror, "--state", db); code != ExitOK {
		t.Fatalf("sync %s: exit %d\n%s\n%s", base, code, out, stderr)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"sync", "--source", other, "--sink", mirror, "--state", db, "--dry-run"}, []string{"would write 0", "20 unchanged"}},
		{[]string{"ls", "--source", other, "--state", db}, []string{"resources/"}},
		{[]string{"audit", "--source", other, "--sink", mirror, "--state", db}, nil},
		{[]string{"sites", "add", "one", "--source", other, "--sink", mirror, "--every", "1d", "--state", db}, []string{key}},
		{[]string{"sites", "show", "one", "--state", db}, []string{"source: " + key}},
	} {
		code, out, stderr := run(t, c.args...)
		if code != ExitOK {
			t.Errorf("%s: exit %d\n%s\n%s", strings.Join(c.args, " "), code, out, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s printed no %q:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}
	code, out, _ := run(t, "ls", "--source", other, "--state", db)
	if n := strings.Count(out, "\n"); code != ExitOK || n != 20 {
		t.Errorf("ls --source %s: exit %d, %d lines, want 20:\n%s", other, code, n, out)
	}
}
