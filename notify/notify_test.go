package notify_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/notify/mailtest"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// TestWanted: the notification policies.
func TestWanted(t *testing.T) {
	tests := []struct {
		notify, status string
		written        int64
		want           bool
	}{
		{"", "ok", 0, true}, {"always", "ok", 0, true},
		{"on_error", "ok", 5, false}, {"on_error", "partial", 0, true}, {"on_error", "failed", 0, true},
		{"on_change", "ok", 0, false}, {"on_change", "ok", 1, true}, {"on_change", "failed", 0, true},
	}
	for _, tt := range tests {
		s := notify.Harvest{Notify: tt.notify, Status: tt.status, Run: runreport.Report{Resources: runreport.Resources{Written: tt.written}}}
		if got := s.Wanted(); got != tt.want {
			t.Errorf("%s, %s, %d written: wanted %v", tt.notify, tt.status, tt.written, got)
		}
	}
}

// TestSend: reports sent through a real SMTP server (Mailpit, STARTTLS
// and authentication) and read back: one message per site harvest its
// policy wants, with what was harvested, what failed and why, and the next
// harvest; one composite report to the administrator; none sent twice;
// every report written to the directory.
func TestSend(t *testing.T) {
	ctx := context.Background()
	mp := mailtest.Start(t)
	st, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	s := &notify.Sender{Dir: dir, Admin: "admin@aggregator.example", Store: st,
		Mail: &notify.SMTP{Addr: mp.SMTP, From: "rsharvest@aggregator.example", Username: mp.Username, Password: mp.Password, TLS: "starttls", TLSConfig: mp.TLS}}
	t0 := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	run := func(id int64, mode string, finished time.Time, written, failed int64) runreport.Report {
		return runreport.Report{RunID: id, Mode: mode, Started: t0, Finished: finished, Resources: runreport.Resources{Written: written, Failed: failed}}
	}
	sites := []notify.Harvest{
		{Site: "a", Source: "http://a.example/oai", Contact: "ops@a.example", Status: "ok", Run: run(1, "baseline", t0.Add(time.Minute), 40, 0), Next: t0.AddDate(0, 0, 1)},
		{Site: "b", Source: "http://b.example/rs", Contact: "ops@b.example", Notify: "on_error", Status: "partial", Run: run(2, "incremental", t0.Add(time.Minute), 3, 1),
			Failures: []runreport.Failure{{URI: "http://b.example/r/1", Stage: "download", Error: "HTTP 503", Permanent: false}}, Next: t0.AddDate(0, 0, 7)},
		{Site: "c", Source: "http://c.example/rs", Contact: "ops@c.example", Notify: "on_error", Status: "ok", Run: run(3, "incremental", time.Time{}, 0, 0), Next: t0.AddDate(0, 1, 0)},
		{Site: "d", Source: "http://127.0.0.1:1/x.xml", Contact: "ops@d.example", Status: "failed", Run: run(0, "baseline", time.Time{}, 0, 0), Error: "source unreadable: connection refused", Next: t0.AddDate(0, 0, 1)},
	}
	admin := notify.Composite{Key: "run:2026-11-25T03:00:00Z", Title: "run --due at 2026-11-25 03:00 UTC", Harvests: sites}
	for range 2 { // the second time, nothing is sent again
		for i := range sites {
			if err := s.Harvest(ctx, &sites[i]); err != nil {
				t.Fatalf("site %s: %v", sites[i].Site, err)
			}
		}
		if err := s.Composite(ctx, &admin); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := mp.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var to []string
	for _, m := range msgs {
		to = append(to, strings.Join(m.To, ","))
	}
	if want := []string{"ops@a.example", "ops@b.example", "ops@d.example", "admin@aggregator.example"}; !slices.Equal(to, want) {
		t.Fatalf("messages to %v, want %v", to, want)
	}
	checks := [][]string{
		{"baseline harvest of a: ok (40 written, 0 deleted, 0 failed)", "40 written", "Next harvest: 2026-11-26 03:00:00 UTC"},
		{"incremental harvest of b: partial", "http://b.example/r/1 (download, temporary: tried again at the next harvest): HTTP 503", "Next harvest: 2026-12-02"},
		{"baseline harvest of d: failed (0 written, 0 deleted, 0 failed)", "The harvest failed: source unreadable: connection refused"},
		{"4 site(s) harvested, 2 not in full", "Site:        a", "Site:        d"},
	}
	for i, m := range msgs {
		for _, w := range checks[i] {
			if !strings.Contains(m.Subject+"\n"+m.Text, w) {
				t.Errorf("message %d (%s) lacks %q:\n%s", i, m.Subject, w, m.Text)
			}
		}
		if !strings.Contains(m.HTML, "<h2>") {
			t.Errorf("message %d: no HTML part:\n%s", i, m.HTML)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 10 { // 4 sites and the composite, .txt and .html each
		t.Errorf("report directory holds %d files: %v", len(files), files)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "site-c-run3.txt")); err != nil || !strings.Contains(string(b), "Harvest:     incremental, ok (run 3)") {
		t.Errorf("site c's report, written though not sent: %v\n%s", err, b)
	}
}
