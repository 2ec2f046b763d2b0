package resourcesync_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// TestPackageIndex reads packages' manifests as the executor does,
// through the Index the planner gives each package: entries as records
// (path, change time defaulting to the package's at, where the bytes are),
// a manifest of the wrong kind refused, a malformed entry its own error
// with the rest still read.
func TestPackageIndex(t *testing.T) {
	at := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	dumpManifest := rsdoc("urlset", md(`capability="resourcedump-manifest" at="2024-03-01T00:00:00Z"`),
		`http://example.org/a length="3" path="/r/a"`,
		`http://example.org/b length="x" path="/r/b"`, // malformed: its length
		`http://example.org/c length="1" path="/r/c" datetime="2024-02-01T00:00:00Z"`)
	mirrored := `<?xml version="1.0" encoding="UTF-8"?>
<urlset ` + nsDecl + `><rs:md capability="resourcedump-manifest"/>
<url><loc>oai:example.org:1</loc><rs:md path="/r/1"/>
<rs:ln rel="duplicate" href="http://m2.example.org/1" pri="2"/><rs:ln rel="duplicate" href="http://m1.example.org/1" pri="1"/><rs:ln rel="duplicate" href="ftp://m3.example.org/1" pri="3"/></url>
<url><loc>http://example.org/2</loc><rs:md path="/r/2"/><rs:ln rel="duplicate" href="http://m1.example.org/2"/></url>
</urlset>`
	type rec struct {
		uri, path, location string
		mirrors             int
		changed             time.Time
	}
	for _, tc := range []struct {
		name    string
		change  bool
		doc     string
		want    []rec
		bad     []string // the URIs of the malformed entries
		readErr string
	}{
		{"a dump's manifest", false, dumpManifest,
			[]rec{{"http://example.org/a", "/r/a", "", 0, at}, {"http://example.org/c", "/r/c", "", 0, at.AddDate(0, -1, 0)}},
			[]string{"http://example.org/b"}, ""},
		{"where the bytes are", false, mirrored,
			[]rec{{"oai:example.org:1", "/r/1", "http://m1.example.org/1", 1, at}, {"http://example.org/2", "/r/2", "", 1, at}}, nil, ""},
		{"a change package's manifest must be one", true, dumpManifest, nil, nil, `capability "resourcedump-manifest", expected "changedump-manifest"`},
		{"not a manifest at all", false, "<html/>", nil, nil, "manifest.xml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const pkg = "http://example.org/p.zip"
			entries, err := resourcesync.NewPackageIndex(tc.change, "set", pkg, at).Read(strings.NewReader(tc.doc), slog.New(slog.DiscardHandler))
			if tc.readErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.readErr) {
					t.Fatalf("Read: %v, want an error saying %q", err, tc.readErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []rec
			var bad []string
			for {
				r, err := entries.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				var ee *source.EntryError
				if errors.As(err, &ee) {
					bad = append(bad, ee.URI)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if r.ResourceSet != "set" || r.Listed != pkg {
					t.Errorf("record %s: set %q, listed by %q", r.URI, r.ResourceSet, r.Listed)
				}
				got = append(got, rec{r.URI, r.Path, r.Location, len(r.Mirrors), r.ChangeTime})
			}
			if len(got) != len(tc.want) || strings.Join(bad, " ") != strings.Join(tc.bad, " ") {
				t.Fatalf("records %+v, malformed %v; want %+v, %v", got, bad, tc.want, tc.bad)
			}
			for i := range got {
				if got[i].uri != tc.want[i].uri || got[i].path != tc.want[i].path || got[i].location != tc.want[i].location ||
					got[i].mirrors != tc.want[i].mirrors || !got[i].changed.Equal(tc.want[i].changed) {
					t.Errorf("record %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
