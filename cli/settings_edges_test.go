package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFileIn writes text to name in dir and returns its path.
func writeFileIn(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// closedURL is the URL of a loopback port nobody listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String() + "/"
	ln.Close()
	return u
}

// TestVerboseOverridesConfigLogLevel: -v is --log-level debug, and a flag
// given on the command line overrides the config file: -v with a file
// that says log_level: error logs info and debug records, as --log-level
// debug does.
func TestVerboseOverridesConfigLogLevel(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFileIn(t, dir, "c.yaml", "source: "+closedURL(t)+"\nsinks: [fs:mirror]\nlog_level: error\nprogress: none\n")
	db := filepath.Join(dir, "state.db")

	_, _, long := run(t, "sync", "--config", cfg, "--state", db, "--log-level", "debug")
	if !strings.Contains(long, "level=INFO msg=rsharvest") {
		t.Fatalf("--log-level debug over log_level: error: no info record:\n%s", long)
	}
	_, _, short := run(t, "sync", "--config", cfg, "--state", db, "-v")
	if !strings.Contains(short, "level=INFO msg=rsharvest") {
		t.Errorf("-v over a config file's log_level: error: the file won, no info (or debug) record logged:\n%s", short)
	}
}

// TestSitesSourcePasswordNotShown: a source URL's password is never
// shown, even one with a character that needs escaping ('%', '/', '#'),
// which makes a URL that does not parse: sites add refuses it without
// showing it, and no view of the site shows it.
func TestSitesSourcePasswordNotShown(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	const secret = "100%sure"
	src := "https://bob:" + secret + "@example.org/oai"
	code, out, stderr := run(t, "sites", "add", "s", "--source", src, "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1d", "--state", db)
	if strings.Contains(out+stderr, secret) {
		t.Errorf("sites add (exit %d) prints the source's password:\n%s%s", code, out, stderr)
	}
	if code != ExitOK {
		return // refused without showing it: fine
	}
	for _, args := range [][]string{{"sites", "list"}, {"sites", "list", "--json"}, {"sites", "show", "s"}, {"sites", "show", "s", "--json"}} {
		_, out, stderr := run(t, append(args, "--state", db)...)
		if strings.Contains(out+stderr, secret) {
			t.Errorf("%v prints the source's password:\n%s%s", args, out, stderr)
		}
	}
}

// TestSitesAddHeaderValueNotEchoed: a --header given without its colon
// ("Bearer TOKEN", the colon forgotten) is refused by sync and by sites
// add alike, neither repeating the token.
func TestSitesAddHeaderValueNotEchoed(t *testing.T) {
	dir := t.TempDir()
	const token = "tok-9f8e7d6c5b4a"
	code, out, stderr := run(t, "sync", "--source", "http://127.0.0.1:1/", "--sink", "fs:"+filepath.Join(dir, "m"),
		"--header", "Authorization Bearer "+token, "--state", filepath.Join(dir, "a.db"))
	if code != ExitUsage || strings.Contains(out+stderr, token) {
		t.Fatalf("sync: exit %d (want %d, the token hidden):\n%s%s", code, ExitUsage, out, stderr)
	}
	code, out, stderr = run(t, "sites", "add", "s", "--source", "http://127.0.0.1:1/", "--sink", "fs:"+filepath.Join(dir, "m"),
		"--every", "1d", "--header", "Authorization Bearer "+token, "--state", filepath.Join(dir, "b.db"))
	if strings.Contains(out+stderr, token) {
		t.Errorf("sites add (exit %d) prints the header's token in its error:\n%s%s", code, out, stderr)
	}
}

// TestSitesAddChecksSourceAsSyncDoes: a source that is not an http(s) URL
// is refused by sites add and sites apply as sync refuses it (exit 2),
// rather than stored for every harvest to refuse.
func TestSitesAddChecksSourceAsSyncDoes(t *testing.T) {
	dir := t.TempDir()
	sinkDir := filepath.Join(dir, "m")
	code, out, stderr := run(t, "sync", "--source", "ftp://example.org/pub/", "--sink", "fs:"+sinkDir, "--state", filepath.Join(dir, "a.db"))
	if code != ExitUsage || !strings.Contains(stderr, "want an http(s) URL") {
		t.Fatalf("sync: exit %d, want %d:\n%s%s", code, ExitUsage, out, stderr)
	}
	db := filepath.Join(dir, "b.db")
	code, out, stderr = run(t, "sites", "add", "s", "--source", "ftp://example.org/pub/", "--sink", "fs:"+sinkDir, "--every", "1d", "--state", db)
	if code != ExitUsage {
		t.Errorf("sites add with --source ftp://…: exit %d, want %d (refused as sync refuses it):\n%s%s", code, ExitUsage, out, stderr)
	}
	file := writeFileIn(t, dir, "sites.yaml", "sites:\n  - name: t\n    source: example.org/oai\n    sinks: [fs:m]\n    schedule: every 1d\n")
	code, out, stderr = run(t, "sites", "apply", file, "--state", db)
	if code != ExitUsage {
		t.Errorf("sites apply with source: example.org/oai: exit %d, want %d:\n%s%s", code, ExitUsage, out, stderr)
	}
}

// TestConfigFromDuration: from (and until) are a W3C datetime, or a
// duration back from now (24h), given as a flag or in a config file.
func TestConfigFromDuration(t *testing.T) {
	dir := t.TempDir()
	src := closedURL(t)
	db := filepath.Join(dir, "state.db")
	_, out, stderr := run(t, "incremental", "--source", src, "--sink", "fs:"+filepath.Join(dir, "m"), "--from", "24h", "--state", db, "--progress", "none")
	if strings.Contains(stderr, "from") && strings.Contains(stderr, "want") {
		t.Fatalf("--from 24h refused:\n%s%s", out, stderr)
	}
	cfg := writeFileIn(t, dir, "c.yaml", "source: "+src+"\nsinks: [fs:m]\nfrom: 24h\nprogress: none\n")
	code, out, stderr := run(t, "incremental", "--config", cfg, "--state", db)
	if code == ExitUsage && strings.Contains(stderr, "from") {
		t.Errorf("from: 24h in a config file refused (exit %d), though the reference allows a duration:\n%s%s", code, out, stderr)
	}
}

// TestShowApplyRoundTrip: sites show prints a site's definition as a
// sites file holds it: fed back to sites apply, a site without a secret
// is unchanged (its source, shown as its key, is the same source however
// it was spelt when added).
func TestShowApplyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "s", "--source", "http://Repo.Example.ORG:80/oai/./request", "--sink", "fs:"+filepath.Join(dir, "m"),
		"--every", "1d", "--protocol", "oai-pmh", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	_, show, _ := run(t, "sites", "show", "s", "--state", db)
	var b strings.Builder
	b.WriteString("sites:\n")
	for i, l := range strings.Split(strings.TrimRight(show, "\n"), "\n") {
		if i == 0 {
			b.WriteString("  - " + l + "\n")
		} else {
			b.WriteString("    " + l + "\n")
		}
	}
	f := writeFileIn(t, dir, "rt.yaml", b.String())
	code, out, stderr := run(t, "sites", "apply", f, "--state", db)
	if code != ExitOK || !strings.Contains(out, "0 changed") {
		t.Errorf("sites show s, fed back to sites apply, changes the site (exit %d):\n%s%s\nthe file:\n%s", code, out, stderr, b.String())
	}
}
