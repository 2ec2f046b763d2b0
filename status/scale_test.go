package status_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/status"
)

// get fetches page from h as the operator, wanting 200.
func get(t *testing.T, h http.Handler, page string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, page, nil)
	req.Header.Set("Authorization", "Bearer t")
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: %d %s", page, rec.Code, b)
	}
	return string(b)
}

// TestPagesOfARegistry: the sites page of a registry larger than a page
// lists a page of sites (failing first), the counts per state with links
// that filter, a search by name, the pages before and after, and a chart
// of the harvests per hour; a site's page lists its runs by page with a
// chart of its last harvests; /metrics gives the registry's series, and
// a site's own only when marked, past --metrics-sites sites.
func TestPagesOfARegistry(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state.db")
	scaleStore(t, db, "sqlite", 120, 120*60)
	st, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	def, err := st.Site(t.Context(), "site-00007")
	if err != nil {
		t.Fatal(err)
	}
	def.Definition += "metrics: true\n"
	if err := st.PutSite(t.Context(), def); err != nil {
		t.Fatal(err)
	}
	h, err := status.Handler(status.Options{Store: st, Operator: status.Credentials{Token: "t"}, MetricsSites: 10})
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`<tr class="site" data-site="([^"]+)"`)
	first := get(t, h, "/")
	listed := rows.FindAllStringSubmatch(first, -1)
	if len(listed) != 50 || listed[0][1] != "site-00000" || !strings.Contains(first, `href="/?page=2"`) || !strings.Contains(first, "page 1 of 3") {
		t.Fatalf("the first page lists %d sites, from %v", len(listed), listed[:min(len(listed), 3)])
	}
	for _, want := range []string{`failing <b>3</b>`, `all <b>120</b>`, `id="hours-chart"`, `<title>`, `url(#hatch-hours)`} {
		if !strings.Contains(first, want) {
			t.Errorf("the sites page lacks %q", want)
		}
	}
	failing := get(t, h, "/?state=failing")
	if got := rows.FindAllStringSubmatch(failing, -1); len(got) != 3 || got[0][1] != "site-00000" || got[1][1] != "site-00050" {
		t.Errorf("?state=failing lists %v", got)
	}
	if got := rows.FindAllStringSubmatch(get(t, h, "/?q=site-0011"), -1); len(got) != 10 {
		t.Errorf("?q=site-0011 lists %d sites, want 10", len(got))
	}
	if got := rows.FindAllStringSubmatch(get(t, h, "/?page=3"), -1); len(got) != 20 {
		t.Errorf("page 3 lists %d sites, want 20", len(got))
	}

	page := get(t, h, "/site/site-00050")
	if n := strings.Count(page, `<a href="/run/`); n != 50 || !strings.Contains(page, `id="older"`) || !strings.Contains(page, `id="runs-chart"`) {
		t.Errorf("the site's page lists %d runs (want 50), older link %v", n, strings.Contains(page, `id="older"`))
	}
	older := regexp.MustCompile(`id="older" href="([^"]+)"`).FindStringSubmatch(page)
	if older == nil {
		t.Fatal("no link to older runs")
	}
	if n := strings.Count(get(t, h, strings.ReplaceAll(older[1], "&amp;", "&")), `<a href="/run/`); n != 10 {
		t.Errorf("the older page lists %d runs, want 10", n)
	}

	metrics := get(t, h, "/metrics")
	for _, want := range []string{`rsharvest_sites{state="failing"} 3`, `rsharvest_runs_total{status="ok"}`, `rsharvest_sites_failing_in_a_row{at_least="3"} 0`,
		`rsharvest_last_harvests_resources{outcome="written",protocol="auto"}`, `rsharvest_site_runs_total{site="site-00007",status="ok"} 60`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^rsharvest_site_runs_total\{site="([^"]+)"`).FindAllString(metrics, -1)); n != 1 {
		t.Errorf("/metrics gives the runs of %d sites, want only the one marked (120 sites, past 10)", n)
	}
}
