package cli

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/sink/es/estest"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/state"
)

// TestRepairSparesAnotherSourcesResources: two sources harvested into one
// mirror with one state. A repair of the first removes only what the first
// no longer lists, never the second's resources, which the state holds.
func TestRepairSparesAnotherSourcesResources(t *testing.T) {
	// Each generated for the address it is served at: resources of
	// distinct hosts, as two real sources'.
	a, _ := changingSource(t, bench.GenOptions{Resources: 6, Packages: 1, Seed: 6, MeanSize: 64, NoOddNames: true}, bench.ServeOptions{})
	b, _ := changingSource(t, bench.GenOptions{Resources: 6, Packages: 1, Seed: 7, MeanSize: 64, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	mirror, db := filepath.Join(dir, "m"), filepath.Join(dir, "s.db")
	for _, src := range []string{a.URL, b.URL} {
		if code, out, stderr := run(t, "baseline", "--source", src, "--sink", "fs:"+mirror, "--state", db, "--progress", "none"); code != ExitOK {
			t.Fatalf("baseline of %s: exit %d\n%s%s", src, code, out, stderr)
		}
	}
	before := heldBodies(t, mirror)
	if code, out, stderr := run(t, "audit", "--repair", "--source", a.URL, "--sink", "fs:"+mirror, "--state", db, "--progress", "none"); code != ExitOK {
		t.Fatalf("audit --repair of the first source: exit %d\n%s%s", code, out, stderr)
	}
	after := heldBodies(t, mirror)
	var lost []string
	for uri := range maps.Keys(before) {
		if _, ok := after[uri]; !ok {
			lost = append(lost, uri)
		}
	}
	if len(lost) > 0 {
		_, ls, _ := run(t, "ls", "--source", b.URL, "--state", db)
		t.Errorf("audit --repair of %s removed %d resources of the other source %s from the shared mirror; the state still lists them:\n%s\nremoved: %v",
			a.URL, len(lost), b.URL, ls, lost)
	}
}

// TestRepairSinkSpelledOtherwise: the mirror named with a trailing slash
// ("fs:DIR/") is a sink the state records nothing of: a repair there would
// take every change since the snapshot for a difference, deleting what was
// created since and rolling back what was updated. It is refused (exit 2),
// naming where the state holds the source, and nothing changes.
func TestRepairSinkSpelledOtherwise(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 20, Packages: 1, Seed: 3, MeanSize: 128, NoOddNames: true,
		ChangePackages: 2, ChangesPerPackage: 5, CreateShare: 0.4, DeleteShare: -1}, bench.ServeOptions{})
	dir := t.TempDir()
	mirror, db := filepath.Join(dir, "m"), filepath.Join(dir, "s.db")
	args := []string{"--source", srv.URL, "--state", db, "--progress", "none"}
	srv.Handler.Publish(0)
	if code, out, stderr := run(t, append([]string{"sync", "--sink", "fs:" + mirror}, args...)...); code != ExitOK {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	srv.Handler.Publish(2)
	if code, out, stderr := run(t, append([]string{"sync", "--sink", "fs:" + mirror}, args...)...); code != ExitOK {
		t.Fatalf("catch-up: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, append([]string{"audit", "--sink", "fs:" + mirror}, args...)...)
	if code != ExitOK || strings.Contains(out, "newer than the snapshot: ") == false {
		t.Fatalf("audit with the sink as harvested: exit %d (want 0, with resources newer than the snapshot)\n%s%s", code, out, stderr)
	}
	held := heldBodies(t, mirror)
	code, out, stderr = run(t, append([]string{"audit", "--repair", "--sink", "fs:" + mirror + "/"}, args...)...)
	if code != ExitUsage || !strings.Contains(stderr, "this state holds it in fs:"+mirror) {
		t.Errorf("audit --repair --sink fs:DIR/: exit %d, want 2 naming the sink the state holds the source in\n%s%s", code, out, stderr)
	}
	after := heldBodies(t, mirror)
	var gone, rolledBack []string
	for uri, body := range held {
		switch b, ok := after[uri]; {
		case !ok:
			gone = append(gone, uri)
		case b != body:
			rolledBack = append(rolledBack, uri)
		}
	}
	if len(gone)+len(rolledBack) > 0 {
		t.Errorf("audit --repair --sink fs:DIR/ (exit %d): deleted %d resources created after the snapshot %v and rolled %d back to the snapshot's version %v\n%s%s",
			code, len(gone), gone, len(rolledBack), rolledBack, out, stderr)
	}
}

// TestStateCheckDamagedSchema: state check of a file whose schema pages
// are damaged (the store refuses to open it) prints what SQLite's check of
// the plain file finds, exit 2, instead of sending the operator to itself.
func TestStateCheckDamagedSchema(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	st, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	junk := []byte(strings.Repeat("\x07", 1500))
	for off := int64(4096 + 200); off+int64(len(junk)) < fi.Size(); off += 4096 {
		if _, err := f.WriteAt(junk, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	code, out, stderr := run(t, "state", "check", "--state", db)
	if code != ExitUsage {
		t.Errorf("state check of a damaged file: exit %d, want 2", code)
	}
	if strings.TrimSpace(out) == "" || strings.Contains(stderr, "state check says more") {
		t.Errorf("state check of a damaged file printed nothing of what is wrong, and sends the operator to itself:\nstdout: %q\nstderr: %q", out, stderr)
	}
}

// TestAuditBodilessIndex: an es sink that keeps no body (the default) is
// audited as the others are: what it holds is present, not hashed, and
// the audit of sinks holding what the source lists agrees (exit 0).
func TestAuditBodilessIndex(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 5, Packages: 1, Seed: 6, MeanSize: 64, NoOddNames: true}, bench.ServeOptions{})
	es := estest.New(t)
	dir := t.TempDir()
	args := []string{"--source", srv.URL, "--state", filepath.Join(dir, "s.db"), "--sink", "fs:" + filepath.Join(dir, "m"), "--sink", "es:" + es.URL + "/corpus", "--progress", "none"}
	if code, out, stderr := run(t, append([]string{"baseline"}, args...)...); code != ExitOK {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, append([]string{"audit"}, args...)...); code != ExitOK {
		t.Errorf("audit of sinks that hold what the source lists: exit %d (want 0)\n%s%s", code, out, stderr)
	}
}

// TestNewerLostRestoredByNextHarvest: every resource a catch-up created or
// updated after the snapshot is removed from the only mirror. The audit
// counts them all missing (the created ones too, which the listing does
// not name); a repair cannot fetch them from the snapshot (a roll-back),
// so it asks the next harvest for them at the source's current version,
// exiting 1 until then; and the next harvest restores every one.
func TestNewerLostRestoredByNextHarvest(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 20, Packages: 1, Seed: 3, MeanSize: 128, NoOddNames: true,
		ChangePackages: 2, ChangesPerPackage: 5, CreateShare: 0.4, DeleteShare: -1}, bench.ServeOptions{})
	dir := t.TempDir()
	mirror, db := filepath.Join(dir, "m"), filepath.Join(dir, "s.db")
	args := []string{"--source", srv.URL, "--state", db, "--sink", "fs:" + mirror, "--progress", "none"}
	srv.Handler.Publish(0)
	if code, out, stderr := run(t, append([]string{"sync"}, args...)...); code != ExitOK {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	srv.Handler.Publish(2)
	if code, out, stderr := run(t, append([]string{"sync"}, args...)...); code != ExitOK {
		t.Fatalf("catch-up: exit %d\n%s%s", code, out, stderr)
	}
	_, out, _ := run(t, append([]string{"audit"}, args...)...)
	var newer []string
	for _, line := range strings.Split(out, "\n") {
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "newer than the snapshot: "); ok {
			newer = append(newer, u)
		}
	}
	if len(newer) < 2 {
		t.Fatalf("want resources newer than the snapshot:\n%s", out)
	}
	for _, u := range newer {
		if err := os.Remove(filepath.Join(mirror, filepath.FromSlash(fs.Encode(u)))); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := run(t, append([]string{"audit"}, args...)...)
	if want := fmt.Sprintf(" %d missing", len(newer)); code != ExitPartial || !strings.Contains(out, want) {
		t.Errorf("audit of a mirror lacking %d resources the state holds: exit %d, want 1 and%q\n%s%s", len(newer), code, want, out, stderr)
	}
	code, out, stderr = run(t, append([]string{"audit", "--repair"}, args...)...)
	repairCode := code
	if code != ExitPartial || !strings.Contains(out, "asked for again by the next harvest") {
		t.Errorf("audit --repair: exit %d, want 1 saying the next harvest fetches them\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, append([]string{"sync"}, args...)...); code != ExitOK {
		t.Fatalf("next harvest: exit %d\n%s%s", code, out, stderr)
	}
	held := heldBodies(t, mirror)
	var lost []string
	for _, u := range newer {
		if _, ok := held[u]; !ok {
			lost = append(lost, u)
		}
	}
	if len(lost) > 0 {
		t.Errorf("after audit --repair (exit %d) and the next harvest, %d of the %d resources newer than the snapshot are still not in the mirror: %v\nrepair:\n%s%s", repairCode, len(lost), len(newer), lost, out, stderr)
		if repairCode == ExitOK {
			t.Errorf("audit --repair exited 0 though it left differences")
		}
	}
}

// TestRepairDryRunNamesEscaped: a held name with line breaks and a C1
// control (an OAI-PMH identifier may hold them) is printed escaped by a
// dry run's "would delete" lines, as by the audit's own.
func TestRepairDryRunNamesEscaped(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 3, Packages: 1, Seed: 6, MeanSize: 64, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	mirror := filepath.Join(dir, "m")
	args := []string{"--source", srv.URL, "--state", filepath.Join(dir, "s.db"), "--sink", "fs:" + mirror, "--progress", "none"}
	if code, out, stderr := run(t, append([]string{"baseline"}, args...)...); code != ExitOK {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	// A name as an OAI-PMH identifier may be (XML 1.0 allows CR, LF and
	// the C1 control U+009B), held in the mirror and no longer listed.
	const odd = "http://127.0.0.1:PORTX/x\r\nwould delete nothing; \u009b2J"
	p := filepath.Join(mirror, filepath.FromSlash(fs.Encode(odd)))
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, append([]string{"audit", "--repair", "--dry-run"}, args...)...)
	if code != ExitPartial || !strings.Contains(out, "1 extra") {
		t.Fatalf("audit --repair --dry-run: exit %d\n%s%s", code, out, stderr)
	}
	if strings.ContainsAny(out, "\r\u009b") {
		t.Errorf("audit --repair --dry-run printed a name raw:\n%q", out)
	}
}
