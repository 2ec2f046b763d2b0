package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMalformedSourcePasswordNotShown: a password holding a character
// that must be percent-encoded ('#', '?', '/', '%', a space) makes a
// source URL that does not parse; the error that says so, of every
// command, names the source without the password.
func TestMalformedSourcePasswordNotShown(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		password string
		args     func(src string) []string
	}{
		{"se/cret", func(s string) []string { return []string{"discover", s, "--retries", "0"} }},
		{"se cret", func(s string) []string { return []string{"oai", "identify", s, "--retries", "0"} }},
		{"se%cret", func(s string) []string { return []string{"oai", "sets", s, "--retries", "0"} }},
		{"se#cret", func(s string) []string {
			return []string{"sync", "--source", s, "--sink", "fs:" + filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db")}
		}},
		{"se?cret", func(s string) []string {
			return []string{"audit", "--source", s, "--state", filepath.Join(dir, "s.db")}
		}},
		{"se#cret", func(s string) []string {
			return []string{"sites", "add", "s", "--source", s, "--sink", "fs:" + filepath.Join(dir, "m"), "--every", "1d", "--state", filepath.Join(dir, "r.db")}
		}},
	} {
		src := "http://alice:" + tc.password + "@127.0.0.1:1/x"
		args := tc.args(src)
		code, out, stderr := run(t, args...)
		if strings.Contains(out+stderr, tc.password) {
			t.Errorf("%v: exit %d; the password %q is shown:\n%s%s", args[:2], code, tc.password, out, stderr)
		}
	}
}

// TestLookArgumentPasswordNotShown: a look command given a URL with a
// password that is not an http(s) one (a wrong scheme, no scheme) names it
// without the password in its refusal.
func TestLookArgumentPasswordNotShown(t *testing.T) {
	const secret = "hunter2pw"
	for _, args := range [][]string{
		{"discover", "ftp://alice:" + secret + "@127.0.0.1:1/x"},
		{"oai", "identify", "htp://alice:" + secret + "@127.0.0.1:1/oai"},
		{"oai", "record", "alice:" + secret + "@127.0.0.1:1/oai", "oai:x:1"},
	} {
		code, out, stderr := run(t, args...)
		if strings.Contains(out+stderr, secret) {
			t.Errorf("%v: exit %d; the password is shown:\n%s%s", args[:2], code, out, stderr)
		}
	}
}
