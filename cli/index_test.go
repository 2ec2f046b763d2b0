package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/sink/es/zinctest"
	"github.com/rsharvest/rsharvest/sink/solr/solrtest"
	"github.com/rsharvest/rsharvest/state"
)

// TestIndexFromHeldCopies: a site harvested from an OAI-PMH repository into
// an fs mirror and a search index (ZincSearch, started here); the index is
// dropped, and "rsharvest index --site" rebuilds it from the mirror's
// copies with no request to the repository: every document is back with
// its Dublin Core fields.
func TestIndexFromHeldCopies(t *testing.T) {
	z, err := zinctest.Start("cli")
	if err != nil {
		t.Fatalf("ZincSearch: %v", err)
	}
	defer z.Stop()
	name := z.NewIndex()
	index := strings.Replace(z.URL, "http://", "http://"+zinctest.User+":"+zinctest.Password+"@", 1) + "/" + name
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 30, PageSize: 10})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		repo.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "corpus", "--source", srv.URL+"/oai", "--protocol", "oai-pmh",
		"--sink", "fs:"+filepath.Join(dir, "mirror"), "--sink", "es:"+index, "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "run", "corpus", "--state", db, "--log-level", "warn"); code != ExitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, stderr)
	}
	live := 0
	for _, rec := range repo.Records() {
		if !rec.Deleted {
			live++
		}
	}
	before := esTitles(t, z, name, live)
	// OAI-PMH gives no digest: rsharvest keeps its own sha-256 of each.
	st, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	hashed := 0
	err = st.WalkResources(t.Context(), srv.URL+"/oai", func(r state.Resource) error {
		if !r.Deleted && len(r.Hashes.SHA256) == 32 {
			hashed++
		}
		return nil
	})
	st.Close()
	if err != nil || hashed != live {
		t.Errorf("%d of %d records have rsharvest's sha-256 (%v)", hashed, live, err)
	}

	req, _ := http.NewRequest(http.MethodDelete, strings.TrimSuffix(z.URL, "/es")+"/api/index/"+name, nil)
	req.SetBasicAuth(zinctest.User, zinctest.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("dropping the index: %v %v", resp, err)
	}
	resp.Body.Close()

	asked := requests.Load()
	code, out, stderr := run(t, "index", "--site", "corpus", "--state", db)
	if code != ExitOK || !strings.Contains(out, fmt.Sprintf("%d held, %d written, 0 missing", live, live)) {
		t.Fatalf("index: exit %d\n%s%s", code, out, stderr)
	}
	if n := requests.Load() - asked; n != 0 {
		t.Errorf("the index was rebuilt with %d requests to the repository", n)
	}
	after := esTitles(t, z, name, live)
	for id, title := range before {
		if after[id] != title {
			t.Errorf("%s: dc_title %q after the rebuild, %q before", id, after[id], title)
		}
	}

	// A Solr core (the fake), empty as a dropped one, filled the same way.
	core := solrtest.New(t, solrtest.Options{})
	code, out, stderr = run(t, "index", "--site", "corpus", "--sink", "solr:"+core.URL(), "--state", db)
	if code != ExitOK || !strings.Contains(out, fmt.Sprintf("%d written, 0 missing", live)) {
		t.Fatalf("index into solr: exit %d\n%s%s", code, out, stderr)
	}
	if n := requests.Load() - asked; n != 0 {
		t.Errorf("the core was filled with %d requests to the repository", n)
	}
	ids := core.VisibleIDs()
	if len(ids) != live {
		t.Errorf("the core holds %d documents, want %d", len(ids), live)
	}
	for _, id := range ids {
		if doc, _ := core.Visible(id); doc["dc_title"] == nil {
			t.Errorf("solr document %s has no dc_title: %v", id, doc)
		}
	}
}

// esTitles waits (ZincSearch shows writes a moment after it takes them)
// until the index holds want resource documents, each with a dc_title,
// and returns the titles by URI.
func esTitles(t *testing.T, z *zinctest.Server, index string, want int) map[string]string {
	t.Helper()
	var titles map[string]string
	for range 100 {
		body, _ := json.Marshal(map[string]any{"query": map[string]any{"match_all": map[string]any{}}, "size": 1000})
		req, _ := http.NewRequest(http.MethodPost, z.URL+"/"+index+"/_search", bytes.NewReader(body))
		req.SetBasicAuth(zinctest.User, zinctest.Password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var sr struct {
			Hits struct {
				Hits []struct {
					Source map[string]any `json:"_source"`
				} `json:"hits"`
			} `json:"hits"`
		}
		err = json.NewDecoder(resp.Body).Decode(&sr)
		resp.Body.Close()
		titles = map[string]string{}
		if err == nil {
			for _, h := range sr.Hits.Hits {
				if uri, ok := h.Source["uri"].(string); ok && h.Source["dc_title"] != nil {
					titles[uri] = fmt.Sprint(h.Source["dc_title"])
				}
			}
		}
		if len(titles) == want {
			return titles
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("index %s: %d documents with a dc_title, want %d", index, len(titles), want)
	return nil
}

// TestSinkAddedLater: a sink added to a site after its first harvest is
// filled at the next harvest from the copies the site's first sink holds:
// the source is asked for no package, and the new sink ends holding what
// the first does.
func TestSinkAddedLater(t *testing.T) {
	origin := generatedSource(t, bench.GenOptions{Resources: 30, Packages: 2, Seed: 31, MeanSize: 1 << 10, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	if code, out, stderr := run(t, "sites", "add", "corpus", "--source", origin.URL, "--sink", "fs:"+first, "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "run", "corpus", "--state", db, "--log-level", "warn"); code != ExitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "sites", "edit", "corpus", "--sink", "fs:"+first, "--sink", "fs:"+second, "--state", db); code != ExitOK {
		t.Fatalf("sites edit: exit %d\n%s%s", code, out, stderr)
	}
	packages := func() int {
		n := 0
		for p, k := range origin.Handler.Stats().ByPath {
			if strings.HasSuffix(p, ".zip") {
				n += k
			}
		}
		return n
	}
	before := packages()
	if code, out, stderr := run(t, "run", "corpus", "--state", db, "--log-level", "warn"); code != ExitOK {
		t.Fatalf("second run: exit %d\n%s%s", code, out, stderr)
	}
	if n := packages() - before; n != 0 {
		t.Errorf("the second harvest downloaded %d packages to fill the sink added", n)
	}
	a, b := heldBodies(t, first), heldBodies(t, second)
	if len(a) != 30 || len(b) != len(a) {
		t.Fatalf("the first sink holds %d resources, the one added %d; want 30 each", len(a), len(b))
	}
	for uri, body := range a {
		if b[uri] != body {
			t.Errorf("%s differs in the sink added", uri)
		}
	}
}

// TestIndexCreatesNoState: index reads what a state holds: given a state
// file that does not exist (a typo), it says so (exit 2) and creates none.
func TestIndexCreatesNoState(t *testing.T) {
	db := filepath.Join(t.TempDir(), "typo.db")
	code, out, stderr := run(t, "index", "--site", "a", "--sink", "fs:"+filepath.Join(t.TempDir(), "m"), "--state", db)
	if code != ExitUsage || !strings.Contains(stderr, "no state file") {
		t.Errorf("index with no state file: exit %d, want 2 saying so\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("index created the state file %s", db)
	}
}
