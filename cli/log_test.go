package cli

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/state"
)

// TestHarvestLog: rsharvest log shows the harvester starting and
// stopping, each site's harvest begun and ended with its counts and
// status, and each failure with its error and whether it is temporary —
// read from the state's runs and failures; --site shows that site's
// entries alone (not the harvester's starts and stops), --since filters
// by time.
func TestHarvestLog(t *testing.T) {
	strict := httptest.NewServer(bench.NewOAIRepository(bench.OAIOptions{Records: 3}))
	defer strict.Close()
	var (
		mu    sync.Mutex
		pages int
	)
	busy := busyServer(bench.NewOAIRepository(bench.OAIOptions{Records: 20, PageSize: 5}), func(q url.Values) bool {
		if q.Get("verb") != "ListRecords" {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		pages++
		return pages > 1
	})
	defer busy.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	registry := filepath.Join(dir, "sites.yaml")
	if err := os.WriteFile(registry, []byte(`sites:
  - {name: strict, source: "`+strict.URL+`/oai", protocol: oai-pmh, require_hash: true, sinks: [fs:strict], schedule: every 1d}
  - {name: busy, source: "`+busy.URL+`/oai", protocol: oai-pmh, concurrency: 1, sinks: [fs:busy], schedule: every 1d}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, "sites", "apply", registry, "--state", db); code != ExitOK {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "run", "--due", "--state", db); code != ExitPartial {
		t.Fatalf("run --due: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "log", "--state", db)
	if code != ExitOK {
		t.Fatalf("log: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		`harvester started  rsharvest run: 2 site\(s\): busy, strict`,
		`strict  harvest begun      run \d+: baseline of ` + regexp.QuoteMeta(strict.URL+"/oai"),
		`strict  failed             run \d+: permanent, verify: oai:rsharvest.example:0000000: no md5`,
		`strict  harvest ended      run \d+: partial: 0 written, 0 deleted, 0 unchanged, 3 failed, 0 skipped`,
		`busy    failed             run \d+: temporary, resource set: .*Retry-After 1h0m0s`,
		`busy    harvest ended      run \d+: partial: 5 written`,
		`harvester stopped  some sites failed`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "strict  failed"); n != 3 {
		t.Errorf("%d failures of site strict, want 3:\n%s", n, out)
	}
	code, out, _ = run(t, "log", "--state", db, "--site", "busy", "--json")
	var entries []harvestlog.Entry
	if err := json.Unmarshal([]byte(out), &entries); code != ExitOK || err != nil {
		t.Fatalf("log --json: exit %d, %v\n%s", code, err, out)
	}
	ops := map[string]int{}
	for _, e := range entries {
		if e.Site != "busy" {
			t.Errorf("--site busy shows %+v", e)
		}
		ops[e.Operation]++
	}
	if ops[harvestlog.Started] != 0 || ops[harvestlog.HarvestBegun] != 1 || ops[harvestlog.Failed] != 1 || ops[harvestlog.HarvestEnded] != 1 || ops[harvestlog.Stopped] != 0 {
		t.Errorf("--site busy: operations %v", ops)
	}
	if code, out, _ := run(t, "log", "--state", db, "--since", "2999-01-01T00:00:00Z", "--json"); code != ExitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("--since the future: exit %d\n%s", code, out)
	}
	if code, _, stderr := run(t, "log", "--state", db, "--since", "yesterday"); code != ExitUsage || !strings.Contains(stderr, "--since") {
		t.Errorf("--since yesterday: exit %d\n%s", code, stderr)
	}
}

// TestHarvestLogKept: a harvest of registry sites keeps the harvest log to
// --keep-runs, once a day: a run older than that loses its report and
// failures (its one-line record stays) and older log lines go, the log
// says so, and the day's second harvest prunes nothing more. A value that
// is neither an age nor a count is a usage error.
func TestHarvestLogKept(t *testing.T) {
	repo := httptest.NewServer(bench.NewOAIRepository(bench.OAIOptions{Records: 3}))
	defer repo.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "oai", "--source", repo.URL+"/oai", "--protocol", "oai-pmh", "--sink", "fs:"+filepath.Join(dir, "out"), "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	// A run and a log line of forty days ago.
	ctx := t.Context()
	st, err := state.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-40 * 24 * time.Hour)
	id, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: repo.URL + "/oai", Site: "oai", Started: old})
	if err == nil {
		err = st.AddFailures(ctx, []state.Failure{{RunID: id, URI: "oai:x", Stage: "verify", Error: "old", Permanent: true, At: old}})
	}
	if err == nil {
		err = st.FinishRun(ctx, id, old.Add(time.Minute), "partial", []byte(`{"status":"partial"}`))
	}
	if err == nil {
		err = st.AddEvent(ctx, state.Event{At: old, Operation: harvestlog.Action, Site: "oai", Message: "pause, asked by an old operator"})
	}
	if err == nil {
		err = st.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "run", "oai", "--keep-runs", "a month", "--state", db); code != ExitUsage || !strings.Contains(stderr, "keep-runs") {
		t.Fatalf("--keep-runs 'a month': exit %d, want %d\n%s", code, ExitUsage, stderr)
	}
	for range 2 {
		if code, out, stderr := run(t, "run", "oai", "--keep-runs", "30d", "--state", db); code != ExitOK {
			t.Fatalf("run: exit %d\n%s%s", code, out, stderr)
		}
	}
	code, out, stderr := run(t, "log", "--state", db)
	if code != ExitOK {
		t.Fatalf("log: exit %d\n%s%s", code, out, stderr)
	}
	if n := strings.Count(out, harvestlog.Pruned); n != 1 || !strings.Contains(out, "1 run(s) thinned to their one-line record (1 failure(s) removed), 1 log line(s) removed") {
		t.Errorf("%d prunings in the log, want one of the old run and line:\n%s", n, out)
	}
	if strings.Contains(out, "old operator") || strings.Contains(out, "verify: old") {
		t.Errorf("the old line or failure is still in the log:\n%s", out)
	}
	if n := strings.Count(out, "harvest ended"); n != 3 {
		t.Errorf("%d runs ended in the log, want 3 (the old one's record stays):\n%s", n, out)
	}
}
