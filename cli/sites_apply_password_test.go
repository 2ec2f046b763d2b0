package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyPlanHidesSourcePassword: the plan that sites apply prints
// (and --dry-run's) names a changed source without its password, as
// sites show, sites list and the status page do (docs/safety.md: "the
// errors of every command name the source without its password"; the
// state file holds the secrets, the terminal and CI logs must not).
func TestApplyPlanHidesSourcePassword(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	file := func(name, source string) string {
		p := filepath.Join(dir, name)
		body := "sites:\n  - name: a\n    source: " + source + "\n    sinks: [fs:" + filepath.Join(dir, "a") + "]\n    schedule: every 1d\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if code, out, stderr := run(t, "sites", "apply", file("old.yaml", "http://user:0ldS3cret@127.0.0.1:1/a"), "--state", db); code != ExitOK {
		t.Fatalf("first apply: exit %d\n%s%s", code, out, stderr)
	}
	if _, show, _ := run(t, "sites", "show", "a", "--state", db); strings.Contains(show, "0ldS3cret") {
		t.Fatalf("sites show shows the password:\n%s", show)
	}
	changed := file("new.yaml", "http://user:n3wS3cret@127.0.0.1:1/a")
	for _, args := range [][]string{{"sites", "apply", "--dry-run", changed}, {"sites", "apply", changed}} {
		code, out, stderr := run(t, append(args, "--state", db)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
		if !strings.Contains(out, "changed a") {
			t.Fatalf("%v: no change planned:\n%s", args, out)
		}
		for _, secret := range []string{"0ldS3cret", "n3wS3cret"} {
			if strings.Contains(out+stderr, secret) {
				t.Errorf("%v prints the source password %q:\n%s", args, secret, out)
			}
		}
	}
}
