package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// regenerate is the command that writes the committed references.
const regenerate = "go run ./cmd/rsharvest docs --markdown docs/reference --man docs/man"

// TestReferenceIsCurrent: the command and settings references committed
// under docs/reference and docs/man are what the code writes now — a flag
// added, changed or removed without them regenerated fails here.
func TestReferenceIsCurrent(t *testing.T) {
	dir := t.TempDir()
	md, man := filepath.Join(dir, "reference"), filepath.Join(dir, "man")
	if err := WriteReference(md, man); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct{ made, committed string }{{md, "../docs/reference"}, {man, "../docs/man"}} {
		made, committed := dirFiles(t, d.made), dirFiles(t, d.committed)
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range made {
				if !yield(n) {
					return
				}
			}
		}) {
			if c, ok := committed[name]; !ok {
				t.Errorf("%s/%s is missing: run %s", d.committed, name, regenerate)
			} else if !bytes.Equal(c, made[name]) {
				t.Errorf("%s/%s is out of date: run %s", d.committed, name, regenerate)
			}
		}
		for name := range committed {
			if _, ok := made[name]; !ok {
				t.Errorf("%s/%s documents what the code no longer has: run %s (after removing the directory)", d.committed, name, regenerate)
			}
		}
	}
}

// dirFiles returns the files of dir by name.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestManPagesRead: man reads every committed man page (man-db's man -l,
// warnings on), each naming its command.
func TestManPagesRead(t *testing.T) {
	manCmd, err := exec.LookPath("man")
	if err != nil {
		t.Fatal("man is needed to read the man pages (Debian's man-db):", err)
	}
	pages, err := filepath.Glob("../docs/man/*.1")
	if err != nil || len(pages) < 20 {
		t.Fatalf("%d man pages under docs/man (%v): run %s", len(pages), err, regenerate)
	}
	for _, p := range pages {
		cmd := exec.CommandContext(t.Context(), manCmd, "--warnings", "-l", p)
		cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=100", "LANG=C.UTF-8")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		name := strings.TrimSuffix(filepath.Base(p), ".1")
		if err := cmd.Run(); err != nil || !strings.Contains(out.String(), name) || errb.Len() > 0 {
			t.Errorf("man -l %s: %v\n%s\n%s", p, err, errb.String(), out.String()[:min(out.Len(), 300)])
		}
	}
}

// TestVersion: "rsharvest version" says the version, the commit and
// which build the binary is; a harvest's log says the same once, at start.
func TestVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != ExitOK || !strings.HasPrefix(out, "rsharvest ") || !strings.Contains(out, "commit:") || !strings.Contains(out, "build:    portable (pure Go") {
		t.Errorf("version: exit %d\n%s", code, out)
	}
	dir := t.TempDir()
	_, _, stderr := run(t, "sync", "--source", "http://127.0.0.1:1/", "--sink", "fs:"+filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"))
	if strings.Count(stderr, "msg=rsharvest version=") != 1 || !strings.Contains(stderr, `build="portable (pure Go`) {
		t.Errorf("the run's log does not say the build once:\n%s", stderr)
	}
}
