package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
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

// TestDecodeSites: a registry file's sites, each with its harvest's
// settings (relative fs: paths resolved against the file's directory).
func TestDecodeSites(t *testing.T) {
	got, err := DecodeSites(strings.NewReader(sitesFile), "/etc/rsharvest/sites.yaml")
	if err != nil {
		t.Fatal(err)
	}
	two := 2
	want := []Site{
		{Name: "dspace-a", Schedule: "every 1d", Contact: "ops@a.example", Notify: "on_error", File: File{Source: "https://a.example/oai/request",
			Protocol: "oai-pmh", MetadataPrefix: "oai_dc", Sets: []string{"physics", "math"}, Sinks: []string{"fs:/etc/rsharvest/mirror/a"},
			Headers: map[string]string{"Authorization": "Bearer s3cret"}}},
		{Name: "rs-b", Schedule: "0 3 * * 1-5", File: File{Source: "https://b.example/.well-known/resourcesync",
			Sinks: []string{"s3://bucket/b?endpoint=http://127.0.0.1:9000"}, Concurrency: &two}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d sites, want %d", len(got), len(want))
	}
	for i := range want {
		g := got[i]
		g.file, g.line, g.pos = "", 0, nil
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("site %d:\n got %+v\nwant %+v", i, g, want[i])
		}
		// A site written back reads back the same.
		out, err := yaml.Marshal(&got[i])
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeSite(out, "stored")
		if err != nil {
			t.Fatalf("site %d written back: %v\n%s", i, err, out)
		}
		back.file, back.line, back.pos = "", 0, nil
		if !reflect.DeepEqual(*back, want[i]) {
			t.Errorf("site %d written back:\n got %+v\nwant %+v", i, *back, want[i])
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
		{"a process key in a site", site("    state: x.db\n"), `sites.yaml:6:5: site "a": unknown key "state"`},
		{"bad value", site("    concurrency: many\n"), `sites.yaml:6:18: site "a": concurrency: want an integer`},
		{"duplicate", site("  - name: a\n    source: http://b/\n    sinks: [fs:/b]\n    schedule: every 1d\n"), `sites.yaml:6:5: site "a": given twice (first at line 2)`},
		{"no source", "sites:\n  - name: a\n    sinks: [fs:/a]\n    schedule: every 1d\n", `sites.yaml:2:5: site "a": no source`},
		{"no schedule", "sites:\n  - name: a\n    source: http://a/\n    sinks: [fs:/a]\n", `site "a": no schedule`},
		{"bad name", "sites:\n  - name: a b\n    source: http://a/\n    sinks: [fs:/a]\n    schedule: every 1d\n", `sites.yaml:2:5: site "a b": want a name`},
		{"bad contact", site("    contact: nobody\n"), `sites.yaml:6:5: site "a": want an e-mail address`},
		{"bad notify", site("    notify: sometimes\n"), `sites.yaml:6:5: site "a": want always, on_error or on_change`},
		{"not a list", "sites: {a: 1}\n", `sites.yaml:1:8: sites: want a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeSites(strings.NewReader(tt.in), "sites.yaml")
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
	sites, err := DecodeSites(strings.NewReader("sites:\n  - name: a\n    source: http://a.example/\n    sinks: [fs:mirror, 'fs:m2?fsync=true', s3://b]\n    schedule: every 1d\n"), "sites.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fs:" + filepath.Join(dir, "mirror"), "fs:" + filepath.Join(dir, "m2") + "?fsync=true", "s3://b"}
	if got := sites[0].Sinks; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sinks %q, want %q", got, want)
	}
}
