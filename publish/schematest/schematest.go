// Package schematest validates published documents with xmllint (Debian's
// libxml2-utils) against the schemas of the sitemap and sitemap index
// formats that rsharvest writes, from the sitemaps.org protocol: every
// entry a URI as written (printable ASCII, at most 2,048 characters), its
// lastmod a W3C Datetime, the elements in the protocol's order;
// ResourceSync's rs: elements are allowed laxly (rsharvest's own reader
// checks them). For tests only.
package schematest

import (
	"bytes"
	_ "embed"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

//go:embed sitemap.xsd
var sitemapXSD []byte

//go:embed siteindex.xsd
var siteindexXSD []byte

// Validate validates every XML document under dir (a link to a
// directory, such as a publication's current generation, is followed) — each file named *.xml
// and the Source Description (.well-known/resourcesync) — against the
// schema of its root element, and fails t for each that does not
// validate, or when xmllint is missing. It returns how many documents it
// validated.
func Validate(t testing.TB, dir string) int {
	t.Helper()
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Fatal("schematest: xmllint is needed: apt-get install libxml2-utils")
	}
	schemas := t.TempDir()
	for name, b := range map[string][]byte{"sitemap.xsd": sitemapXSD, "siteindex.xsd": siteindexXSD} {
		if err := os.WriteFile(filepath.Join(schemas, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := filepath.EvalSymlinks(dir) // a generation's "current" link
	if err != nil {
		t.Fatal(err)
	}
	byRoot := map[string][]string{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".xml") || strings.HasSuffix(p, "/.well-known/resourcesync")) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		schema := "sitemap.xsd"
		if bytes.Contains(b, []byte("<sitemapindex")) {
			schema = "siteindex.xsd"
		}
		byRoot[schema] = append(byRoot[schema], p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for schema, files := range byRoot {
		out, err := exec.Command("xmllint", append([]string{"--noout", "--schema", filepath.Join(schemas, schema)}, files...)...).CombinedOutput()
		if err != nil {
			var bad []string
			for l := range strings.SplitSeq(string(out), "\n") {
				if l != "" && !strings.HasSuffix(l, " validates") {
					bad = append(bad, l)
				}
			}
			t.Errorf("schematest: %d documents against %s: %v\n%s", len(files), schema, err, strings.Join(bad, "\n"))
		}
		n += len(files)
	}
	if n == 0 {
		t.Errorf("schematest: no document under %s", dir)
	}
	return n
}
