package cli

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/notify/mailtest"
)

// TestRunReports: after run --due, each site's contact gets the report of
// its harvest (by its notification policy) and the administrator the
// composite report, through a real SMTP server (Mailpit: STARTTLS,
// authentication) and read back from it; every report is also written to
// --report-dir; a failed harvest is reported as failed, with its error.
func TestRunReports(t *testing.T) {
	mp := mailtest.Start(t)
	oai := httptest.NewServer(bench.NewOAIRepository(bench.OAIOptions{Records: 12, PageSize: 5}))
	defer oai.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	registry := filepath.Join(dir, "sites.yaml")
	if err := os.WriteFile(registry, []byte(`sites:
  - {name: oai, source: "`+oai.URL+`/oai", protocol: oai-pmh, sinks: [fs:oai], schedule: every 1d, contact: ops@oai.example}
  - {name: quiet, source: "`+oai.URL+`/oai", protocol: oai-pmh, metadata_prefix: oai_dc, set: [tens], sinks: [fs:quiet], schedule: every 1d, contact: ops@quiet.example, notify: on_error}
  - {name: broken, source: "http://127.0.0.1:1/x.xml", retries: 0, sinks: [fs:broken], schedule: every 1d, contact: ops@broken.example, notify: on_error}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, "sites", "apply", registry, "--state", db); code != ExitOK {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	t.Setenv("RSHARVEST_SMTP_PASSWORD", mp.Password)
	reports := filepath.Join(dir, "reports")
	mailArgs := []string{"--state", db, "--report-dir", reports, "--smtp", mp.SMTP, "--smtp-from", "rsharvest@aggregator.example",
		"--smtp-user", mp.Username, "--smtp-ca", mp.CAFile, "--admin", "admin@aggregator.example"}
	if code, out, stderr := run(t, append([]string{"run", "--due"}, mailArgs...)...); code != ExitPartial {
		t.Fatalf("run --due: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, append([]string{"run", "oai"}, mailArgs...)...); code != ExitOK {
		t.Fatalf("run oai: exit %d\n%s%s", code, out, stderr)
	}
	msgs, err := mp.Messages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byTo := map[string][]mailtest.Message{}
	for _, m := range msgs {
		byTo[strings.Join(m.To, ",")] = append(byTo[strings.Join(m.To, ",")], m)
	}
	// oai: two harvests, always told; quiet: succeeded, on_error: never;
	// broken: failed once; the administrator: one per run.
	for to, n := range map[string]int{"ops@oai.example": 2, "ops@quiet.example": 0, "ops@broken.example": 1, "admin@aggregator.example": 2} {
		if len(byTo[to]) != n {
			t.Errorf("%d messages to %s, want %d", len(byTo[to]), to, n)
		}
	}
	if len(msgs) != 5 {
		t.Errorf("%d messages, want 5", len(msgs))
	}
	check := func(m mailtest.Message, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(m.Subject+"\n"+m.Text, w) {
				t.Errorf("message %q lacks %q:\n%s", m.Subject, w, m.Text)
			}
		}
	}
	if ms := byTo["ops@oai.example"]; len(ms) == 2 {
		check(ms[0], "baseline harvest of oai: ok (12 written", "Next harvest: ")
		check(ms[1], "harvest of oai: ok (0 written")
	}
	if ms := byTo["ops@broken.example"]; len(ms) == 1 {
		check(ms[0], "harvest of broken: failed", "The harvest failed: ", "connection refused")
		if strings.Contains(ms[0].Subject, ": ok") {
			t.Errorf("a failed harvest reported as ok: %s", ms[0].Subject)
		}
	}
	if ms := byTo["admin@aggregator.example"]; len(ms) == 2 {
		check(ms[0], "3 site(s) harvested, 1 not in full", "Site:        broken", "Site:        quiet")
		check(ms[1], "1 site(s) harvested, 0 not in full")
	}
	files, _ := filepath.Glob(filepath.Join(reports, "*.txt"))
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Base(f)
	}
	// 3 + 1 site reports (quiet's written, not sent) and 2 composite ones.
	if len(files) != 6 || !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "site-quiet-run") }) {
		t.Errorf("report directory: %v", names)
	}
}
