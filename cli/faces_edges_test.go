package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// mainInterruptedWhen runs Main with args, cancelling its context (as SIGINT
// does) once started is signalled.
func mainInterruptedWhen(t *testing.T, started chan struct{}, args ...string) (int, string, string) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		select {
		case <-started:
			cancel()
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
	}()
	var out, errb bytes.Buffer
	code := Main(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestInterruptedSinkOpen: an interrupt while a sink is being opened (an
// Elasticsearch-style endpoint that does not answer) exits 130, as every
// interrupted run does.
func TestInterruptedSinkOpen(t *testing.T) {
	started := make(chan struct{}, 1)
	es := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer es.Close()
	origin := generatedSource(t, bench.GenOptions{Resources: 5, Packages: 1, Seed: 3, MeanSize: 1 << 10, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	code, out, stderr := mainInterruptedWhen(t, started, "baseline", "--source", origin.URL, "--sink", "es:"+es.URL+"/idx",
		"--state", filepath.Join(dir, "s.db"), "--progress", "none")
	if code != ExitInterrupted {
		t.Errorf("exit %d, want %d:\n%s%s", code, ExitInterrupted, out, stderr)
	}
}

// TestUnknownSubcommand: a misspelt command of a group ("sites lsit",
// "state chek", "oai idenitfy") or help topic is a usage error (exit 2, a
// message on standard error), as at the root: a crontab line with the slip
// fails.
func TestUnknownSubcommand(t *testing.T) {
	for _, args := range [][]string{{"sites", "lsit"}, {"state", "chek"}, {"oai", "idenitfy", "http://127.0.0.1:1/"}, {"help", "basline"}} {
		code, out, stderr := run(t, args...)
		if code != ExitUsage || stderr == "" {
			t.Errorf("%q: exit %d, want %d with a message on stderr (stdout %d bytes, stderr %q)", args, code, ExitUsage, len(out), stderr)
		}
	}
}

// TestUnwritableReportRefused: a --report that cannot be written is
// refused before the harvest (exit 2), not found out after a run whose
// summary says ok.
func TestUnwritableReportRefused(t *testing.T) {
	origin := generatedSource(t, bench.GenOptions{Resources: 10, Packages: 1, Seed: 7, MeanSize: 1 << 10, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	code, out, stderr := run(t, "baseline", "--source", origin.URL, "--sink", "fs:"+filepath.Join(dir, "m"),
		"--state", filepath.Join(dir, "s.db"), "--progress", "none", "--report", filepath.Join(dir, "no", "such", "r.json"))
	if strings.Contains(out, ": ok in") && code != ExitOK {
		t.Errorf("the summary says ok, the exit code is %d:\n%s%s", code, out, stderr)
	}
	if code != ExitUsage {
		t.Errorf("exit %d, want %d (an unwritable --report refused before the harvest):\n%s%s", code, ExitUsage, out, stderr)
	}
}

// controlSource serves a tiny ResourceSync source on loopback: a
// capability list naming one resource list, which names the resources
// locs (paths below the server's root, as written in the XML: entities
// allowed). Requests for a path starting with "/bad" answer status.
func controlSource(t *testing.T, locs []string, status int) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := srv.URL + "/"
		switch {
		case r.URL.Path == "/capabilitylist.xml":
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="capabilitylist"/>
  <url><loc>%sresourcelist.xml</loc><rs:md capability="resourcelist"/></url>
</urlset>`, base)
		case r.URL.Path == "/resourcelist.xml":
			var b strings.Builder
			for _, l := range locs {
				fmt.Fprintf(&b, `<url><loc>%s%s</loc><lastmod>2025-12-18T07:33:38Z</lastmod><rs:md length="5"/></url>`, base, l)
			}
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="resourcelist" at="2026-01-01T00:00:00Z" completed="2026-01-01T00:00:00Z"/>
%s
</urlset>`, b.String())
		case strings.HasPrefix(r.URL.Path, "/bad"):
			w.WriteHeader(status)
		default:
			w.Write([]byte("hello"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestJSONLogEscapesControls: a URI a source names may hold C1 controls
// (XML allows &#x9b;, the 8-bit CSI); with --log-format json on standard
// error, the records naming it escape them, as the summary and the text
// log do.
func TestJSONLogEscapesControls(t *testing.T) {
	srv := controlSource(t, []string{"ok.txt", "bad&#x9b;2J&#x9b;31mX.txt"}, http.StatusServiceUnavailable)
	dir := t.TempDir()
	code, out, stderr := run(t, "baseline", "--source", srv.URL+"/capabilitylist.xml", "--sink", "fs:"+filepath.Join(dir, "m"),
		"--state", filepath.Join(dir, "s.db"), "--progress", "none", "--log-format", "json", "--retries", "1")
	if strings.Contains(stderr, "\u009b") || strings.Contains(out, "\u009b") {
		t.Errorf("exit %d; a raw C1 CSI reached the terminal:\nstdout: %q\nstderr: %q", code, out, stderr)
	}
}
