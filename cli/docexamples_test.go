package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runMarker, on the line before a ```sh block of the README or the manual,
// says that the block is run by TestDocExamples.
const runMarker = "<!-- run -->"

// docExamples returns the blocks of the Markdown file at path marked to
// be run, in order.
func docExamples(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	marked, in := false, false
	var cur strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case in && strings.TrimSpace(line) == "```":
			blocks, in = append(blocks, cur.String()), false
			cur.Reset()
		case in:
			cur.WriteString(line + "\n")
		case marked && strings.TrimSpace(line) == "```sh":
			in, marked = true, false
		default:
			marked = strings.TrimSpace(line) == runMarker
		}
	}
	return blocks
}

// TestDocExamples: the commands the README and the manual show, where
// marked to be run, run as shown — each file's blocks in order, in a
// directory of their own, with rsharvest on the PATH — and succeed. A
// block that starts a server in the background (a line ending in "&") is
// given a moment to listen; what it started is stopped at the end.
func TestDocExamples(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../README.md"}, files...)
	bin := crashBuildBinary(t)
	ran := 0
	for _, f := range files {
		blocks := docExamples(t, f)
		if len(blocks) == 0 {
			continue
		}
		ran++
		t.Run(filepath.Base(f), func(t *testing.T) {
			dir := t.TempDir()
			var script strings.Builder
			script.WriteString("set -euo pipefail\n")
			for _, b := range blocks {
				script.WriteString(b)
				if strings.Contains(b, "&\n") {
					script.WriteString("sleep 1 # a server started in the background listens\n")
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
			cmd.Dir = dir
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "RSHARVEST_") }),
				"PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "HOME="+dir, "XDG_STATE_HOME="+filepath.Join(dir, ".state"))
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 2 * time.Second // the servers keep the output open: not waited for
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // the servers it started
			if errors.Is(err, exec.ErrWaitDelay) {
				err = nil
			}
			if err != nil {
				t.Fatalf("the examples of %s: %v\n--- script\n%s--- output\n%s", f, err, script.String(), out.String())
			}
		})
	}
	if ran == 0 {
		t.Fatal("no example marked to be run in the README or docs/: the manual's commands go untested")
	}
}
