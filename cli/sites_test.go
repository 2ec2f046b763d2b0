package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// TestSites: the registry from the command line — add, edit, list, show,
// remove, and apply a registry file twice (the second changes nothing);
// bad definitions are refused, naming the site (and, from a file, the
// line), before anything is written; header values never show.
func TestSites(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("sites.yaml", `sites:
  - name: a
    source: http://127.0.0.1:1/oai
    protocol: oai-pmh
    set: [physics, math]
    sinks: [fs:mirror/a]
    schedule: every 1d
    contact: ops@a.example
    notify: on_error
    headers: {Authorization: Bearer s3cret}
  - name: b
    source: http://127.0.0.1:1/.well-known/resourcesync
    sinks: [fs:mirror/b]
    schedule: "0 3 * * *"
    rate: 2
`)
	tests := []struct {
		args []string
		code int
		want []string // in the output, in order
		not  []string
	}{
		{[]string{"sites", "list"}, ExitUsage, []string{"no state file at"}, nil}, // reading never creates a state
		{[]string{"sites", "apply", good}, ExitOK, []string{"2 added, 0 changed, 0 removed, 0 unchanged", "added a", "added b"}, nil},
		{[]string{"sites", "apply", good}, ExitOK, []string{"0 added, 0 changed, 0 removed, 2 unchanged"}, []string{"added a"}},
		{[]string{"sites", "list"}, ExitOK, []string{"a", "every 1d", "now", "http://127.0.0.1:1/oai", "b", "0 3 * * *"}, nil},
		{[]string{"sites", "show", "a"}, ExitOK, []string{"name: a", "schedule: every 1d", "fs:" + filepath.Join(dir, "mirror/a"), "Authorization: …", "- physics", "# next harvest: now"}, []string{"s3cret"}},
		{[]string{"sites", "show", "b"}, ExitOK, []string{"name: b", "rate: 2\n"}, []string{"!!float"}}, // a whole rate written plainly
		{[]string{"sites", "list", "--json"}, ExitOK, []string{`"name": "a"`, `"sets": [`, `"next_harvest": "now"`}, []string{"s3cret"}},
		{[]string{"sites", "add", "c", "--source", "http://127.0.0.1:1/c", "--sink", "fs:" + filepath.Join(dir, "c"), "--every", "2w", "--contact", "c@c.example"}, ExitOK, []string{"added c: every 2w"}, nil},
		{[]string{"sites", "add", "c", "--source", "http://x/", "--sink", "fs:" + filepath.Join(dir, "c"), "--every", "1d"}, ExitUsage, []string{`site "c" exists`}, nil},
		{[]string{"sites", "edit", "c", "--cron", "@weekly", "--next", "2030-01-01T00:00:00Z"}, ExitOK, []string{"changed c: @weekly"}, nil},
		{[]string{"sites", "show", "c", "--json"}, ExitOK, []string{`"schedule": "@weekly"`, `"contact": "c@c.example"`, `"next_harvest": "2030-01-01T00:00:00Z"`}, nil},
		{[]string{"sites", "edit", "c", "--every", "1y"}, ExitUsage, []string{`site "c": schedule "every 1y"`}, nil},
		{[]string{"sites", "edit", "zz", "--every", "1d"}, ExitUsage, []string{`site "zz": no such site`}, nil},
		{[]string{"sites", "remove", "c"}, ExitOK, []string{"removed c"}, nil},
		{[]string{"sites", "apply", file("unknown.yaml", "sites:\n  - name: a\n    source: http://a/\n    sinks: [fs:/tmp/a]\n    schedul: every 1d\n")}, ExitUsage,
			[]string{`unknown.yaml:5:5: site "a": unknown key "schedul" (did you mean "schedule"?)`}, nil},
		{[]string{"sites", "apply", file("schedule.yaml", "sites:\n  - name: a\n    source: http://a/\n    sinks: [fs:/tmp/a]\n    schedule: every 1y\n")}, ExitUsage,
			[]string{`schedule.yaml:5:5: site "a": schedule "every 1y"`}, nil},
		{[]string{"sites", "apply", file("dup.yaml", "sites:\n  - {name: a, source: http://a/, sinks: [fs:/tmp/a], schedule: every 1d}\n  - {name: a, source: http://b/, sinks: [fs:/tmp/b], schedule: every 1d}\n")}, ExitUsage,
			[]string{`dup.yaml:3:6: site "a": given twice (first at line 2)`}, nil},
		{[]string{"sites", "apply", file("sink.yaml", "sites:\n  - name: a\n    source: http://a/\n    sinks: [\"es:http://127.0.0.1:1/idx?retries=0\"]\n    schedule: every 1d\n")}, ExitUsage,
			[]string{`sink.yaml:4:5: site "a"`}, nil},
		// Nothing of the refused files was written.
		{[]string{"sites", "list"}, ExitOK, []string{"a", "every 1d", "b"}, []string{"c  "}},
	}
	for _, tt := range tests {
		code, out, stderr := run(t, append(tt.args, "--state", db)...)
		all := out + stderr
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d\n%s", tt.args, code, tt.code, all)
			continue
		}
		rest := all
		for _, w := range tt.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%v: output lacks %q (in order):\n%s", tt.args, w, all)
				break
			}
			rest = rest[i+len(w):]
		}
		for _, n := range tt.not {
			if strings.Contains(all, n) {
				t.Errorf("%v: output holds %q:\n%s", tt.args, n, all)
			}
		}
	}
}

