package config_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
)

const sitesFile = `# the registry
sites:
  - name: dspace-a
    source: https://a.example/oai/request
    protocol: oai-pmh
    metadata_prefix: oai_dc
    set: [physics, math]
    sinks: [fs:mirror/a]
    schedule: every 1d
    contact: ops@a.example
    notify: on_error
    headers:
      Authorization: Bearer s3cret
  - name: rs-b
    source: https://b.example/.well-known/resourcesync
    sink: "s3://bucket/b?endpoint=http://127.0.0.1:9000"
    schedule: "0 3 * * 1-5"
    concurrency: 2
`

// decodeSites decodes a registry file with the harvest's settings.
func decodeSites(in, name string) ([]config.Site, error) {
	return config.DecodeSites(strings.NewReader(in), name, harvest.Settings(), harvest.SiteTargets)
}

// jobOf is the job a site's settings make over a zero job.
func jobOf(t *testing.T, s *config.Site) harvest.Job {
	t.Helper()
	var j harvest.Job
	if err := harvest.Settings().DecodeMapping(config.NewContext("site"), s.Settings, config.InSite, nil, nil, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestDecodeSites: a registry file's sites, each with its harvest's
// settings (relative fs: paths resolved against the file's directory), and
// each written back reads back the same.
func TestDecodeSites(t *testing.T) {
	got, err := decodeSites(sitesFile, "/etc/rsharvest/sites.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, schedule, contact, notify string
		job                             harvest.Job
	}{
		{"dspace-a", "every 1d", "ops@a.example", "on_error", harvest.Job{Source: "https://a.example/oai/request",
			Protocol: "oai-pmh", Options: map[string]string{"metadata-prefix": "oai_dc"}, Sets: []string{"physics", "math"}, Sinks: []string{"fs:/etc/rsharvest/mirror/a"},
			Headers: []string{"Authorization: Bearer s3cret"}}},
		{"rs-b", "0 3 * * 1-5", "", "", harvest.Job{Source: "https://b.example/.well-known/resourcesync",
			Sinks: []string{"s3://bucket/b?endpoint=http://127.0.0.1:9000"}, Concurrency: 2, ConcurrencySet: true}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d sites, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := &got[i]
		if g.Name != w.name || g.Schedule != w.schedule || g.Contact != w.contact || g.Notify != w.notify || !reflect.DeepEqual(jobOf(t, g), w.job) {
			t.Errorf("site %d:\n got %+v %+v\nwant %+v", i, *g, jobOf(t, g), w)
		}
		// A site written back reads back the same.
		out, err := yaml.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		back, err := config.DecodeSite(out, "stored", harvest.Settings(), harvest.SiteTargets)
		if err != nil {
			t.Fatalf("site %d written back: %v\n%s", i, err, out)
		}
		if back.Name != w.name || back.Schedule != w.schedule || !reflect.DeepEqual(jobOf(t, back), w.job) {
			t.Errorf("site %d written back:\n got %+v\nwant %+v", i, jobOf(t, back), w.job)
		}
		if stored, err := config.DecodeSite(out, "stored", nil, nil); err != nil || !reflect.DeepEqual(jobOf(t, stored), w.job) {
			t.Errorf("site %d stored, read unchecked: %v", i, err)
		}
	}
}

// TestDecodeSitesErrors: what a registry file may not hold is refused at
// its line, naming the site.
func TestDecodeSitesErrors(t *testing.T) {
	site := func(extra string) string {
		return "sites:\n  - name: a\n    source: http://a/\n    sinks: [fs:/a]\n    schedule: every 1d\n" + extra
	}
	tests := []struct {
		name, in, want string
	}{
		{"unknown top-level key", "site: []\n", `sites.yaml:1:1: unknown key "site" (did you mean "sites"?)`},
		{"unknown key in a site", site("    schedul: x\n"), `sites.yaml:6:5: site "a": unknown key "schedul" (did you mean "schedule"?)`},
		{"a process key in a site", site("    state: x.db\n"), `sites.yaml:6:5: site "a": key "state" is a setting not taken here`},
		{"bad value", site("    concurrency: many\n"), `sites.yaml:6:18: site "a": concurrency: want an integer`},
		{"duplicate", site("  - name: a\n    source: http://b/\n    sinks: [fs:/b]\n    schedule: every 1d\n"), `sites.yaml:6:5: site "a": given twice (first at line 2)`},
		{"no source", "sites:\n  - name: a\n    sinks: [fs:/a]\n    schedule: every 1d\n", `sites.yaml:2:5: site "a": no source`},
		{"no schedule", "sites:\n  - name: a\n    source: http://a/\n    sinks: [fs:/a]\n", `site "a": no schedule`},
		{"bad name", "sites:\n  - name: a b\n    source: http://a/\n    sinks: [fs:/a]\n    schedule: every 1d\n", `sites.yaml:2:5: site "a b": want a name`},
		{"bad contact", site("    contact: nobody\n"), `sites.yaml:6:5: site "a": want an e-mail address`},
		{"bad notify", site("    notify: sometimes\n"), `sites.yaml:6:5: site "a": want always, on_error or on_change`},
		{"not a list", "sites: {a: 1}\n", `sites.yaml:1:8: sites: want a list`},
		{"misindented, far down the list", site("  - name: b\n    source: http://b/\n   sinks: [fs:/b]\n    schedule: every 1d\n"), `sites.yaml:8: did not find expected '-' indicator`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeSites(tt.in, "sites.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to hold %q", err, tt.want)
			}
		})
	}
}

// TestSitesSinksAbsolute: a registry file's relative fs: sink is made
// absolute against the file's directory, whatever directory it was named
// from, so that a later run from elsewhere writes into the same mirror.
func TestSitesSinksAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	sites, err := decodeSites("sites:\n  - name: a\n    source: http://a.example/\n    sinks: [fs:mirror, 'fs:m2?fsync=true', s3://b]\n    schedule: every 1d\n", "sites.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fs:" + filepath.Join(dir, "mirror"), "fs:" + filepath.Join(dir, "m2") + "?fsync=true", "s3://b"}
	if got := sites[0].Sinks(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sinks %q, want %q", got, want)
	}
}

// TestManySites: a registry file of 100,000 sites (some 20 MB) decodes;
// the cap is on the sites, not on the bytes of a config file.
func TestManySites(t *testing.T) {
	var b strings.Builder
	b.WriteString("sites:\n")
	for i := range 100_000 {
		fmt.Fprintf(&b, "  - name: site-%d\n    source: https://repo%d.example.org/oai/request\n    protocol: oai-pmh\n    sinks: [fs:/m/%d]\n    schedule: every 1d\n", i, i, i)
	}
	sites, err := decodeSites(b.String(), "/etc/rsharvest/sites.yaml")
	if err != nil || len(sites) != 100_000 {
		t.Fatalf("%d sites, %v", len(sites), err)
	}
	if s := sites[99_999]; s.Name != "site-99999" || s.Sinks()[0] != "fs:/m/99999" {
		t.Errorf("the last site: %+v", s)
	}
}
