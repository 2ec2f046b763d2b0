package oaipmh_test

import (
	"fmt"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/source"
)

// TestHTTPOAI: an independent client, Perl's HTTP::OAI (Debian's
// libhttp-oai-perl, installed by .ci/run), harvests the synthetic
// repository and sees what rsharvest's planner sees: the same records,
// datestamps, deletes and titles — so the provider is faithful to the
// protocol, not shaped to rsharvest. Both harvest a baseline and, after
// the repository changed, an incremental from the first one's clock.
func TestHTTPOAI(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Fatal("perl is not installed (.ci/run installs libhttp-oai-perl)")
	}
	if out, err := exec.Command("perl", "-MHTTP::OAI", "-e", "1").CombinedOutput(); err != nil {
		t.Fatalf("HTTP::OAI is not installed (apt-get install libhttp-oai-perl; .ci/run does): %v\n%s", err, out)
	}
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 45, PageSize: 10, EmptyLastToken: true, RootNamespaces: true})
	srv := httptest.NewServer(repo)
	defer srv.Close()
	from := ""
	for step := range 2 {
		var fromTime time.Time
		if step > 0 {
			from = repo.Now().Format("2006-01-02T15:04:05Z")
			fromTime = repo.Now()
			repo.Advance()
		}
		args := []string{"../../testdata/oai/harvest.pl", srv.URL}
		if from != "" {
			args = append(args, from)
		}
		out, err := exec.Command("perl", args...).Output()
		if err != nil {
			t.Fatalf("harvest.pl: %v\n%s", err, out)
		}
		theirs := strings.Split(strings.TrimSpace(string(out)), "\n")
		task := source.Task{Source: srv.URL, Mode: source.Baseline}
		if step > 0 {
			task = source.Task{Source: srv.URL, Mode: source.Incremental, From: fromTime}
		}
		var ours []string
		for _, u := range planWith(t, planner(), task) {
			r := u.Record
			status, title := "-", "-"
			if r.Change == source.Deleted {
				status = "deleted"
			} else {
				body := readBody(t, r)
				title = body[strings.Index(body, "<dc:title>")+len("<dc:title>") : strings.Index(body, "</dc:title>")]
			}
			ours = append(ours, fmt.Sprintf("%s\t%s\t%s\t%s", r.URI, r.ChangeTime.Format("2006-01-02T15:04:05Z"), status, title))
		}
		slices.Sort(theirs)
		slices.Sort(ours)
		if !slices.Equal(theirs, ours) {
			t.Errorf("step %d: HTTP::OAI saw %d records, rsharvest %d:\n%s\n---\n%s", step, len(theirs), len(ours), strings.Join(theirs, "\n"), strings.Join(ours, "\n"))
		}
		if step == 0 && len(ours) != 45 {
			t.Errorf("baseline: %d records", len(ours))
		}
	}
}