// TestSitesAddRelativeSink: a relative fs: sink given to "sites add" is
// recorded absolute, against the directory the command ran in, so that
// cron (which starts in $HOME) writes into the same mirror.
func TestSitesAddRelativeSink(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "a", "--source", "http://127.0.0.1:1/a", "--sink", "fs:mirror", "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	t.Chdir(t.TempDir())
	code, out, stderr := run(t, "sites", "show", "a", "--state", db)
	if want := "fs:" + filepath.Join(dir, "mirror"); code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("sites show: exit %d, want %s in:\n%s%s", code, want, out, stderr)
	}
}

// TestSitesNextNow: "sites edit --next now" makes a site due at once (its
// next harvest no longer in 2100); it was refused as no W3C datetime.
func TestSitesNextNow(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "a", "--source", "http://127.0.0.1:1/a", "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1d",
		"--next", "2100-01-01T00:00:00Z", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "sites", "edit", "a", "--next", "now", "--state", db); code != ExitOK {
		t.Fatalf("sites edit --next now: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "sites", "list", "--state", db)
	if code != ExitOK || strings.Contains(out, "2100") {
		t.Fatalf("sites list: exit %d:\n%s%s", code, out, stderr)
	}
}

// TestSitesAddNoSchedule: a site added without a schedule is refused with
// a message that names the flags that give one.
func TestSitesAddNoSchedule(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := run(t, "sites", "add", "a", "--source", "http://127.0.0.1:1/a", "--sink", "fs:"+filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"))
	if code != ExitUsage || !strings.Contains(stderr, "--every 1d or --cron") {
		t.Fatalf("exit %d, want %d naming --every and --cron:\n%s%s", code, ExitUsage, out, stderr)
	}
}

// TestSitesEditFailedDueNow: a site whose harvest failed (a typo'd
// source), once edited, is due at once rather than at its next retry.
func TestSitesEditFailedDueNow(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/"
	ln.Close()
	if code, out, stderr := run(t, "sites", "add", "a", "--source", down, "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1mo", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, _ := run(t, "run", "a", "--state", db); code == ExitOK {
		t.Fatal("a harvest of an unreachable source succeeded")
	}
	if code, out, stderr := run(t, "sites", "edit", "a", "--every", "1w", "--state", db); code != ExitOK {
		t.Fatalf("sites edit: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "sites", "show", "a", "--json", "--state", db)
	var v struct {
		Next time.Time `json:"next_harvest"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != ExitOK || err != nil || v.Next.After(time.Now()) {
		t.Fatalf("sites show: exit %d, next %v (%v):\n%s%s", code, v.Next, err, out, stderr)
	}
}

// TestStateFileLocation: without --state the state lives where
// $RSHARVEST_STATE says (else in the user's state directory); a command
// that only reads never creates one, and says where it looked; a file that
// is no state store is a usage error for every command.
func TestStateFileLocation(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RSHARVEST_STATE", filepath.Join(dir, "env.db"))
	for _, args := range [][]string{{"log"}, {"sites", "list"}, {"sites", "show", "a"}} {
		code, _, stderr := run(t, args...)
		if code != ExitUsage || !strings.Contains(stderr, "no state file at "+filepath.Join(dir, "env.db")) {
			t.Errorf("%q without a state: exit %d, want %d saying where it looked:\n%s", args, code, ExitUsage, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "env.db")); err == nil {
		t.Fatal("a command that only reads created the state")
	}
	if code, out, stderr := run(t, "sites", "add", "a", "--source", "http://127.0.0.1:1/a", "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1d"); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := run(t, "sites", "list"); code != ExitOK || !strings.Contains(out, "http://127.0.0.1:1/a") {
		t.Errorf("sites list from $RSHARVEST_STATE: exit %d\n%s", code, out)
	}
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("not a database, only a text file that happens to be long enough to look like one"), 0o644)
	for _, args := range [][]string{{"log", "--state", text}, {"sites", "list", "--state", text},
		{"baseline", "--state", text, "--source", "http://127.0.0.1:1/", "--sink", "fs:" + filepath.Join(dir, "m")}} {
		if code, _, stderr := run(t, args...); code != ExitUsage {
			t.Errorf("%q: exit %d, want %d:\n%s", args, code, ExitUsage, stderr)
		}
	}
}

// TestSitesPause: a paused site is never due (run --due passes it over,
// sites list says paused) until resumed; it can still be run by name.
func TestSitesPause(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	origin := generatedSource(t, bench.GenOptions{Resources: 5, Packages: 1, Seed: 4, MeanSize: 1 << 10, NoOddNames: true}, bench.ServeOptions{})
	if code, out, stderr := run(t, "sites", "add", "p", "--source", origin.URL, "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := run(t, "sites", "pause", "p", "--state", db); code != ExitOK || !strings.Contains(out, "paused p") {
		t.Fatalf("sites pause: exit %d\n%s", code, out)
	}
	if code, out, _ := run(t, "run", "--due", "--state", db); code != ExitOK || !strings.Contains(out, "no site is due") {
		t.Errorf("run --due with the only site paused: exit %d\n%s", code, out)
	}
	if _, out, _ := run(t, "sites", "list", "--state", db); !strings.Contains(out, "paused") {
		t.Errorf("sites list does not say paused:\n%s", out)
	}
	if code, out, stderr := run(t, "run", "p", "--state", db, "-q"); code != ExitOK {
		t.Errorf("run p while paused: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, _ := run(t, "sites", "resume", "p", "--state", db); code != ExitOK {
		t.Fatal("sites resume failed")
	}
	if _, out, _ := run(t, "sites", "list", "--state", db); strings.Contains(out, "paused") {
		t.Errorf("sites list still says paused:\n%s", out)
	}
	if code, _, stderr := run(t, "sites", "pause", "nope", "--state", db); code != ExitUsage {
		t.Errorf("pausing an unknown site: exit %d\n%s", code, stderr)
	}
}

// TestCompleteSiteNames: the shell completion of a site name lists the
// registry's sites that begin with what was typed.
func TestCompleteSiteNames(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	for _, name := range []string{"alpha", "alps", "beta"} {
		if code, out, stderr := run(t, "sites", "add", name, "--source", "http://127.0.0.1:1/"+name, "--sink", "fs:"+filepath.Join(dir, name), "--every", "1d", "--state", db); code != ExitOK {
			t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
		}
	}
	for _, args := range [][]string{{"sites", "show", "--state", db, "al"}, {"run", "--state", db, "al"}, {"ls", "--state", db, "--site", "al"}} {
		code, out, stderr := run(t, append([]string{"__complete"}, args...)...)
		if code != ExitOK || !strings.Contains(out, "alpha\n") || !strings.Contains(out, "alps\n") || strings.Contains(out, "beta") {
			t.Errorf("completion of %q: exit %d:\n%s%s", args, code, out, stderr)
		}
	}
}

// TestSitesAddHarvestSettings: sites add and edit take --rate,
// --concurrency and --require-hash, as a registry file's keys.
func TestSitesAddHarvestSettings(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "a", "--source", "http://127.0.0.1:1/a", "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1d",
		"--rate", "2.5", "--concurrency", "3", "--require-hash", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "sites", "show", "a", "--state", db)
	for _, want := range []string{"rate: 2.5", "concurrency: 3", "require_hash: true"} {
		if code != ExitOK || !strings.Contains(out, want) {
			t.Errorf("sites show lacks %q: exit %d\n%s%s", want, code, out, stderr)
		}
	}
	if code, _, stderr := run(t, "sites", "edit", "a", "--concurrency", "0", "--state", db); code != ExitUsage {
		t.Errorf("a concurrency of 0: exit %d, want %d\n%s", code, ExitUsage, stderr)
	}
}

// TestSitesApplyPlan: sites apply prints its plan — added, changed with
// the keys that change, removed — and removes a site the file does not
// name only with --prune; --dry-run prints the plan and writes nothing.
func TestSitesApplyPlan(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	site := func(name, schedule string) string {
		return "  - name: " + name + "\n    source: http://127.0.0.1:1/" + name + "\n    sinks: [fs:" + filepath.Join(dir, name) + "]\n    schedule: " + schedule + "\n"
	}
	file := func(name string, sites ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("sites:\n"+strings.Join(sites, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var seven []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		seven = append(seven, site(n, "every 1d"))
	}
	one := file("one.yaml", site("a", "every 2d"))
	steps := []struct {
		args []string
		want []string // in order
		left int      // sites in the registry after
	}{
		{[]string{"sites", "apply", "--dry-run", file("seven.yaml", seven...)}, []string{"plan: 7 added, 0 changed, 0 removed, 0 unchanged", "added a", "added g", "dry run: nothing changed"}, -1},
		{[]string{"sites", "apply", file("seven.yaml", seven...)}, []string{"7 added, 0 changed, 0 removed, 0 unchanged"}, 7},
		{[]string{"sites", "apply", one}, []string{"0 added, 1 changed, 0 removed, 0 unchanged; 6 not in the file, kept (--prune removes them)",
			"changed a: schedule: every 1d → every 2d", "kept b (not in the file)"}, 7},
		{[]string{"sites", "apply", "--prune", "--dry-run", one}, []string{"plan: 0 added, 0 changed, 6 removed, 1 unchanged", "removed b", "removed g", "dry run: nothing changed"}, 7},
		{[]string{"sites", "apply", "--prune", one}, []string{"0 added, 0 changed, 6 removed, 1 unchanged", "removed b"}, 1},
	}
	for _, s := range steps {
		code, out, stderr := run(t, append(s.args, "--state", db)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", s.args, code, out, stderr)
		}
		rest := out
		for _, w := range s.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Fatalf("%v: output lacks %q (in order):\n%s", s.args, w, out)
			}
			rest = rest[i+len(w):]
		}
		if s.left < 0 {
			if _, err := os.Stat(db); err == nil {
				t.Errorf("%v: a dry run made the state file", s.args)
			}
			continue
		}
		_, list, _ := run(t, "sites", "list", "--json", "--state", db)
		if n := strings.Count(list, `"name"`); n != s.left {
			t.Errorf("%v: %d sites left, want %d", s.args, n, s.left)
		}
	}
}
