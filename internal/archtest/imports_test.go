package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rsharvest/rsharvest"

// allowed maps each production package of the module (a path relative to
// the module; "x/..." covers x and everything below it) to the module
// packages it may import (path.Match patterns: "source/*" is every
// package directly below source). The first matching entry applies. It
// is the table of docs/ARCHITECTURE.md.
var allowed = []struct {
	pkg     string
	imports []string
}{
	{"errclass", nil},
	{"runreport", nil},
	{"internal/flock", nil},
	{"internal/sqlitefile", nil},
	{"internal/browsertest", nil},
	{"internal/xmlcap", nil},
	{"internal/xmlcap/xmlcaptest", []string{"internal/xmlcap"}},
	{"internal/retry", []string{"errclass"}},
	{"fixity", []string{"errclass"}},
	{"manifest", []string{"errclass", "fixity", "internal/xmlcap"}},
	{"unzip", []string{"errclass"}},
	{"fetch", []string{"errclass", "fixity", "internal/retry"}},
	{"state/statetest", []string{"state", "errclass", "fixity"}},
	{"state/changeplan", []string{"errclass", "source"}},
	{"state", []string{"errclass", "fixity", "internal/flock", "internal/retry", "internal/sqlitefile"}},
	{"sink/s3/s3test", []string{"sink", "sink/fs", "sink/s3", "errclass", "internal/testbin"}},
	{"sink/sinktest", []string{"sink", "errclass", "fixity"}},
	{"sink/es/zinctest", []string{"internal/testbin"}},
	// The registry imports every kind of sink; a kind is a package below
	// sink, so a new one needs no line here.
	{"sink/sinks", []string{"sink", "sink/*"}},
	{"sink/...", []string{"sink", "sink/fs", "errclass", "fixity", "internal/flock", "internal/retry", "internal/sqlitefile"}},
	// The registry imports every protocol; a protocol is a package below
	// source (the catch-all entry after the named ones), so a new one
	// needs no line here.
	{"source/protocols", []string{"source", "source/*"}},
	{"source", []string{"errclass", "fetch", "fixity"}},
	{"source/sourcetest", []string{"source"}},
	{"source/resourcesync", []string{"errclass", "fetch", "fixity", "internal/xmlcap", "manifest", "source", "state/changeplan"}},
	{"source/oaipmh", []string{"errclass", "fetch", "internal/xmlcap", "manifest", "source"}},
	{"source/...", []string{"errclass", "fetch", "fixity", "internal/xmlcap", "manifest", "source"}},
	{"config", []string{"manifest"}},
	{"site", []string{"config", "state"}},
	{"daemon", []string{"errclass", "site", "state"}},
	{"notify", []string{"errclass", "runreport", "state"}},
	{"notify/mailtest", []string{"internal/testbin"}},
	{"internal/testbin", nil},
	{"internal/httpserve", nil},
	{"status", []string{"internal/httpserve", "site", "state", "runreport"}},
	{"publish/holdingstest", []string{"publish", "state"}},
	{"publish/schematest", nil},
	{"publish/publisher", []string{"internal/httpserve", "publish", "publish/fromes", "sink", "site", "state"}},
	{"publish/fromes", []string{"publish", "sink", "sink/es", "state", "errclass", "fixity", "internal/retry"}},
	{"publish", []string{"errclass", "fixity", "internal/flock", "manifest", "sink", "sink/fs", "state"}},
	{"pipeline/unpack", []string{"errclass", "fetch", "fixity", "runreport", "source", "unzip"}},
	{"pipeline", []string{"errclass", "fetch", "fixity", "internal/retry", "internal/xmlcap", "pipeline/unpack", "sink", "source", "state", "unzip", "runreport"}},
	{"harvest", []string{"config", "daemon", "errclass", "fetch", "fixity", "harvestlog", "internal/httpserve", "manifest", "pipeline", "notify", "sink", "sink/sinks", "site", "source", "source/oaipmh", "source/protocols", "source/resourcesync", "state", "status", "runreport"}},
	{"bench/harness", []string{"bench", "fetch", "pipeline", "sink", "sink/fs", "source", "source/resourcesync", "state", "unzip", "errclass", "fixity", "manifest", "runreport"}},
	{"bench", []string{"errclass", "fixity", "manifest"}},
	{"harvestlog", []string{"state", "runreport"}},
	{"progress", []string{"fetch", "pipeline", "runreport"}},
	// The command line is a face: it reaches the executor, the sinks and
	// the protocols only through harvest.
	{"cli", []string{"bench", "bench/harness", "config", "daemon", "harvest", "harvestlog", "internal/httpserve", "manifest", "progress", "publish", "publish/publisher", "notify", "runreport", "sink", "site", "state", "status", "unzip"}},
	{"cmd/rsharvest", []string{"cli"}},
	{"internal/archtest", nil},
}

// TestImports lists the module's packages with go list and checks every
// import of a module package against the table.
func TestImports(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command to list the packages:", err)
	}
	cmd := exec.Command(goCmd, "list", "-json=ImportPath,Imports", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		rules, ok := rulesFor(rel)
		if !ok {
			t.Errorf("package %s is not in the table of allowed imports (internal/archtest, docs/ARCHITECTURE.md)", rel)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			if !slices.Contains(rules, "*") && !slices.ContainsFunc(rules, func(r string) bool { ok, _ := path.Match(r, dep); return ok }) {
				t.Errorf("%s imports %s, which it may not (allowed: %v)", rel, dep, rules)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("go list found %d packages", seen)
	}
}

func rulesFor(rel string) ([]string, bool) {
	for _, a := range allowed {
		if dir, ok := strings.CutSuffix(a.pkg, "/..."); ok {
			if rel == dir || strings.HasPrefix(rel, dir+"/") {
				return a.imports, true
			}
			continue
		}
		if a.pkg == rel || path.Clean(a.pkg) == rel {
			return a.imports, true
		}
	}
	return nil, false
}
