// Package javazip writes ZIP packages with Java's own
// java.util.zip.ZipOutputStream, as DSpace's ResourceSync module does, for
// tests that must meet real producers' packages rather than the project's
// own writer's. It needs a JDK (javac and java on PATH); without one it
// fails the test, telling how to install it: it never skips.
//
// ZipWriter.java is compiled once per test binary, in a temporary
// directory removed at once; each package is then written by `java -cp`
// from a copy of the compiled class in the calling test's own temporary
// directory, so nothing is left behind and nothing is shared between
// processes.
package javazip

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
// data descriptor, names as given, in UTF-8 with the UTF-8 flag set.
func Write(tb testing.TB, out string, entries []Entry) {
	tb.Helper()
	WriteCharset(tb, out, "UTF-8", entries)
}

// WriteCharset is Write with the entry names encoded in the given Java
// charset: with any other than UTF-8 (such as "IBM437", the ZIP
// specification's original code page) ZipOutputStream writes the names'
// bytes in it without the UTF-8 flag, as older producers do.
func WriteCharset(tb testing.TB, out, charset string, entries []Entry) {
	tb.Helper()
	classes := compiled(tb)
	dir := tb.TempDir()
	for name, b := range classes {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
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
	cmd := exec.Command(tool(tb, "java"), "-cp", dir, "ZipWriter", out, charset)
	cmd.Stdin = &list
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("javazip: java ZipWriter: %v\n%s", err, b)
	}
}

var compile struct {
	once    sync.Once
	classes map[string][]byte // file name → bytes
	err     string            // why compiling failed
}

// compiled compiles ZipWriter.java, once per test binary, and returns the
// class files javac wrote.
func compiled(tb testing.TB) map[string][]byte {
	tb.Helper()
	javac := tool(tb, "javac")
	compile.once.Do(func() { compile.classes, compile.err = compileSource(javac) })
	if compile.err != "" {
		tb.Fatalf("javazip: %s", compile.err)
	}
	return compile.classes
}

// compileSource runs javac on ZipWriter.java in a temporary directory,
// which it removes, and returns the class files; or why it failed.
func compileSource(javac string) (map[string][]byte, string) {
	work, err := os.MkdirTemp("", "rsharvest-javazip-")
	if err != nil {
		return nil, err.Error()
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "ZipWriter.java")
	if err := os.WriteFile(src, source, 0o600); err != nil {
		return nil, err.Error()
	}
	out := filepath.Join(work, "classes")
	if b, err := exec.Command(javac, "-d", out, src).CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("javac: %v\n%s", err, b)
	}
	files, err := filepath.Glob(filepath.Join(out, "*.class"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Sprintf("javac wrote no class files (%v)", err)
	}
	classes := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err.Error()
		}
		classes[filepath.Base(f)] = b
	}
	return classes, ""
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
