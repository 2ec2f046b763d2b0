package schematest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestValidate: documents as the protocol describes them validate, with
// ResourceSync's elements; a loc that is not a URI as written, a lastmod
// that is not a W3C Datetime, or entries' elements out of order do not.
func TestValidate(t *testing.T) {
	const head = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
<rs:ln rel="up" href="http://example.org/caps.xml"/><rs:md capability="resourcelist" at="2026-01-01T00:00:00Z"/>`
	for _, tc := range []struct {
		name, doc string
		valid     bool
	}{
		{"resource list", head + `<url><loc>http://example.org/a%20b</loc><lastmod>2026-01-01T00:00:00.000001Z</lastmod><rs:md hash="md5:00"/></url></urlset>`, true},
		{"empty list", head + `</urlset>`, true},
		{"index", `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="resourcelist"/><sitemap><loc>http://example.org/p1.xml</loc><rs:md at="2026-01-01T00:00:00Z"/></sitemap></sitemapindex>`, true},
		{"a space in a loc", head + `<url><loc>http://example.org/a b</loc></url></urlset>`, false},
		{"non-ASCII in a loc", head + `<url><loc>http://example.org/café</loc></url></urlset>`, false},
		{"lastmod not a datetime", head + `<url><loc>http://example.org/a</loc><lastmod>yesterday</lastmod></url></urlset>`, false},
		{"lastmod before loc", head + `<url><lastmod>2026-01-01</lastmod><loc>http://example.org/a</loc></url></urlset>`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "doc.xml"), []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			r := &recorder{TB: t}
			Validate(r, dir)
			if valid := len(r.errs) == 0; valid != tc.valid {
				t.Errorf("valid = %v, want %v: %v", valid, tc.valid, r.errs)
			}
		})
	}
}
