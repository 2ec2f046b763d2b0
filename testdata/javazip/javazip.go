// Package javazip writes ZIP packages with Java's own
// java.util.zip.ZipOutputStream, as DSpace's ResourceSync module does, for
// tests that must meet real producers' packages rather than the project's
// own writer's. It needs a JDK (javac and java on PATH); without one it
// fails the test, telling how to install it.
package javazip

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

//go:embed ZipWriter.java
var source []byte

// Entry is one entry to write: its name exactly as the archive is to hold
// it, and its bytes.
type Entry struct {
	Name string
	Body []byte
}

// Write writes entries, in order, to a new ZIP file at out with
// java.util.zip.ZipOutputStream: every entry deflated and followed by a
// data descriptor, names as given.
func Write(tb testing.TB, out string, entries []Entry) {
	tb.Helper()
	classDir := compile(tb)
	dir := tb.TempDir()
	var list bytes.Buffer
	for i, e := range entries {
		if strings.ContainsAny(e.Name, "\t\n\r") {
			tb.Fatalf("javazip: entry name %q holds a tab or a line break", e.Name)
		}
		p := filepath.Join(dir, fmt.Sprintf("entry-%d", i))
		if err := os.WriteFile(p, e.Body, 0o600); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&list, "%s\t%s\n", e.Name, p)
	}
	cmd := exec.Command(tool(tb, "java"), "-cp", classDir, "ZipWriter", out)
	cmd.Stdin = &list
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("javazip: java ZipWriter: %v\n%s", err, b)
	}
}

// compile compiles ZipWriter.java once per version of its source into a
// directory of the system's temporary directory, and returns it.
func compile(tb testing.TB) string {
	tb.Helper()
	sum := sha256.Sum256(source)
	dir := filepath.Join(os.TempDir(), "rsharvest-javazip-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "ZipWriter.class")); err == nil {
		return dir
	}
	javac := tool(tb, "javac")
	work, err := os.MkdirTemp(os.TempDir(), "rsharvest-javazip-build-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(work)
	if err := os.WriteFile(filepath.Join(work, "ZipWriter.java"), source, 0o600); err != nil {
		tb.Fatal(err)
	}
	if b, err := exec.Command(javac, "-d", work, filepath.Join(work, "ZipWriter.java")).CombinedOutput(); err != nil {
		tb.Fatalf("javazip: javac: %v\n%s", err, b)
	}
	if err := os.Remove(filepath.Join(work, "ZipWriter.java")); err != nil {
		tb.Fatal(err)
	}
	// Another test process may have got there first: either copy will do.
	if err := os.Rename(work, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "ZipWriter.class")); serr != nil {
			tb.Fatalf("javazip: %v", err)
		}
	}
	return dir
}

// tool finds a JDK command, failing the test when there is none.
func tool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("javazip: %s not found: the test writes packages with Java's ZipOutputStream, as DSpace does; install a JDK (apt-get install default-jdk-headless)", name)
	}
	return p
}
